// The vendor-neutral graph IR: values with static types, nodes with ONNX-style
// op names and attributes, and the Graph that owns them.
//
// Nodes are kept in topological order (a node only uses values defined before
// it). Passes build a new Graph rather than editing one in place.
#pragma once

#include "graph/sym_shape.h"

#include <kiln/attributes.h>
#include <kiln/dtype.h>
#include <kiln/error.h>
#include <kiln/tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

namespace kiln::graph {

// Dynamic shapes: a value whose extents depend on data (NonZero's count,
// NonMaxSuppression's selections) has dynamic = true; its shape holds the
// extents known statically and kDynamicDim (-1) for the others. A dynamic
// value whose rank is unknown too has an empty shape. Such values exist only
// at run time on the host: reference implementations always see concrete
// tensors, and the executor never gives them device storage.
inline constexpr std::int64_t kDynamicDim = -1;

struct TensorType {
  DType dtype = DType::f32;
  SymShape shape;
  bool dynamic = false;  // some extent (or the rank, if shape is empty) is known only at run time
  bool operator==(const TensorType&) const = default;
};
// "f32[1, 3, 224, 224]"; dynamic: "i64[2, ?]", or "f32[?...]" when the rank is unknown.
std::string type_str(const TensorType& type);
// A dynamic type with the given static knowledge (kDynamicDim marks unknown extents).
TensorType dynamic_type(DType dtype, Shape shape);
// True if the concrete type `actual` is an instance of `type` (equal, or
// dynamic with the same dtype and matching known extents).
bool type_accepts(const TensorType& type, const TensorType& actual);

using ValueId = std::int32_t;
using NodeId = std::int32_t;
inline constexpr NodeId kNoNode = -1;

struct Value {
  ValueId id = -1;
  std::string name;
  TensorType type;
  NodeId producer = kNoNode;        // kNoNode for graph inputs and constants
  std::optional<Tensor> constant;   // set for constants (weights, folded values)
};

// An op's attributes are the public kiln::Attributes (include/kiln/attributes.h).
using kiln::Attribute;
using kiln::Attributes;

class Graph;

struct Node {
  NodeId id = kNoNode;
  std::string op;     // registry name, e.g. "Conv"
  std::string name;   // unique, human-readable ("layer1.0.conv1")
  std::vector<ValueId> inputs;   // -1 marks an omitted optional input
  std::vector<ValueId> outputs;
  Attributes attrs;
  // Graphs the node runs, as its op defines (If: the two branches, whose
  // inputs are values of the enclosing graph the node passes on).
  std::vector<std::shared_ptr<const Graph>> subgraphs;
};

class Graph {
 public:
  ValueId add_input(const std::string& name, TensorType type);
  // An input of a subgraph (an If branch), which may be dynamic: it stands
  // for a value of the enclosing graph, data-dependent values included.
  ValueId add_subgraph_input(const std::string& name, TensorType type);
  ValueId add_constant(const std::string& name, Tensor value);
  // Adds a node; output types come from the op registry's shape inference,
  // which throws a user error naming the node if the inputs do not fit. A
  // node with a dynamic input gets outputs typed by probing (infer_node_types):
  // dynamic where their extents follow the input's, static where not.
  std::vector<ValueId> add_node(const std::string& op, std::vector<ValueId> inputs,
                                Attributes attrs = {}, const std::string& name = "",
                                std::vector<std::shared_ptr<const Graph>> subgraphs = {});
  void set_outputs(std::vector<ValueId> outputs);
  // A graph from its parts as a file holds them (src/artifact): ids must be
  // the indices; verify()ed, so a malformed file throws naming the problem.
  static Graph from_parts(std::vector<Value> values, std::vector<Node> nodes, std::vector<ValueId> inputs,
                          std::vector<ValueId> outputs);
  // Room for this many nodes and values in all, for builders that know.
  void reserve(std::size_t nodes, std::size_t values) {
    nodes_.reserve(nodes);
    values_.reserve(values);
  }
  // Renames a value. Rename only through here: the graph indexes names.
  void rename_value(ValueId id, const std::string& name);

  // Whether a node or a value has this name. The first call indexes every
  // name; additions and renames keep the index current from then on, so
  // later calls take constant time and graphs that never ask (a pass's
  // output) never pay for it.
  bool name_taken(const std::string& name);

  const Value& value(ValueId id) const;
  // For passes and tests that edit a value in place; its name changes with rename_value().
  Value& value(ValueId id);
  const Node& node(NodeId id) const;
  const std::vector<Value>& values() const { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }

  // Number of node inputs (plus graph outputs) that read each value.
  std::vector<int> use_counts() const;

  // Checks structure (ids, topological order, every value defined once) and
  // re-runs shape inference on every node; throws Error naming the node.
  void verify() const;
  // Human-readable text: one line per input, constant (shape only) and node.
  std::string to_string() const;

 private:
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  // How many nodes and values carry each name (a node's one output shares
  // its name), once name_taken() has been asked; empty until then.
  bool names_indexed_ = false;
  std::unordered_map<std::string, int> name_uses_;

  void use_name(const std::string& name) {
    if (names_indexed_) ++name_uses_[name];
  }
  void release_name(const std::string& name);
};

}  // namespace kiln::graph

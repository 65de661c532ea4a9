// The copy-with-remapping helper every pass is built on: a pass walks the
// source graph's nodes in order and, for each, copies it, replaces it, or
// drops it and says which new value stands for its outputs.
#pragma once

#include "graph/ir.h"

#include <kiln/float16.h>

#include <optional>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

namespace kiln::graph::passes {

// Whether the weight passes rewrite weights of `dtype`: f32, and f16 and
// bf16, which they widen exactly, rewrite in f32 and round back once.
inline bool is_float_weight(DType dtype) { return dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16; }

// The value of a one-element float constant (f32 or 16-bit), or nullopt.
inline std::optional<double> float_scalar(const Value& v) {
  if (!v.constant || !is_float_weight(v.type.dtype) || v.constant->numel() != 1) return std::nullopt;
  const Tensor wide = v.type.dtype == DType::f32 ? *v.constant : v.constant->to(DType::f32);
  return static_cast<double>(wide.values<float>()[0]);
}

// Half the spacing of `dtype`'s values relative to a value: how far a
// constant written in that type may be from the real number it stands for.
inline double rounding_of(DType dtype) { return float_epsilon(dtype) / 2; }

// `rewrite` (f32 -> f32) applied to `weight`, the result in weight's own type.
template <class Rewrite>
Tensor rewrite_in_f32(const Tensor& weight, Rewrite&& rewrite) {
  if (weight.dtype() == DType::f32) return rewrite(weight);
  return rewrite(weight.to(DType::f32)).to(weight.dtype());
}

class Rewriter {
 public:
  enum class Constants {
    keep_all,   // every source constant is copied, used or not
    keep_used,  // a source constant is copied when map() first asks for it
  };

  // Starts the new graph with the source's inputs (same names, same order),
  // of the source's types or, if given, of `input_types` (one per input).
  explicit Rewriter(const Graph& source, Constants constants = Constants::keep_all,
                    std::span<const TensorType> input_types = {});

  const Graph& source() const { return source_; }
  const Graph& target() const { return target_; }

  // The new value that stands for a source value (-1 stays -1, an omitted
  // optional input). Throws Internal if the source value has no counterpart yet.
  ValueId map(ValueId source_value);
  std::vector<ValueId> map(const std::vector<ValueId>& source_values);
  // From now on `source_value` is represented by `target_value`.
  void replace(ValueId source_value, ValueId target_value);

  // The constant behind a new value, or nullptr if it is not a constant.
  const Tensor* constant(ValueId target_value) const;

  // Copies a node unchanged (op, name, attributes, output names).
  std::vector<ValueId> copy_node(const Node& node);
  // Copies a node with new inputs (new-graph ids) and attributes.
  std::vector<ValueId> copy_node(const Node& node, std::vector<ValueId> target_inputs, Attributes attrs);
  // Adds a node the source does not have, named `base_name` (or `base_name_1`,
  // ... if taken); its outputs stand for no source value until replace().
  std::vector<ValueId> add_node(const std::string& op, std::vector<ValueId> target_inputs, Attributes attrs,
                                const std::string& base_name);
  // Adds a constant named `base_name`, or `base_name_1`, ... if that is taken.
  ValueId add_constant(const std::string& base_name, Tensor value);

  // Sets the graph outputs from the source's and gives each the source
  // output's name, so that the interface survives the pass.
  Graph finish();

 private:
  ValueId copy_constant(ValueId source_value);
  std::string unique_value_name(const std::string& base) const;
  void add_name(ValueId target_value);
  // Indexes the target's names the first time the pass adds a name of its
  // own: until then every name is a distinct name of the (verified) source,
  // so copying needs no index, and passes that add nothing never build one.
  void index_names();

  const Graph& source_;
  Graph target_;
  Constants constants_;
  std::vector<ValueId> map_;  // source value id -> target value id (-1: none yet)
  bool names_indexed_ = false;
  std::unordered_set<std::string> value_names_;
  std::unordered_set<std::string> node_names_;
};

// `graph` with its inputs of these types (instances of theirs: a subgraph's
// dynamic inputs at the extents of a call), every node's types inferred again.
Graph with_input_types(const Graph& graph, std::span<const TensorType> input_types);

// Source node ids that read each source value (a node appears once per use).
std::vector<std::vector<NodeId>> consumers(const Graph& graph);

// True when the value is one of the graph's outputs.
bool is_graph_output(const Graph& graph, ValueId value);

// Who reads each value, for the pattern-matching passes: a pattern may absorb
// a value only when nothing outside the pattern reads it (a graph output
// counts as a reader).
class Readers {
 public:
  explicit Readers(const Graph& graph) : graph_(graph), uses_(graph.use_counts()), users_(consumers(graph)) {}
  // The node producing `value` when the value has exactly `uses` readers.
  const Node* single_use_producer(ValueId value, int uses = 1) const;
  // The only reader of `value`, if it has op `op`.
  const Node* single_consumer(ValueId value, const char* op) const;

 private:
  const Graph& graph_;
  std::vector<int> uses_;
  std::vector<std::vector<NodeId>> users_;
};

}  // namespace kiln::graph::passes

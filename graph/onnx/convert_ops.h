// The per-op conversion table of the ONNX importer: one rule per ONNX op type
// maps its inputs and attributes to kiln's (constant tensor inputs become
// attributes, ONNX defaults become explicit) and emits kiln nodes through the
// ImportContext, which folds them when all their inputs are constants.
#pragma once

#include "graph/ir.h"

#include <onnx/onnx_pb.h>  // ONNX_ML=1: the onnx-ml.pb.h classes

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kiln::onnx_import {

// One ONNX node, ready for its conversion rule.
// A node's inputs. Reading past the last gives -1, as an omitted optional
// input does, so a rule's n.inputs[i] never reads out of range on a file
// whose node has fewer inputs than its op needs; ImportContext::type() and
// constant() of -1 are then a Corrupt error naming the node.
class NodeInputs : public std::vector<graph::ValueId> {
 public:
  using std::vector<graph::ValueId>::vector;
  graph::ValueId operator[](std::size_t i) const { return i < size() ? data()[i] : -1; }
};

struct OnnxNode {
  const onnx::NodeProto* proto = nullptr;
  std::string op;       // ONNX op type
  std::string name;     // unique kiln node name
  std::string where;    // "<file>: node '<name>' (<op>): ", for messages
  NodeInputs inputs;                   // -1 for an omitted optional input
  graph::Attributes attrs;             // INT/FLOAT/STRING/INTS/FLOATS attributes
  int num_outputs = 0;                 // outputs the ONNX node declares
  int opset = 0;                       // of the default domain
};

// Whether the node's input `index` is given (ONNX leaves optional ones empty).
inline bool present(const OnnxNode& n, std::size_t index) { return index < n.inputs.size() && n.inputs[index] >= 0; }

// What conversion rules may do to the graph being built.
class ImportContext {
 public:
  virtual ~ImportContext() = default;
  // The constant behind a value, or nullptr.
  virtual const Tensor* constant(graph::ValueId value) const = 0;
  virtual const graph::TensorType& type(graph::ValueId value) const = 0;
  // Adds a kiln node (name "" derives one from the ONNX node's name), or
  // evaluates it right away when every input is a constant.
  virtual std::vector<graph::ValueId> emit(const OnnxNode& source, const std::string& op,
                                           std::vector<graph::ValueId> inputs, graph::Attributes attrs,
                                           const std::string& suffix = "") = 0;
  // emit() of an op with one output.
  graph::ValueId emit_one(const OnnxNode& source, const std::string& op, std::vector<graph::ValueId> inputs,
                          graph::Attributes attrs, const std::string& suffix = "") {
    return emit(source, op, std::move(inputs), std::move(attrs), suffix).at(0);
  }
  virtual graph::ValueId add_constant(const OnnxNode& source, Tensor value) = 0;
  // Counts `bytes` of constants the node is about to create from nothing (a
  // fold, ConstantOfShape, Range) against OnnxOptions::max_folded_bytes; call
  // it before allocating. Throws InvalidArgument naming the node past the budget.
  virtual void charge_folded_bytes(const OnnxNode& source, std::int64_t bytes) = 0;
  // Converts the nodes of an If branch into the graph (they may read the
  // enclosing graph's values by name) and returns the branch's outputs.
  virtual std::vector<graph::ValueId> inline_branch(const OnnxNode& source, const onnx::GraphProto& branch) = 0;
  // Imports an If branch as a graph of its own (for a condition known only at
  // run time): the enclosing graphs' values it reads become its inputs, and
  // `captured` gets them, as values of this graph, in the branch's input order.
  virtual std::shared_ptr<const graph::Graph> import_subgraph(const OnnxNode& source, const onnx::GraphProto& branch,
                                                              std::vector<graph::ValueId>& captured) = 0;
  // As import_subgraph, for a body with inputs of its own (a Loop's): they
  // are the graph's first inputs, typed `formal`; captured values follow.
  virtual std::shared_ptr<const graph::Graph> import_body(const OnnxNode& source, const onnx::GraphProto& body,
                                                          const std::vector<graph::TensorType>& formal,
                                                          std::vector<graph::ValueId>& captured) = 0;
  // Adds a node that runs subgraphs (If, Loop).
  virtual std::vector<graph::ValueId> emit_with_subgraphs(const OnnxNode& source, const std::string& op,
                                                          std::vector<graph::ValueId> inputs, graph::Attributes attrs,
                                                          std::vector<std::shared_ptr<const graph::Graph>> subgraphs) = 0;
  // Where external data files are looked up.
  virtual const std::string& base_dir() const = 0;
};

// Returns one value per ONNX output it produces (fewer when the node declares
// optional outputs kiln does not produce; the importer reports those).
using ConvertFn = std::function<std::vector<graph::ValueId>(const OnnxNode&, ImportContext&)>;

struct OpRule {
  // The kiln op the rule emits ("" for rules that only fold or alias values:
  // Constant, Shape, Identity, ...); used to check the op is registered.
  std::string kiln_op;
  ConvertFn convert;
};

// Every ONNX op type of the default domain that kiln imports.
const std::map<std::string, OpRule>& op_rules();

}  // namespace kiln::onnx_import

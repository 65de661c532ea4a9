// The op registry: for every op its schema, its shape/dtype inference and its
// plain reference CPU implementation (the oracle every backend is tested
// against). Op names and attributes follow ONNX so that import is direct.
#pragma once

#include "graph/ir.h"

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::graph {

struct OpSchema {
  std::string name;
  int min_inputs = 1;
  int max_inputs = 1;
  int num_outputs = 1;
  // True when inference decides the output count (Split: one per size);
  // num_outputs is then ignored. Inference must still return at least one.
  bool variadic_outputs = false;
  // Output types from input types (a -1 input is passed as an empty shape with
  // dtype f32 and must be treated as absent). Throws ShapeMismatch or
  // InvalidArgument with a message that names the op and both shapes.
  std::function<std::vector<TensorType>(const Node&, std::span<const TensorType>)> infer;
  // The oracle: obviously-correct, loop-by-loop, double-precision accumulation
  // where it matters. Inputs are host tensors (an absent optional input is an
  // empty Tensor with shape [0]).
  std::function<std::vector<Tensor>(const Node&, std::span<const Tensor>)> reference;
  // Control flow (If, Loop, Scan): the op with its subgraphs run by `run`.
  // `reference` is this with run_reference; the executor passes a runner
  // that compiles each subgraph like a model of its own.
  using SubgraphRunner = std::function<std::vector<Tensor>(const Graph& subgraph, std::span<const Tensor> inputs)>;
  std::function<std::vector<Tensor>(const Node&, std::span<const Tensor>, const SubgraphRunner&)> run_with_subgraphs;
  std::string summary;  // one line for `kiln explain` and docs
};

// Registers the built-in ops once (idempotent, thread-safe).
const OpSchema* find_op(std::string_view name);
// Throws Unsupported "unknown op 'X'" if absent.
const OpSchema& get_op(std::string_view name);
std::vector<std::string> registered_ops();

// Runs shape inference for a node whose inputs have the given types; wraps any
// error with the node's name and op.
std::vector<TensorType> infer_node(const Node& node, std::span<const TensorType> input_types);
// Output types of a node as the graph records them: infer_node for static
// inputs; for a node with a dynamic input, outputs whose dtype, rank and
// extents come from probing inference with the unknown extents set to three
// different sizes: an extent that follows them is dynamic, an output whose
// extents all stay put is static (Shape of a data-dependent value). If a
// probe fails, the outputs are dynamic of unknown rank, with the dtype of the
// first present input.
std::vector<TensorType> infer_node_types(const Node& node, std::span<const TensorType> input_types);
// True if any present input type is dynamic.
bool has_dynamic_input(std::span<const TensorType> input_types);
// Runs the whole graph on the reference implementation.
std::vector<Tensor> run_reference(const Graph& graph, std::span<const Tensor> inputs);
// The same, calling `observe` with every node's outputs as it computes them
// (`kiln check` compares kernels' outputs with them).
using ReferenceObserver = std::function<void(const Node& node, std::span<const Tensor> outputs)>;
std::vector<Tensor> run_reference(const Graph& graph, std::span<const Tensor> inputs,
                                  const ReferenceObserver& observe);

}  // namespace kiln::graph

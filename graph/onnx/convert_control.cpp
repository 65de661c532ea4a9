// ONNX control flow: If, Loop and Scan. A subgraph becomes a graph of its
// own (ImportContext::import_subgraph / import_body) held by a node that runs
// it on the host (graph/ops/control.cpp); an If with a constant condition is
// replaced by the branch it takes.
#include "graph/onnx/convert_control.h"

#include "src/base/check.h"

#include <kiln/error.h>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::onnx_import {

using graph::Attributes;
using graph::ValueId;

namespace {

// The node's attribute `name`, which must be a graph.
const onnx::GraphProto& graph_attribute(const OnnxNode& n, const std::string& name) {
  for (const onnx::AttributeProto& a : n.proto->attribute())
    if (a.name() == name && a.type() == onnx::AttributeProto_AttributeType_GRAPH) return a.g();
  throw_error(ErrorKind::Corrupt, n.where + "attribute '" + name + "' (a graph) is missing");
}

// A node running `body`, with only the outputs the ONNX node declares.
std::vector<ValueId> emit_with_body(const OnnxNode& n, ImportContext& ctx, const std::string& op,
                                    std::vector<ValueId> inputs, Attributes attrs,
                                    std::shared_ptr<const graph::Graph> body) {
  std::vector<ValueId> outputs = ctx.emit_with_subgraphs(n, op, std::move(inputs), std::move(attrs), {std::move(body)});
  outputs.resize(std::min(outputs.size(), static_cast<std::size_t>(std::max(n.num_outputs, 0))));
  return outputs;
}

}  // namespace

// If whose condition is a constant after import (an exporter's check of a
// shape kiln now knows): the chosen branch's nodes take its place. Otherwise
// both branches become subgraphs of an If node, a host step that reads the
// condition and runs the branch it picks.
std::vector<ValueId> convert_if(const OnnxNode& n, ImportContext& ctx) {
  KILN_CHECK(present(n, 0), ErrorKind::Corrupt, n.where + "the condition input is missing");
  auto branch = [&](const char* name) { return &graph_attribute(n, name); };
  const Tensor* cond = ctx.constant(n.inputs[0]);
  if (cond == nullptr) {
    // Read at run time: both branches become subgraphs of a host step. As
    // ONNX Runtime checks only the branch it runs, a branch that cannot be
    // imported at these shapes (an exporter's path for another input rank or
    // sample rate) fails only if the condition picks it: the other branch
    // stands in for its types and the node carries its error.
    std::vector<ValueId> then_inputs, else_inputs;
    std::optional<Error> then_error, else_error;
    auto import = [&](const char* name, std::vector<ValueId>& captured, std::optional<Error>& error) {
      std::shared_ptr<const graph::Graph> graph;
      try {
        graph = ctx.import_subgraph(n, *branch(name), captured);
      } catch (const Error& e) {
        const bool shape_dependent = e.kind() == ErrorKind::ShapeMismatch || e.kind() == ErrorKind::InvalidArgument;
        if (!shape_dependent) throw;
        error = e;
        captured.clear();
      }
      return graph;
    };
    auto then_graph = import("then_branch", then_inputs, then_error);
    auto else_graph = import("else_branch", else_inputs, else_error);
    if (then_error && else_error) throw *then_error;
    Attributes attrs;
    if (then_error) {
      then_graph = else_graph, then_inputs = else_inputs;
      attrs.set("then_error", std::string(then_error->what()));
    }
    if (else_error) {
      else_graph = then_graph, else_inputs = then_inputs;
      attrs.set("else_error", std::string(else_error->what()));
    }
    std::vector<ValueId> inputs = {n.inputs[0]};
    inputs.insert(inputs.end(), then_inputs.begin(), then_inputs.end());
    inputs.insert(inputs.end(), else_inputs.begin(), else_inputs.end());
    attrs.set("then_inputs", static_cast<std::int64_t>(then_inputs.size()));
    return ctx.emit_with_subgraphs(n, "If", std::move(inputs), std::move(attrs), {then_graph, else_graph});
  }
  KILN_CHECK(cond->dtype() == DType::boolean && cond->numel() == 1, ErrorKind::Corrupt,
             n.where + "the condition must be one bool, it is " + graph::type_str({cond->dtype(), cond->shape()}));
  const bool taken = cond->bytes()[0] != std::byte{0};
  return ctx.inline_branch(n, *branch(taken ? "then_branch" : "else_branch"));
}

// Loop: the body becomes a subgraph of a Loop node, a host step that runs it
// on the reference implementation until the trip count or the condition
// stops it. A missing trip count or condition becomes a constant (no limit,
// true). The node's inputs: the trip count, the condition, the initial
// loop-carried values, then the enclosing graph's values the body reads
// (attribute `carried` counts the loop-carried ones).
std::vector<ValueId> convert_loop(const OnnxNode& n, ImportContext& ctx) {
  const onnx::GraphProto* body = &graph_attribute(n, "body");
  const std::size_t carried = n.inputs.size() > 2 ? n.inputs.size() - 2 : 0;
  for (std::size_t k = 0; k < carried; ++k)
    KILN_CHECK(present(n, 2 + k), ErrorKind::Corrupt, n.where + "loop-carried input " + std::to_string(k) + " is missing");
  KILN_CHECK(body->output_size() >= static_cast<int>(1 + carried) && n.num_outputs <= body->output_size() - 1,
             ErrorKind::Corrupt,
             n.where + "the body has " + std::to_string(body->output_size()) + " outputs for " +
                 std::to_string(carried) + " loop-carried values and the node's " + std::to_string(n.num_outputs) +
                 " outputs");
  Tensor no_limit(DType::i64, {});
  no_limit.values<std::int64_t>()[0] = std::numeric_limits<std::int64_t>::max();
  Tensor always(DType::boolean, {});
  always.bytes()[0] = std::byte{1};
  const ValueId trip_count = present(n, 0) ? n.inputs[0] : ctx.add_constant(n, std::move(no_limit));
  const ValueId condition = present(n, 1) ? n.inputs[1] : ctx.add_constant(n, std::move(always));
  std::vector<graph::TensorType> formal = {{DType::i64, {}}, {DType::boolean, {}}};
  for (std::size_t k = 0; k < carried; ++k) formal.push_back(ctx.type(n.inputs[2 + k]));
  std::vector<ValueId> captured;
  std::shared_ptr<const graph::Graph> graph = ctx.import_body(n, *body, formal, captured);
  // A loop-carried value whose shape the body changes is dynamic in the body
  // (and out of the loop): import it again with those inputs so typed.
  bool retyped = false;
  for (std::size_t k = 0; k < carried; ++k) {
    const graph::TensorType& out = graph->value(graph->outputs()[1 + k]).type;
    graph::TensorType& in = formal[2 + k];
    KILN_CHECK(out.dtype == in.dtype, ErrorKind::ShapeMismatch,
               n.where + "loop-carried value " + std::to_string(k) + " enters as " + graph::type_str(in) +
                   " and leaves the body as " + graph::type_str(out));
    if (out == in) continue;
    Shape shape = in.shape;
    if (out.shape.size() == shape.size() && !in.dynamic)
      for (std::size_t d = 0; d < shape.size(); ++d) shape[d] = out.shape[d] == shape[d] ? shape[d] : graph::kDynamicDim;
    else
      shape.clear();
    in = graph::dynamic_type(in.dtype, std::move(shape));
    retyped = true;
  }
  if (retyped) {
    captured.clear();
    graph = ctx.import_body(n, *body, formal, captured);
  }
  std::vector<ValueId> inputs = {trip_count, condition};
  for (std::size_t k = 0; k < carried; ++k) inputs.push_back(n.inputs[2 + k]);
  inputs.insert(inputs.end(), captured.begin(), captured.end());
  Attributes attrs;
  attrs.set("carried", static_cast<std::int64_t>(carried));
  return emit_with_body(n, ctx, "Loop", std::move(inputs), std::move(attrs), std::move(graph));
}

// Scan: the body becomes a subgraph of a Scan node, a host step that runs it
// once per slice of the scan inputs along axis 0 (forward or reverse), with
// the state carried from one run to the next; scan outputs are stacked along
// axis 0. Other axes are refused naming them. Inputs: the initial states,
// the scan inputs, then the enclosing graph's values the body reads
// (attributes `states` and `scan_inputs` count the first two groups).
std::vector<ValueId> convert_scan(const OnnxNode& n, ImportContext& ctx) {
  const onnx::GraphProto* body = &graph_attribute(n, "body");
  const std::int64_t scan_inputs = n.attrs.get_int("num_scan_inputs", -1);
  KILN_CHECK(scan_inputs >= 1 && static_cast<std::size_t>(scan_inputs) <= n.inputs.size(), ErrorKind::Corrupt,
             n.where + "num_scan_inputs " + std::to_string(scan_inputs) + " does not fit the node's " +
                 std::to_string(n.inputs.size()) + " inputs");
  const std::size_t m = static_cast<std::size_t>(scan_inputs);
  const std::size_t states = n.inputs.size() - m;
  for (std::size_t i = 0; i < n.inputs.size(); ++i)
    KILN_CHECK(present(n, i), ErrorKind::Corrupt, n.where + "input " + std::to_string(i) + " is missing");
  for (const char* axes : {"scan_input_axes", "scan_output_axes"})
    for (std::int64_t axis : n.attrs.get_ints(axes, {}))
      KILN_CHECK(axis == 0, ErrorKind::Unsupported,
                 n.where + "attribute '" + axes + "' scans along axis " + std::to_string(axis) + "; only axis 0 is supported");
  std::vector<graph::TensorType> formal;
  for (std::size_t i = 0; i < states; ++i) formal.push_back(ctx.type(n.inputs[i]));
  std::int64_t length = -1;
  for (std::size_t i = states; i < n.inputs.size(); ++i) {
    graph::TensorType slice = ctx.type(n.inputs[i]);
    KILN_CHECK(!slice.dynamic && !slice.shape.empty(), ErrorKind::Unsupported,
               n.where + "scan input " + std::to_string(i - states) + " must have a known shape of rank >= 1, it is " +
                   graph::type_str(slice));
    KILN_CHECK(length < 0 || slice.shape[0] == length, ErrorKind::ShapeMismatch,
               n.where + "the scan inputs differ in length along axis 0");
    length = slice.shape[0];
    slice.shape.erase(slice.shape.begin());
    formal.push_back(slice);
  }
  KILN_CHECK(body->output_size() >= static_cast<int>(states) && n.num_outputs <= body->output_size(),
             ErrorKind::Corrupt,
             n.where + "the body has " + std::to_string(body->output_size()) + " outputs for " +
                 std::to_string(states) + " states and the node's " + std::to_string(n.num_outputs) + " outputs");
  std::vector<ValueId> captured;
  std::shared_ptr<const graph::Graph> graph = ctx.import_body(n, *body, formal, captured);
  std::vector<ValueId> inputs(n.inputs.begin(), n.inputs.end());
  inputs.insert(inputs.end(), captured.begin(), captured.end());
  Attributes attrs;
  attrs.set("states", static_cast<std::int64_t>(states));
  attrs.set("scan_inputs", scan_inputs);
  attrs.set("input_directions", n.attrs.get_ints("scan_input_directions", std::vector<std::int64_t>(m, 0)));
  attrs.set("output_directions",
            n.attrs.get_ints("scan_output_directions",
                             std::vector<std::int64_t>(static_cast<std::size_t>(body->output_size()) - states, 0)));
  return emit_with_body(n, ctx, "Scan", std::move(inputs), std::move(attrs), std::move(graph));
}

}  // namespace kiln::onnx_import

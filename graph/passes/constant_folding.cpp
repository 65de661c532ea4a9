// fold_constants: nodes whose inputs are all constants run once, at compile
// time, on their reference implementation; Identity nodes disappear.
#include "graph/op_registry.h"
#include "graph/passes/passes.h"
#include "graph/passes/rewrite.h"
#include "src/base/check.h"

#include <algorithm>

namespace kiln::graph::passes {

namespace {

// An Identity can go unless it is what gives a graph input a second name as a
// graph output (then the rewriter would have to put it back).
bool identity_removable(const Graph& graph, const Node& node) {
  const ValueId in = node.inputs[0];
  if (!is_graph_output(graph, node.outputs[0])) return true;
  const bool in_is_graph_input = std::find(graph.inputs().begin(), graph.inputs().end(), in) != graph.inputs().end();
  return !in_is_graph_input && !is_graph_output(graph, in);
}

}  // namespace

PassResult fold_constants(const Graph& graph) {
  Rewriter rw(graph);
  PassReport report{"fold_constants", 0, {}};
  for (const Node& node : graph.nodes()) {
    std::vector<ValueId> inputs = rw.map(node.inputs);
    if (node.op == "Identity" && identity_removable(graph, node)) {
      rw.replace(node.outputs[0], inputs[0]);
      report.details.push_back("removed Identity '" + node.name + "'");
      continue;
    }
    const bool has_input = std::any_of(inputs.begin(), inputs.end(), [](ValueId id) { return id >= 0; });
    const bool all_constant =
        std::all_of(inputs.begin(), inputs.end(), [&](ValueId id) { return id < 0 || rw.constant(id) != nullptr; });
    // A data-dependent op (NonZero, ...) stays a node even on constant inputs:
    // the values downstream were typed as dynamic and must stay so.
    const bool dynamic_output = std::any_of(node.outputs.begin(), node.outputs.end(),
                                            [&](ValueId id) { return graph.value(id).type.dynamic; });
    std::int64_t out_elements = 0;
    for (ValueId id : node.outputs) out_elements += graph.value(id).type.dynamic ? 0 : num_elements(graph.value(id).type.shape);
    if (!has_input || !all_constant || dynamic_output || out_elements > kMaxFoldElements) {
      rw.copy_node(node, std::move(inputs), node.attrs);
      continue;
    }
    std::vector<Tensor> args;
    for (ValueId id : inputs) args.push_back(id < 0 ? Tensor() : *rw.constant(id));
    std::vector<Tensor> results = get_op(node.op).reference(node, args);
    KILN_CHECK(results.size() == node.outputs.size(), ErrorKind::Internal,
               "fold_constants: the reference of " + node.op + " '" + node.name + "' returned " +
                   std::to_string(results.size()) + " outputs, expected " + std::to_string(node.outputs.size()));
    std::string folded;
    for (std::size_t k = 0; k < results.size(); ++k) {
      const Value& out = graph.value(node.outputs[k]);
      const TensorType actual{results[k].dtype(), results[k].shape()};
      KILN_CHECK(actual == out.type, ErrorKind::Internal,
                 "fold_constants: the reference of " + node.op + " '" + node.name + "' gave " + type_str(actual) +
                     " where shape inference gives " + type_str(out.type));
      ValueId constant = rw.add_constant(out.name, std::move(results[k]));
      rw.replace(out.id, constant);
      folded += (k ? ", " : "") + type_str(actual);
    }
    report.details.push_back("folded " + node.op + " '" + node.name + "' into a constant " + folded);
  }
  report.changes = static_cast<int>(report.details.size());
  return {rw.finish(), std::move(report)};
}

}  // namespace kiln::graph::passes

// recognise_silu: SiLU as torch.onnx.export writes it, Mul(x, Sigmoid(x)),
// becomes one Silu. x has two readers there (the Sigmoid and the Mul), so
// epilogue fusion, which fuses a value only into its single reader, would
// leave the pair as a kernel of its own after every convolution; a Silu is
// x's only reader and fuses into x's producer.
#include "graph/passes/passes.h"
#include "graph/passes/rewrite.h"

#include <map>
#include <set>
#include <string>

namespace kiln::graph::passes {

PassResult recognise_silu(const Graph& graph) {
  PassReport report{"recognise_silu", 0, {}};
  // For A/B measurements of the fused SiLU against the Sigmoid-Mul pair.
  const Readers readers(graph);
  std::map<NodeId, ValueId> silu_input;  // the Mul that becomes a Silu -> its x
  std::set<NodeId> folded_sigmoids;
  for (const Node& sigmoid : graph.nodes()) {
    if (sigmoid.op != "Sigmoid") continue;
    const ValueId x = sigmoid.inputs[0];
    // Another reader (or a graph output) still needs sigmoid(x) on its own.
    const Node* product = readers.single_consumer(sigmoid.outputs[0], "Mul");
    if (product == nullptr) continue;
    const Node& mul = *product;
    const bool x_first = mul.inputs[0] == x && mul.inputs[1] == sigmoid.outputs[0];
    const bool x_second = mul.inputs[1] == x && mul.inputs[0] == sigmoid.outputs[0];
    if (!x_first && !x_second) continue;
    // Same operands on both sides, so no broadcasting; checked anyway so that
    // the Silu's output keeps the Mul's type exactly.
    if (graph.value(mul.outputs[0]).type != graph.value(x).type || !is_float_weight(graph.value(x).type.dtype)) continue;
    silu_input[mul.id] = x;
    folded_sigmoids.insert(sigmoid.id);
  }

  Rewriter rw(graph);
  for (const Node& node : graph.nodes()) {
    if (folded_sigmoids.count(node.id) != 0) continue;  // now inside the Silu
    auto found = silu_input.find(node.id);
    if (found == silu_input.end()) {
      rw.copy_node(node);
      continue;
    }
    Node silu = node;
    silu.op = "Silu";
    rw.copy_node(silu, {rw.map(found->second)}, {});
    report.details.push_back("replaced Sigmoid and Mul '" + node.name + "' with Silu");
  }
  report.changes = static_cast<int>(report.details.size());
  return {rw.finish(), std::move(report)};
}

}  // namespace kiln::graph::passes

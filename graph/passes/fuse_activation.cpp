// fuse_activation: a Relu right after a Conv or Gemm becomes the producer's
// activation="Relu" epilogue, saving a kernel and a round trip to memory.
#include "graph/passes/passes.h"
#include "graph/passes/rewrite.h"

#include <map>
#include <set>

namespace kiln::graph::passes {

PassResult fuse_activation(const Graph& graph) {
  const std::vector<int> uses = graph.use_counts();
  const std::vector<std::vector<NodeId>> users = consumers(graph);
  std::map<NodeId, NodeId> relu_of;  // producer -> the Relu fused into it
  std::set<NodeId> fused_relus;
  for (const Node& node : graph.nodes()) {
    if ((node.op != "Conv" && node.op != "Gemm") || !node.attrs.get_string("activation", "").empty()) continue;
    const auto out = static_cast<std::size_t>(node.outputs[0]);
    // A second reader (or a graph output) still needs the value before the Relu.
    if (uses[out] != 1 || users[out].size() != 1) continue;
    const Node& user = graph.node(users[out][0]);
    if (user.op != "Relu") continue;
    relu_of[node.id] = user.id;
    fused_relus.insert(user.id);
  }

  Rewriter rw(graph);
  PassReport report{"fuse_activation", 0, {}};
  for (const Node& node : graph.nodes()) {
    if (fused_relus.count(node.id) != 0) continue;  // now inside its producer
    auto fused = relu_of.find(node.id);
    if (fused == relu_of.end()) {
      rw.copy_node(node);
      continue;
    }
    const Node& relu = graph.node(fused->second);
    Attributes attrs = node.attrs;
    attrs.set("activation", std::string("Relu"));
    std::vector<ValueId> out = rw.copy_node(node, rw.map(node.inputs), std::move(attrs));
    rw.replace(relu.outputs[0], out[0]);
    report.details.push_back("fused Relu '" + relu.name + "' into " + node.op + " '" + node.name + "'");
  }
  report.changes = static_cast<int>(report.details.size());
  return {rw.finish(), std::move(report)};
}

}  // namespace kiln::graph::passes

// eliminate_dead_code: keeps only what the graph outputs depend on.
#include "graph/passes/passes.h"
#include "graph/passes/rewrite.h"

namespace kiln::graph::passes {

PassResult eliminate_dead_code(const Graph& graph) {
  std::vector<bool> live(graph.values().size(), false);
  for (ValueId out : graph.outputs()) live[static_cast<std::size_t>(out)] = true;
  std::vector<bool> node_live(graph.nodes().size(), false);
  // Nodes are in topological order, so one backward sweep finds every live node.
  for (auto it = graph.nodes().rbegin(); it != graph.nodes().rend(); ++it) {
    bool needed = false;
    for (ValueId out : it->outputs) needed = needed || live[static_cast<std::size_t>(out)];
    if (!needed) continue;
    node_live[static_cast<std::size_t>(it->id)] = true;
    for (ValueId in : it->inputs)
      if (in >= 0) live[static_cast<std::size_t>(in)] = true;
  }

  // keep_used: a constant reaches the new graph only when a live node asks for it.
  Rewriter rw(graph, Rewriter::Constants::keep_used);
  PassReport report{"eliminate_dead_code", 0, {}};
  for (const Node& node : graph.nodes()) {
    if (node_live[static_cast<std::size_t>(node.id)])
      rw.copy_node(node);
    else
      report.details.push_back("removed " + node.op + " '" + node.name + "'");
  }
  for (const Value& v : graph.values())
    if (v.constant && !live[static_cast<std::size_t>(v.id)])
      report.details.push_back("removed constant '" + v.name + "' " + type_str(v.type));
  report.changes = static_cast<int>(report.details.size());
  return {rw.finish(), std::move(report)};
}

}  // namespace kiln::graph::passes

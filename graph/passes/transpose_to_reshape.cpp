// transpose_to_reshape: a Transpose that keeps its axes longer than 1 in
// their order (it only moves axes of extent 1, as splitting a single
// attention head does: [1, L, 1, D] -> [1, 1, L, D]) leaves every element at
// the same linear index. As a Reshape it is a view: no kernel, no copy.
#include "graph/passes/passes.h"
#include "graph/passes/rewrite.h"

#include <algorithm>

namespace kiln::graph::passes {

namespace {

// True when the permutation moves only axes of extent 1 (and there is no
// empty axis, which a Reshape's shape attribute would read as "copy").
bool moves_only_unit_axes(const Shape& input, const std::vector<std::int64_t>& perm) {
  if (perm.size() != input.size()) return false;
  if (std::any_of(input.begin(), input.end(), [](std::int64_t d) { return d == 0; })) return false;
  std::int64_t previous = -1;
  for (std::int64_t axis : perm) {
    if (axis < 0 || axis >= static_cast<std::int64_t>(input.size())) return false;
    if (input[static_cast<std::size_t>(axis)] == 1) continue;
    if (axis < previous) return false;
    previous = axis;
  }
  return true;
}

}  // namespace

PassResult transpose_to_reshape(const Graph& graph) {
  Rewriter rw(graph);
  PassReport report{"transpose_to_reshape", 0, {}};
  for (const Node& node : graph.nodes()) {
    if (node.op != "Transpose") {
      rw.copy_node(node);
      continue;
    }
    const TensorType& in = graph.value(node.inputs[0]).type;
    const TensorType& out = graph.value(node.outputs[0]).type;
    std::vector<std::int64_t> perm = node.attrs.get_ints("perm", {});
    if (perm.empty())  // ONNX's default: reverse the axes
      for (std::size_t i = in.shape.size(); i-- > 0;) perm.push_back(static_cast<std::int64_t>(i));
    if (in.dynamic || !moves_only_unit_axes(in.shape, perm)) {
      rw.copy_node(node);
      continue;
    }
    Node reshape = node;
    reshape.op = "Reshape";
    Attributes attrs;
    attrs.set("shape", std::vector<std::int64_t>(out.shape.begin(), out.shape.end()));
    rw.copy_node(reshape, rw.map(node.inputs), std::move(attrs));
    report.details.push_back("Transpose '" + node.name + "' " + type_str(in) + " -> " + type_str(out) +
                             " moves only axes of extent 1: a Reshape");
  }
  report.changes = static_cast<int>(report.details.size());
  return {rw.finish(), std::move(report)};
}

}  // namespace kiln::graph::passes

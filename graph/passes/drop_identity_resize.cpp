// drop_identity_resize: a Resize whose output has its input's shape samples
// every element at its own coordinate (scale 1 under every coordinate
// transformation but tf_crop_and_resize, whose region of interest may
// differ), and every interpolation mode weighs that sample 1 and its
// neighbours 0: the output is the input. Decode heads resize each feature map
// to the finest map's size, that map included.
#include "graph/passes/passes.h"
#include "graph/passes/rewrite.h"

namespace kiln::graph::passes {

PassResult drop_identity_resize(const Graph& graph) {
  Rewriter rw(graph);
  PassReport report{"drop_identity_resize", 0, {}};
  for (const Node& node : graph.nodes()) {
    const bool identity =
        node.op == "Resize" && !graph.value(node.inputs[0]).type.dynamic &&
        graph.value(node.inputs[0]).type == graph.value(node.outputs[0]).type &&
        node.attrs.get_string("coordinate_transformation_mode", "half_pixel") != "tf_crop_and_resize" &&
        !is_graph_output(graph, node.outputs[0]);
    if (!identity) {
      rw.copy_node(node);
      continue;
    }
    rw.replace(node.outputs[0], rw.map(node.inputs[0]));
    report.details.push_back("dropped Resize '" + node.name + "' (output shape = input shape)");
  }
  report.changes = static_cast<int>(report.details.size());
  return {rw.finish(), std::move(report)};
}

}  // namespace kiln::graph::passes

// slice_strided_pointwise_conv: a 1x1 Conv with a stride and no padding reads
// only every stride-th pixel, so it is a strided Slice of its input followed
// by a 1x1 stride-1 Conv, which the GEMM template runs with vector loads of
// contiguous pixels. Left strided, it gathers each pixel with a scalar load
// (the implicit GEMM) or runs the direct template. ResNet's downsample
// projections (stride 2 into layer2, layer3 and layer4) are such Convs. The
// result is the same to the last bit: the same products, summed in the same
// order per output. Eager never runs this pass.
#include "graph/passes/passes.h"
#include "graph/passes/rewrite.h"

#include <limits>

namespace kiln::graph::passes {

namespace {

// Channels below which a GEMM's register tiles are mostly empty anyway.
constexpr std::int64_t kMinChannels = 16;
// Output pixels (GEMM columns) below which the direct template stays faster
// (measured on ResNet-50's downsamples: docs/benchmarks/pass-thresholds.md).
constexpr std::int64_t kMinOutputPixels = 128;

bool is_strided_pointwise(const Graph& graph, const Node& node) {
  if (node.op != "Conv" || node.attrs.has("weight_layout") || node.inputs.size() < 2 || node.inputs[1] < 0)
    return false;
  const Value& weight = graph.value(node.inputs[1]);
  const Shape& x = graph.value(node.inputs[0]).type.shape;
  if (!weight.constant || weight.type.shape.size() != 4 || x.size() != 4) return false;
  const Shape& w = weight.type.shape;
  const std::vector<std::int64_t> strides = node.attrs.get_ints("strides", {1, 1});
  if (strides.size() != 2 || strides[0] < 1 || strides[1] < 1) return false;
  const std::int64_t out_pixels = ((x[2] - 1) / strides[0] + 1) * ((x[3] - 1) / strides[1] + 1);
  return out_pixels >= kMinOutputPixels && w[2] == 1 && w[3] == 1 && node.attrs.get_int("group", 1) == 1 && w[0] >= kMinChannels &&
         w[1] >= kMinChannels && (strides[0] > 1 || strides[1] > 1) &&
         node.attrs.get_ints("pads", {0, 0, 0, 0}) == std::vector<std::int64_t>{0, 0, 0, 0};
}

}  // namespace

PassResult slice_strided_pointwise_conv(const Graph& graph) {
  PassReport report{"slice_strided_pointwise_conv", 0, {}};
  Rewriter rw(graph);
  for (const Node& node : graph.nodes()) {
    if (!is_strided_pointwise(graph, node)) {
      rw.copy_node(node);
      continue;
    }
    const std::vector<std::int64_t> strides = node.attrs.get_ints("strides", {1, 1});
    Attributes slice;
    slice.set("starts", std::vector<std::int64_t>{0, 0});
    slice.set("ends", std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::max(),
                                                std::numeric_limits<std::int64_t>::max()});
    slice.set("axes", std::vector<std::int64_t>{2, 3});
    slice.set("steps", strides);
    std::vector<ValueId> inputs = rw.map(node.inputs);
    inputs[0] = rw.add_node("Slice", {inputs[0]}, std::move(slice), node.name + ".subsample")[0];
    Attributes conv = node.attrs;
    conv.set("strides", std::vector<std::int64_t>{1, 1});
    rw.copy_node(node, std::move(inputs), std::move(conv));
    report.details.push_back("sliced the input of Conv '" + node.name + "' (strides " + std::to_string(strides[0]) +
                             "x" + std::to_string(strides[1]) + ") so it runs as a stride-1 GEMM");
  }
  report.changes = static_cast<int>(report.details.size());
  return {rw.finish(), std::move(report)};
}

}  // namespace kiln::graph::passes

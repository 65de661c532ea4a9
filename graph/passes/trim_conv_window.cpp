// trim_conv_window: drops the kernel rows and columns of a Conv that only
// ever read padding. With a large dilation on a small feature map (DeepLabV3's
// ASPP: rates 12, 24, 36 on 14x14) every off-centre tap of some convolutions
// lands outside the image for every output, so the 3x3 convolution is exactly
// a 1x1 one with the centre weights, and runs as a GEMM. The result is the
// same to the last bit (the dropped taps multiplied zeros); the output shape
// is kept by adjusting the pads. Eager never runs this pass.
#include "graph/passes/passes.h"
#include "graph/passes/rewrite.h"

#include <optional>

namespace kiln::graph::passes {

namespace {

// The taps [first, last] of one spatial axis that read the image for at
// least one output position; nullopt if none does (then nothing is trimmed).
struct TapRange {
  std::int64_t first, last;
};
std::optional<TapRange> live_taps(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride,
                                  std::int64_t pad_before, std::int64_t dilation) {
  std::optional<TapRange> range;
  for (std::int64_t k = 0; k < kernel; ++k) {
    bool reads_image = false;
    for (std::int64_t o = 0; o < out && !reads_image; ++o) {
      const std::int64_t i = o * stride - pad_before + k * dilation;
      reads_image = i >= 0 && i < in;
    }
    if (!reads_image) continue;
    if (!range) range = TapRange{k, k};
    range->last = k;
  }
  return range;
}

// W[:, :, rows, cols] of an OIHW weight.
Tensor crop(const Tensor& weight, TapRange rows, TapRange cols) {
  const Shape& s = weight.shape();
  const std::int64_t kh = rows.last - rows.first + 1, kw = cols.last - cols.first + 1;
  Tensor out(DType::f32, {s[0], s[1], kh, kw});
  const auto from = weight.values<float>();
  auto to = out.values<float>();
  std::int64_t next = 0;
  for (std::int64_t oc = 0; oc < s[0] * s[1]; ++oc)
    for (std::int64_t y = rows.first; y <= rows.last; ++y)
      for (std::int64_t x = cols.first; x <= cols.last; ++x) to[next++] = from[(oc * s[2] + y) * s[3] + x];
  return out;
}

}  // namespace

PassResult trim_conv_window(const Graph& graph) {
  PassReport report{"trim_conv_window", 0, {}};
  Rewriter rw(graph);
  for (const Node& node : graph.nodes()) {
    const bool candidate = node.op == "Conv" && !node.attrs.has("weight_layout") && node.inputs.size() >= 2 &&
                           node.inputs[1] >= 0 && graph.value(node.inputs[1]).constant &&
                           is_float_weight(graph.value(node.inputs[1]).type.dtype) &&
                           graph.value(node.inputs[1]).type.shape.size() == 4 && !node.outputs.empty() &&
                           node.attrs.get_string("auto_pad", "NOTSET") == "NOTSET";
    if (!candidate) {
      rw.copy_node(node);
      continue;
    }
    const Shape& w = graph.value(node.inputs[1]).type.shape;
    const Shape& x = graph.value(node.inputs[0]).type.shape;
    const Shape& y = graph.value(node.outputs[0]).type.shape;
    const std::vector<std::int64_t> pads = node.attrs.get_ints("pads", {0, 0, 0, 0});
    const std::vector<std::int64_t> strides = node.attrs.get_ints("strides", {1, 1});
    const std::vector<std::int64_t> dilations = node.attrs.get_ints("dilations", {1, 1});
    if (x.size() != 4 || y.size() != 4 || pads.size() != 4 || strides.size() != 2 || dilations.size() != 2) {
      rw.copy_node(node);
      continue;
    }
    const auto rows = live_taps(x[2], y[2], w[2], strides[0], pads[0], dilations[0]);
    const auto cols = live_taps(x[3], y[3], w[3], strides[1], pads[1], dilations[1]);
    const bool trims = rows && cols && (rows->first > 0 || rows->last < w[2] - 1 || cols->first > 0 ||
                                        cols->last < w[3] - 1);
    if (!trims) {
      rw.copy_node(node);
      continue;
    }
    const std::int64_t kh = rows->last - rows->first + 1, kw = cols->last - cols->first + 1;
    const std::int64_t dil_h = kh == 1 ? 1 : dilations[0], dil_w = kw == 1 ? 1 : dilations[1];
    const std::int64_t top = pads[0] - rows->first * dilations[0], left = pads[1] - cols->first * dilations[1];
    // The far pads that keep the output size: (out - 1) * stride + extent = in + pads.
    const std::int64_t bottom = (y[2] - 1) * strides[0] + dil_h * (kh - 1) + 1 - x[2] - top;
    const std::int64_t right = (y[3] - 1) * strides[1] + dil_w * (kw - 1) + 1 - x[3] - left;
    if (top < 0 || left < 0 || bottom < 0 || right < 0) {
      rw.copy_node(node);
      continue;
    }
    std::vector<ValueId> inputs = rw.map(node.inputs);
    inputs[1] = rw.add_constant(node.name + ".trimmed_weight", rewrite_in_f32(*graph.value(node.inputs[1]).constant, [&](const Tensor& w) { return crop(w, *rows, *cols); }));
    Attributes attrs = node.attrs;
    attrs.set("pads", std::vector<std::int64_t>{top, left, bottom, right});
    attrs.set("dilations", std::vector<std::int64_t>{dil_h, dil_w});
    attrs.set("kernel_shape", std::vector<std::int64_t>{kh, kw});
    rw.copy_node(node, std::move(inputs), std::move(attrs));
    report.details.push_back("Conv '" + node.name + "': " + std::to_string(w[2]) + "x" + std::to_string(w[3]) +
                             " window -> " + std::to_string(kh) + "x" + std::to_string(kw) +
                             " (the other taps only read padding)");
  }
  report.changes = static_cast<int>(report.details.size());
  return {rw.finish(), std::move(report)};
}

}  // namespace kiln::graph::passes

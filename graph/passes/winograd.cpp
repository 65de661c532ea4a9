// winograd: computes a 3x3 stride-1 convolution as Winograd F(2x2, 3x3),
// which needs 16 multiplies per 2x2 outputs and input channel where the
// direct convolution needs 36. The Conv becomes
//   WinogradInput(X) -> V [16, C, tiles]             (B^T d B per 4x4 input tile)
//   MatMul(U, V)     -> M [16, K, tiles]             (one batched GEMM)
//   WinogradOutput(M, bias) -> Y [N, K, H_out, W_out] (A^T m A, bias, activation)
// with U [16, K, C] = G g G^T of every 3x3 filter g, computed here in double.
// Only a compiler can afford that weight transform, so eager keeps the
// direct convolution. The ops are defined in graph/ops/winograd.cpp.
#include "graph/op_registry.h"
#include "graph/passes/passes.h"
#include "graph/passes/rewrite.h"

#include <array>
#include <utility>
#include <span>

namespace kiln::graph::passes {

namespace {

// Below these channel counts the GEMM is too thin to beat the direct
// convolution template. Measured with `kiln profile` on lavapipe: ResNet-18's
// 64-channel 3x3s at 56x56 barely pay (GEMM + transforms 0.9x the direct
// template's time), its 128- to 512-channel ones take 0.6-0.7x.
constexpr std::int64_t kMinInChannels = 64;
constexpr std::int64_t kMinOutChannels = 64;
// The rewrite adds two dispatches (30-50 us each on lavapipe) to save a
// third of the convolution's time or less, so the convolution must do at
// least this many multiply-adds (about 0.6 ms in lavapipe's direct
// template): ResNet-18's 3x3s at 224 px do 116 M, at 32 px 2.4 M.
constexpr std::int64_t kMinMultiplyAdds = std::int64_t{8} << 20;

// The GEMM's columns (tiles) are padded to a multiple of this: the GEMM
// template's widest register tile on CPU devices is 8x16, and its heuristic
// falls back to 4-column tiles when the last tile would be mostly padding
// (ResNet's 14x14 maps: 49 tiles in 8x4 blocks took over twice as long as
// 64 zero-padded ones in 8x16 blocks).
constexpr std::int64_t kColumnMultiple = 16;

// The Winograd GEMM must do at most this fraction (7/10) of the direct
// convolution's multiplies: its transforms and two extra dispatches cost the rest.
constexpr std::pair<std::int64_t, std::int64_t> kMaxMultiplyRatio = {7, 10};

// G of F(2x2, 3x3): U = G g G^T.
constexpr std::array<std::array<double, 3>, 4> kG = {{{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}}};

// Whether the Conv is one the three Winograd ops compute: 2-D, group 1, a
// constant f32 3x3 weight, stride 1, a static 4-D input, channels enough to
// pay, and an activation WinogradOutput applies.
bool suits_winograd(const Graph& graph, const Node& conv) {
  if (conv.op != "Conv" || conv.attrs.has("weight_layout") || conv.inputs.size() < 2 || conv.inputs[1] < 0)
    return false;
  const Value& x = graph.value(conv.inputs[0]);
  const Value& weight = graph.value(conv.inputs[1]);
  if (!weight.constant || weight.type.dtype != DType::f32 || x.type.dynamic || x.type.shape.size() != 4) return false;
  const Shape& w = weight.type.shape;
  if (w.size() != 4 || w[2] != 3 || w[3] != 3 || w[0] < kMinOutChannels || w[1] < kMinInChannels) return false;
  const Shape& y = graph.value(conv.outputs[0]).type.shape;
  if (y.size() != 4 || w[0] * w[1] * 9 * y[0] * y[2] * y[3] < kMinMultiplyAdds) return false;
  const std::string activation = conv.attrs.get_string("activation", "");
  return conv.attrs.get_int("group", 1) == 1 && (activation.empty() || activation == "Relu") &&
         conv.attrs.get_string("auto_pad", "NOTSET") == "NOTSET" &&
         conv.attrs.get_ints("strides", {1, 1}) == std::vector<std::int64_t>{1, 1};
}

// OIHW [K, C, 3, 3] -> U [16, K, C], U[xi*4+nu][k][c] = (G g G^T)[xi][nu].
Tensor transform_weight(const Tensor& weight) {
  const std::int64_t out_channels = weight.shape()[0], in_channels = weight.shape()[1];
  const std::int64_t plane = out_channels * in_channels;
  Tensor u(DType::f32, {16, out_channels, in_channels});
  const auto g = weight.values<float>();
  auto to = u.values<float>();
  for (std::int64_t filter = 0; filter < plane; ++filter) {
    const float* taps = &g[static_cast<std::size_t>(filter * 9)];
    std::array<std::array<double, 3>, 4> gg{};  // G g
    for (int xi = 0; xi < 4; ++xi)
      for (int col = 0; col < 3; ++col)
        for (int row = 0; row < 3; ++row) gg[xi][col] += kG[xi][row] * taps[row * 3 + col];
    for (int xi = 0; xi < 4; ++xi)
      for (int nu = 0; nu < 4; ++nu) {
        double acc = 0;
        for (int col = 0; col < 3; ++col) acc += gg[xi][col] * kG[nu][col];
        to[static_cast<std::size_t>((xi * 4 + nu) * plane + filter)] = static_cast<float>(acc);
      }
  }
  return u;
}

}  // namespace

PassResult winograd(const Graph& graph) {
  PassReport report{"winograd", 0, {}};
  // For A/B measurements against the direct convolution.
  if (disabled_by("KILN_NO_WINOGRAD", report.details)) return {graph, std::move(report)};
  Rewriter rw(graph);
  for (const Node& node : graph.nodes()) {
    if (!suits_winograd(graph, node)) {
      rw.copy_node(node);
      continue;
    }
    const std::vector<std::int64_t> dilations = node.attrs.get_ints("dilations", {1, 1});
    Attributes input_attrs;
    input_attrs.set("pads", node.attrs.get_ints("pads", {0, 0, 0, 0}));
    input_attrs.set("dilations", dilations);
    // The tile count, as WinogradInput's inference gives it unpadded.
    const Node probe{kNoNode, "WinogradInput", node.name, {node.inputs[0]}, {}, input_attrs};
    const TensorType x_type = graph.value(node.inputs[0]).type;
    const std::int64_t tiles = infer_node(probe, std::span<const TensorType>(&x_type, 1))[0].shape[2];
    const std::int64_t columns =
        tiles > kColumnMultiple ? (tiles + kColumnMultiple - 1) / kColumnMultiple * kColumnMultiple : tiles;
    // 16 products per tile against 9 per output pixel: a large dilation on a
    // small map splits it into many nearly empty tiles (DeepLabV3's ASPP at
    // rate 12 on 14x14: 144 tiles for 196 pixels, 1.3x the direct
    // convolution's multiplies, 152 against 124 ms for the model).
    const Shape& y = graph.value(node.outputs[0]).type.shape;
    if (16 * columns * kMaxMultiplyRatio.second > 9 * y[0] * y[2] * y[3] * kMaxMultiplyRatio.first) {
      rw.copy_node(node);
      report.details.push_back("kept Conv '" + node.name + "': " + std::to_string(columns) + " tiles for " +
                               std::to_string(y[0] * y[2] * y[3]) + " output pixels save too few multiplies");
      continue;
    }
    if (columns != tiles) input_attrs.set("columns", columns);
    const ValueId v =
        rw.add_node("WinogradInput", {rw.map(node.inputs[0])}, std::move(input_attrs), node.name + ".winograd_input")[0];

    const Tensor& weight = *graph.value(node.inputs[1]).constant;
    const ValueId u = rw.add_constant(graph.value(node.inputs[1]).name + ".winograd", transform_weight(weight));
    const ValueId m = rw.add_node("MatMul", {u, v}, {}, node.name + ".winograd_matmul")[0];

    // WinogradOutput stands for the Conv: same name, same output value.
    Attributes output_attrs;
    output_attrs.set("output_shape", graph.value(node.outputs[0]).type.shape);
    output_attrs.set("dilations", dilations);
    if (node.attrs.has("activation")) output_attrs.set("activation", node.attrs.get_string("activation", ""));
    std::vector<ValueId> output_inputs = {m};
    if (node.inputs.size() > 2 && node.inputs[2] >= 0) output_inputs.push_back(rw.map(node.inputs[2]));
    Node output = node;
    output.op = "WinogradOutput";
    rw.copy_node(output, std::move(output_inputs), std::move(output_attrs));
    ++report.changes;
    report.details.push_back("Conv '" + node.name + "' " + shape_str(weight.shape()) + " -> Winograd F(2x2, 3x3), " +
                             shape_str(rw.target().value(m).type.shape) + " GEMM");
  }

  return {rw.finish(), std::move(report)};
}

}  // namespace kiln::graph::passes

// Conv: 2-D convolution (NCHW), groups, dilation, asymmetric pads, optional
// bias and kiln's fused `activation` extension.
//
// kiln extension, set only by the pack_weights compile pass (ONNX import
// never produces it): weight_layout="OIhw4o" with out_channels=M means W is
// [group * ceil((M/group)/4), C/group, kH, kW, 4]: per group, blocks of 4
// output channels with the channel innermost, zero-padded past the group's
// last channel, so a kernel loads one tap of 4 channels as one vector.
#include "graph/checked_math.h"
#include "graph/ops/ops.h"
#include "src/base/check.h"

#include <optional>

namespace kiln::graph::ops {

namespace {

constexpr std::int64_t kPackedBlock = 4;

struct ConvParams {
  std::int64_t group = 1;
  std::vector<std::int64_t> strides, dilations, pads;  // pads: top, left, bottom, right
  Activation activation = Activation::none;
  bool packed = false;            // weight_layout = "OIhw4o"
  std::int64_t out_channels = 0;  // packed only: M, which the padded weight shape hides
};

// Where W[m][c][kh][kw] (the plain OIHW coordinates) lives in either layout.
struct WeightIndexer {
  bool packed;
  std::int64_t group_out, group_in, kernel_h, kernel_w;

  std::int64_t operator()(std::int64_t m, std::int64_t c, std::int64_t kh, std::int64_t kw) const {
    const std::int64_t tap = (c * kernel_h + kh) * kernel_w + kw;
    if (!packed) return m * group_in * kernel_h * kernel_w + tap;
    const std::int64_t blocks_per_group = (group_out + kPackedBlock - 1) / kPackedBlock;
    const std::int64_t g = m / group_out, in_group = m % group_out;
    const std::int64_t block = g * blocks_per_group + in_group / kPackedBlock;
    return (block * group_in * kernel_h * kernel_w + tap) * kPackedBlock + in_group % kPackedBlock;
  }
};

ConvParams read_conv_params(const Node& node) {
  check_known_attributes(node, {"kernel_shape", "strides", "pads", "dilations", "group", "auto_pad", "activation",
                                "weight_layout", "out_channels", "f32_products"});
  check_f32_products(node);
  const std::string auto_pad = node.attrs.get_string("auto_pad", "NOTSET");
  KILN_CHECK(auto_pad == "NOTSET", ErrorKind::Unsupported,
             "auto_pad '" + auto_pad + "' is not supported; give explicit 'pads'");
  ConvParams p;
  p.group = node.attrs.get_int("group", 1);
  KILN_CHECK(p.group >= 1, ErrorKind::InvalidArgument,
             "attribute 'group' must be positive, got " + std::to_string(p.group));
  p.strides = get_ints_of_length(node, "strides", {1, 1}, 2);
  check_positive("strides", p.strides);
  p.dilations = get_ints_of_length(node, "dilations", {1, 1}, 2);
  check_positive("dilations", p.dilations);
  p.pads = get_ints_of_length(node, "pads", {0, 0, 0, 0}, 4);
  check_non_negative("pads", p.pads);
  p.activation = get_activation(node);
  const std::string layout = node.attrs.get_string("weight_layout", "OIhw");
  KILN_CHECK(layout == "OIhw" || layout == "OIhw4o", ErrorKind::InvalidArgument,
             "attribute 'weight_layout' must be \"OIhw\" or \"OIhw4o\", got \"" + layout + "\"");
  p.packed = layout == "OIhw4o";
  KILN_CHECK(p.packed == node.attrs.has("out_channels"), ErrorKind::InvalidArgument,
             "attribute 'out_channels' goes with weight_layout \"OIhw4o\" and only with it");
  if (p.packed) {
    p.out_channels = node.attrs.get_int("out_channels", 0);
    KILN_CHECK(p.out_channels >= 1, ErrorKind::InvalidArgument,
               "attribute 'out_channels' must be positive, got " + std::to_string(p.out_channels));
  }
  return p;
}

// The packed weight's shape for M output channels: see the file comment.
Shape packed_weight_shape(std::int64_t out_channels, std::int64_t group, const Shape& plain_tail) {
  const std::int64_t blocks = (out_channels / group + kPackedBlock - 1) / kPackedBlock;
  return {group * blocks, plain_tail[0], plain_tail[1], plain_tail[2], kPackedBlock};
}

std::vector<TensorType> infer_conv(const Node& node, std::span<const TensorType> in) {
  const ConvParams p = read_conv_params(node);
  const TensorType& x = in[0];
  const TensorType& w = in[1];
  require_f32("input", x);
  require_f32("weight", w);
  require_rank("input", x, 4);
  require_rank("weight", w, p.packed ? 5 : 4);
  const std::string both = ": " + describe("input", x) + ", " + describe("weight", w);
  const std::int64_t channels = x.shape[1];
  const std::int64_t out_channels = p.packed ? p.out_channels : std::int64_t{w.shape[0]};
  // group comes from a file: the product is checked.
  const std::optional<std::int64_t> expected_channels = checked_mul(w.shape[1], p.group);
  KILN_CHECK(expected_channels && channels == *expected_channels, ErrorKind::ShapeMismatch,
             "input has " + std::to_string(channels) + " channels but weight expects " +
                 (expected_channels ? std::to_string(*expected_channels) : "more than int64 holds") + " (group " +
                 std::to_string(p.group) + ")" + both);
  KILN_CHECK(out_channels % p.group == 0, ErrorKind::ShapeMismatch,
             "weight has " + std::to_string(out_channels) + " output channels, which group " + std::to_string(p.group) +
                 " does not divide" + both);
  if (p.packed) {
    const Shape expected = packed_weight_shape(out_channels, p.group, {w.shape[1], w.shape[2], w.shape[3]});
    KILN_CHECK(w.shape == expected, ErrorKind::ShapeMismatch,
               "a packed (OIhw4o) weight for " + std::to_string(out_channels) + " output channels must be " +
                   shape_str(expected) + both);
  }
  if (node.attrs.has("kernel_shape")) {
    const std::vector<std::int64_t> kernel = get_ints_of_length(node, "kernel_shape", {}, 2);
    KILN_CHECK(kernel[0] == w.shape[2] && kernel[1] == w.shape[3], ErrorKind::ShapeMismatch,
               "attribute 'kernel_shape' " + shape_str(kernel) + " does not match the weight" + both);
  }
  if (has_input(node, 2)) {
    require_f32("bias", in[2]);
    KILN_CHECK(
        in[2].shape == Shape{out_channels}, ErrorKind::ShapeMismatch,
        "bias must be [" + std::to_string(out_channels) + "] (one per output channel), got " + describe("bias", in[2]));
  }
  SymShape out{x.shape[0], out_channels, 0, 0};
  for (int d = 0; d < 2; ++d) {
    KILN_CHECK(w.shape[2 + d] >= 1, ErrorKind::ShapeMismatch,
               std::string(d == 0 ? "height" : "width") + ": the kernel is empty" + both);
    const sym::Dim padded = padded_extent(x.shape[2 + d], p.pads[d], p.pads[d + 2]);
    const std::int64_t extent = window_extent(w.shape[2 + d], p.dilations[d]);
    KILN_CHECK(padded >= extent, ErrorKind::ShapeMismatch,
               std::string(d == 0 ? "height" : "width") + ": the kernel (extent " + std::to_string(extent) +
                   " with dilation) is larger than the padded input (" + std::to_string(padded.hint()) + ")" + both);
    out[2 + d] = floor_div(padded - extent, sym::Dim(p.strides[d])) + 1;
  }
  return {{DType::f32, out}};
}

std::vector<Tensor> reference_conv(const Node& node, std::span<const Tensor> in) {
  const ConvParams p = read_conv_params(node);
  const Tensor& x = in[0];
  const Tensor& w = in[1];
  const bool has_bias = has_input(node, 2);
  const std::int64_t batch = x.shape()[0], channels = x.shape()[1], height = x.shape()[2], width = x.shape()[3];
  const std::int64_t out_channels = p.packed ? p.out_channels : w.shape()[0];
  const std::int64_t kernel_h = w.shape()[2], kernel_w = w.shape()[3];
  const std::int64_t group_in = channels / p.group, group_out = out_channels / p.group;
  const WeightIndexer weight_at{p.packed, group_out, group_in, kernel_h, kernel_w};
  const Shape out_shape = infer_conv(node, types_of(in))[0].shape;
  Tensor y(DType::f32, out_shape);
  auto xv = x.values<float>();
  auto wv = w.values<float>();
  auto yv = y.values<float>();
  const std::span<const float> bias = has_bias ? in[2].values<float>() : std::span<const float>();
  const std::int64_t out_h = out_shape[2], out_w = out_shape[3];
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t m = 0; m < out_channels; ++m) {
      const std::int64_t g = m / group_out;
      for (std::int64_t oh = 0; oh < out_h; ++oh)
        for (std::int64_t ow = 0; ow < out_w; ++ow) {
          double acc = has_bias ? bias[m] : 0.0;
          for (std::int64_t c = 0; c < group_in; ++c)
            for (std::int64_t kh = 0; kh < kernel_h; ++kh)
              for (std::int64_t kw = 0; kw < kernel_w; ++kw) {
                const std::int64_t ih = oh * p.strides[0] - p.pads[0] + kh * p.dilations[0];
                const std::int64_t iw = ow * p.strides[1] - p.pads[1] + kw * p.dilations[1];
                if (ih < 0 || ih >= height || iw < 0 || iw >= width) continue;  // zero padding
                const std::int64_t ic = g * group_in + c;
                acc += static_cast<double>(xv[((n * channels + ic) * height + ih) * width + iw]) *
                       static_cast<double>(wv[weight_at(m, c, kh, kw)]);
              }
          yv[((n * out_channels + m) * out_h + oh) * out_w + ow] =
              static_cast<float>(apply_activation(p.activation, acc));
        }
    }
  return {y};
}

}  // namespace

void register_conv_ops(OpTable& table) {
  OpSchema s;
  s.name = "Conv";
  s.min_inputs = 2;
  s.max_inputs = 3;
  s.infer = infer_conv;
  s.reference = reference_conv;
  s.summary = "2-D convolution (NCHW): X, W[M, C/group, kH, kW], optional B[M]; activation=\"Relu\" fuses a Relu; "
              "weight_layout=\"OIhw4o\" + out_channels=M: W pre-packed by the compiler";
  add_op(table, s);
}

}  // namespace kiln::graph::ops

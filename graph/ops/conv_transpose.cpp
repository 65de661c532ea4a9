// ConvTranspose: 2-D transposed convolution (NCHW), the gradient of Conv with
// respect to its input: X[N, C, H, W], W[C, M/group, kH, kW], optional B[M].
// Each input pixel scatters its weighted kernel into the output at stride
// steps; pads trim the output's borders and output_padding extends its end.
// The importer resolves auto_pad and output_shape into explicit pads, so the
// op carries only pads, strides, dilations, group and output_padding.
#include "graph/checked_math.h"
#include "graph/ops/ops.h"
#include "src/base/check.h"

#include <optional>

namespace kiln::graph::ops {

namespace {

struct ConvTransposeParams {
  std::int64_t group = 1;
  std::vector<std::int64_t> strides, dilations, pads, output_padding;  // pads: top, left, bottom, right
};

ConvTransposeParams read_conv_transpose_params(const Node& node) {
  check_known_attributes(node, {"kernel_shape", "strides", "pads", "dilations", "group", "output_padding"});
  ConvTransposeParams p;
  p.group = node.attrs.get_int("group", 1);
  KILN_CHECK(p.group >= 1, ErrorKind::InvalidArgument,
             "attribute 'group' must be positive, got " + std::to_string(p.group));
  p.strides = get_ints_of_length(node, "strides", {1, 1}, 2);
  check_positive("strides", p.strides);
  p.dilations = get_ints_of_length(node, "dilations", {1, 1}, 2);
  check_positive("dilations", p.dilations);
  p.pads = get_ints_of_length(node, "pads", {0, 0, 0, 0}, 4);
  check_non_negative("pads", p.pads);
  p.output_padding = get_ints_of_length(node, "output_padding", {0, 0}, 2);
  check_non_negative("output_padding", p.output_padding);
  return p;
}

std::vector<TensorType> infer_conv_transpose(const Node& node, std::span<const TensorType> in) {
  const ConvTransposeParams p = read_conv_transpose_params(node);
  const TensorType& x = in[0];
  const TensorType& w = in[1];
  require_f32("input", x);
  require_f32("weight", w);
  require_rank("input", x, 4);
  require_rank("weight", w, 4);
  const std::string both = ": " + describe("input", x) + ", " + describe("weight", w);
  KILN_CHECK(x.shape[1] == w.shape[0], ErrorKind::ShapeMismatch,
             "input has " + std::to_string(x.shape[1]) + " channels but the weight's first axis is " +
                 std::to_string(w.shape[0]) + both);
  KILN_CHECK(x.shape[1] % p.group == 0, ErrorKind::ShapeMismatch,
             std::to_string(x.shape[1]) + " input channels do not divide into group " + std::to_string(p.group) + both);
  const std::optional<std::int64_t> out_channels = checked_mul(w.shape[1], p.group);
  KILN_CHECK(out_channels.has_value(), ErrorKind::InvalidArgument,
             "group " + std::to_string(p.group) + " times the weight's " + std::to_string(w.shape[1]) +
                 " output channels overflows int64" + both);
  if (node.attrs.has("kernel_shape")) {
    const std::vector<std::int64_t> kernel = get_ints_of_length(node, "kernel_shape", {}, 2);
    KILN_CHECK(kernel[0] == w.shape[2] && kernel[1] == w.shape[3], ErrorKind::ShapeMismatch,
               "attribute 'kernel_shape' " + shape_str(kernel) + " does not match the weight" + both);
  }
  if (has_input(node, 2)) {
    require_f32("bias", in[2]);
    KILN_CHECK(in[2].shape == Shape{*out_channels}, ErrorKind::ShapeMismatch,
               "bias must be [" + std::to_string(*out_channels) + "] (one per output channel), got " +
                   describe("bias", in[2]));
  }
  Shape out{x.shape[0], *out_channels, 0, 0};
  for (int d = 0; d < 2; ++d) {
    const char* axis = d == 0 ? "height" : "width";
    KILN_CHECK(w.shape[2 + d] >= 1 && x.shape[2 + d] >= 1, ErrorKind::ShapeMismatch,
               std::string(axis) + ": the input and the kernel must not be empty" + both);
    // stride * (in - 1) + output_padding + window - pads, every step checked.
    std::optional<std::int64_t> extent = checked_mul(p.strides[d], x.shape[2 + d] - 1);
    if (extent) extent = checked_add(*extent, p.output_padding[d]);
    if (extent) extent = checked_add(*extent, window_extent(w.shape[2 + d], p.dilations[d]));
    KILN_CHECK(extent.has_value(), ErrorKind::InvalidArgument,
               std::string(axis) + ": the output extent overflows int64" + both);
    KILN_CHECK(*extent > p.pads[d] && *extent - p.pads[d] > p.pads[d + 2], ErrorKind::ShapeMismatch,
               std::string(axis) + ": pads " + shape_str(p.pads) + " trim away the whole output (extent " +
                   std::to_string(*extent) + " before trimming)" + both);
    out[2 + d] = *extent - p.pads[d] - p.pads[d + 2];
  }
  KILN_CHECK(checked_product(out).has_value(), ErrorKind::InvalidArgument,
             "the output " + shape_str(out) + " overflows 64-bit sizes" + both);
  return {{DType::f32, out}};
}

// Scatters each input pixel's weighted kernel into a double-precision output.
std::vector<Tensor> reference_conv_transpose(const Node& node, std::span<const Tensor> in) {
  const ConvTransposeParams p = read_conv_transpose_params(node);
  const Shape out_shape = infer_conv_transpose(node, types_of(in))[0].shape;
  const Tensor& x = in[0];
  const Tensor& w = in[1];
  const std::int64_t batch = x.shape()[0], channels = x.shape()[1], height = x.shape()[2], width = x.shape()[3];
  const std::int64_t kernel_h = w.shape()[2], kernel_w = w.shape()[3];
  const std::int64_t out_channels = out_shape[1], out_h = out_shape[2], out_w = out_shape[3];
  const std::int64_t group_in = channels / p.group, group_out = out_channels / p.group;
  auto xv = x.values<float>();
  auto wv = w.values<float>();
  std::vector<double> acc(static_cast<std::size_t>(num_elements(out_shape)), 0.0);
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t c = 0; c < channels; ++c) {
      const std::int64_t g = c / group_in;
      for (std::int64_t ih = 0; ih < height; ++ih)
        for (std::int64_t iw = 0; iw < width; ++iw) {
          const double xval = xv[((n * channels + c) * height + ih) * width + iw];
          for (std::int64_t mm = 0; mm < group_out; ++mm) {
            const std::int64_t m = g * group_out + mm;
            for (std::int64_t kh = 0; kh < kernel_h; ++kh) {
              const std::int64_t oh = ih * p.strides[0] - p.pads[0] + kh * p.dilations[0];
              if (oh < 0 || oh >= out_h) continue;  // trimmed by the pads
              for (std::int64_t kw = 0; kw < kernel_w; ++kw) {
                const std::int64_t ow = iw * p.strides[1] - p.pads[1] + kw * p.dilations[1];
                if (ow < 0 || ow >= out_w) continue;
                acc[static_cast<std::size_t>(((n * out_channels + m) * out_h + oh) * out_w + ow)] +=
                    xval * static_cast<double>(wv[((c * group_out + mm) * kernel_h + kh) * kernel_w + kw]);
              }
            }
          }
        }
    }
  Tensor y(DType::f32, out_shape);
  auto yv = y.values<float>();
  const std::span<const float> bias = has_input(node, 2) ? in[2].values<float>() : std::span<const float>();
  const std::int64_t plane = out_h * out_w;
  for (std::size_t i = 0; i < acc.size(); ++i) {
    const auto m = static_cast<std::size_t>((static_cast<std::int64_t>(i) / plane) % out_channels);
    yv[i] = static_cast<float>(acc[i] + (bias.empty() ? 0.0 : static_cast<double>(bias[m])));
  }
  return {y};
}

}  // namespace

void register_conv_transpose_ops(OpTable& table) {
  add_op(table, make_schema("ConvTranspose", 2, 3, infer_conv_transpose, reference_conv_transpose,
                            "2-D transposed convolution (NCHW): X[N, C, H, W], W[C, M/group, kH, kW], optional B[M]; "
                            "pads trim the output, output_padding extends its end"));
}

}  // namespace kiln::graph::ops

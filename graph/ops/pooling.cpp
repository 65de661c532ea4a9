// MaxPool and AveragePool (2-D, NCHW) and GlobalAveragePool, f32.
//
// Windows follow ONNX (and PyTorch): with ceil_mode a last window that would
// start inside the right/bottom padding is dropped. MaxPool's padding never
// wins (it is -inf). AveragePool with count_include_pad divides by the window
// clipped to the padded input, without count_include_pad by the taps that
// fall on the input.
#include <cmath>
#include <limits>
#include <optional>

#include "graph/checked_math.h"
#include "graph/ops/ops.h"
#include "src/base/check.h"

namespace kiln::graph::ops {

namespace {

enum class PoolKind { max, average };

struct PoolParams {
  std::vector<std::int64_t> kernel, strides, dilations;
  std::vector<std::int64_t> pads;  // top, left, bottom, right
  bool ceil_mode = false;
  bool count_include_pad = false;
};

PoolParams read_pool_params(const Node& node, PoolKind kind) {
  if (kind == PoolKind::max)
    check_known_attributes(node,
                           {"kernel_shape", "strides", "pads", "dilations", "ceil_mode", "auto_pad", "storage_order"});
  else
    check_known_attributes(
        node, {"kernel_shape", "strides", "pads", "dilations", "ceil_mode", "auto_pad", "count_include_pad"});
  const std::string auto_pad = node.attrs.get_string("auto_pad", "NOTSET");
  KILN_CHECK(auto_pad == "NOTSET", ErrorKind::Unsupported,
             "auto_pad '" + auto_pad + "' is not supported; give explicit 'pads'");
  KILN_CHECK(node.attrs.has("kernel_shape"), ErrorKind::InvalidArgument, "attribute 'kernel_shape' is required");
  PoolParams p;
  p.kernel = get_ints_of_length(node, "kernel_shape", {}, 2);
  check_positive("kernel_shape", p.kernel);
  p.strides = get_ints_of_length(node, "strides", {1, 1}, 2);
  check_positive("strides", p.strides);
  p.dilations = get_ints_of_length(node, "dilations", {1, 1}, 2);
  check_positive("dilations", p.dilations);
  KILN_CHECK(kind == PoolKind::max || p.dilations == std::vector<std::int64_t>({1, 1}), ErrorKind::Unsupported,
             "AveragePool with dilations " + shape_str(p.dilations) + " is not supported");
  p.pads = get_ints_of_length(node, "pads", {0, 0, 0, 0}, 4);
  check_non_negative("pads", p.pads);
  for (int d = 0; d < 2; ++d) {
    const std::int64_t extent = window_extent(p.kernel[d], p.dilations[d]);
    // A pad as large as the window would make windows that see only padding.
    KILN_CHECK(p.pads[d] < extent && p.pads[d + 2] < extent, ErrorKind::InvalidArgument,
               "pads " + shape_str(p.pads) + " must be smaller than the window extent " + std::to_string(extent) +
                   " (kernel_shape " + shape_str(p.kernel) + ", dilations " + shape_str(p.dilations) + ")");
  }
  p.ceil_mode = get_flag(node, "ceil_mode", false);
  if (kind == PoolKind::max) get_flag(node, "storage_order", false);  // only affects the Indices output
  if (kind == PoolKind::average) p.count_include_pad = get_flag(node, "count_include_pad", false);
  return p;
}

std::int64_t pooled_size(std::int64_t size, std::int64_t pad_begin, std::int64_t pad_end, std::int64_t extent,
                         std::int64_t stride, bool ceil_mode) {
  // The caller checked extent <= padded, so span >= 0; the ceiling division
  // and the product below are written so that a huge stride cannot overflow.
  const std::int64_t span = padded_extent(size, pad_begin, pad_end) - extent;
  if (!ceil_mode) return span / stride + 1;
  std::int64_t out = span / stride + (span % stride != 0 ? 1 : 0) + 1;
  // The last window would start in the end padding (size + pad_begin fits: it is below the padded extent).
  const std::optional<std::int64_t> last_start = checked_mul(out - 1, stride);
  if (!last_start || *last_start >= size + pad_begin) --out;
  return out;
}

sym::Dim pooled_size(const sym::Dim& size, std::int64_t pad_begin, std::int64_t pad_end, std::int64_t extent,
                     std::int64_t stride, bool ceil_mode) {
  if (!size.symbolic()) return pooled_size(size.hint(), pad_begin, pad_end, extent, stride, ceil_mode);
  const sym::Dim span = padded_extent(size, pad_begin, pad_end) - extent;
  if (!ceil_mode) return floor_div(span, sym::Dim(stride)) + 1;
  sym::Dim out = ceil_div(span, sym::Dim(stride)) + 1;
  if ((out - 1) * stride >= size + pad_begin) out -= 1;  // the last window would start in the end padding
  return out;
}

TensorType infer_pool_type(const Node& node, const TensorType& x, PoolKind kind) {
  const PoolParams p = read_pool_params(node, kind);
  require_f32("input", x);
  require_rank("input", x, 4);
  SymShape out{x.shape[0], x.shape[1], 0, 0};
  for (int d = 0; d < 2; ++d) {
    const sym::Dim padded = padded_extent(x.shape[2 + d], p.pads[d], p.pads[d + 2]);
    const std::int64_t extent = window_extent(p.kernel[d], p.dilations[d]);
    KILN_CHECK(padded >= extent, ErrorKind::ShapeMismatch,
               std::string(d == 0 ? "height" : "width") + ": the window (extent " + std::to_string(extent) +
                   ") is larger than the padded input (" + std::to_string(padded.hint()) + "): " + describe("input", x) +
                   ", kernel_shape " + shape_str(p.kernel) + ", pads " + shape_str(p.pads));
    out[2 + d] = pooled_size(x.shape[2 + d], p.pads[d], p.pads[d + 2], extent, p.strides[d], p.ceil_mode);
  }
  return {DType::f32, out};
}

std::vector<Tensor> reference_pool(const Node& node, const Tensor& x, PoolKind kind) {
  const PoolParams p = read_pool_params(node, kind);
  const Shape out_shape = infer_pool_type(node, {x.dtype(), x.shape()}, kind).shape;
  const std::int64_t planes = x.shape()[0] * x.shape()[1], height = x.shape()[2], width = x.shape()[3];
  const std::int64_t out_h = out_shape[2], out_w = out_shape[3];
  auto xv = x.values<float>();
  Tensor y(DType::f32, out_shape);
  auto yv = y.values<float>();
  for (std::int64_t plane = 0; plane < planes; ++plane)
    for (std::int64_t oh = 0; oh < out_h; ++oh)
      for (std::int64_t ow = 0; ow < out_w; ++ow) {
        const std::int64_t h0 = oh * p.strides[0] - p.pads[0];
        const std::int64_t w0 = ow * p.strides[1] - p.pads[1];
        double max = -std::numeric_limits<double>::infinity();
        double sum = 0.0;
        std::int64_t on_input = 0;
        for (std::int64_t kh = 0; kh < p.kernel[0]; ++kh)
          for (std::int64_t kw = 0; kw < p.kernel[1]; ++kw) {
            const std::int64_t ih = h0 + kh * p.dilations[0];
            const std::int64_t iw = w0 + kw * p.dilations[1];
            if (ih < 0 || ih >= height || iw < 0 || iw >= width) continue;
            const double v = xv[(plane * height + ih) * width + iw];
            max = std::fmax(max, v);
            sum += v;
            ++on_input;
          }
        double result = max;
        if (kind == PoolKind::average) {
          std::int64_t count = on_input;
          if (p.count_include_pad) {
            // The window clipped to the padded input [-pad_begin, size + pad_end).
            const std::int64_t rows = std::min(h0 + p.kernel[0], height + p.pads[2]) - h0;
            const std::int64_t cols = std::min(w0 + p.kernel[1], width + p.pads[3]) - w0;
            count = rows * cols;
          }
          KILN_ASSERT(count > 0);
          result = sum / static_cast<double>(count);
        }
        yv[(plane * out_h + oh) * out_w + ow] = static_cast<float>(result);
      }
  return {y};
}

OpSchema pool_schema(const std::string& name, PoolKind kind, const std::string& summary) {
  OpSchema s;
  s.name = name;
  s.infer = [kind](const Node& node, std::span<const TensorType> in) -> std::vector<TensorType> {
    return {infer_pool_type(node, in[0], kind)};
  };
  s.reference = [kind](const Node& node, std::span<const Tensor> in) { return reference_pool(node, in[0], kind); };
  s.summary = summary;
  return s;
}

// ---- GlobalAveragePool ----------------------------------------------------------

std::vector<TensorType> infer_global_average_pool(const Node& node, std::span<const TensorType> in) {
  check_known_attributes(node, {});
  const TensorType& x = in[0];
  require_f32("input", x);
  KILN_CHECK(x.shape.size() >= 3, ErrorKind::ShapeMismatch,
             "input must have rank >= 3 (N, C, spatial...), got " + describe("input", x));
  KILN_CHECK(element_count(std::span(x.shape).subspan(2)) > 0, ErrorKind::ShapeMismatch,
             "input has no spatial elements to average: " + describe("input", x));
  SymShape out = x.shape;
  for (std::size_t d = 2; d < out.size(); ++d) out[d] = 1;
  return {{DType::f32, out}};
}

std::vector<Tensor> reference_global_average_pool(const Node& node, std::span<const Tensor> in) {
  const Tensor& x = in[0];
  const Shape out_shape = infer_global_average_pool(node, types_of(in))[0].shape;
  const std::int64_t planes = x.shape()[0] * x.shape()[1];
  const std::int64_t spatial = num_elements(Shape(x.shape().begin() + 2, x.shape().end()));
  auto xv = x.values<float>();
  Tensor y(DType::f32, out_shape);
  auto yv = y.values<float>();
  for (std::int64_t plane = 0; plane < planes; ++plane) {
    double sum = 0.0;
    for (std::int64_t s = 0; s < spatial; ++s) sum += xv[plane * spatial + s];
    yv[plane] = static_cast<float>(sum / static_cast<double>(spatial));
  }
  return {y};
}

}  // namespace

void register_pooling_ops(OpTable& table) {
  add_op(table, pool_schema("MaxPool", PoolKind::max,
                            "2-D max over kernel_shape windows (padding never wins; dilations, ceil_mode)"));
  add_op(table, pool_schema("AveragePool", PoolKind::average,
                            "2-D mean over kernel_shape windows (count_include_pad, ceil_mode)"));
  OpSchema global;
  global.name = "GlobalAveragePool";
  global.infer = infer_global_average_pool;
  global.reference = reference_global_average_pool;
  global.summary = "mean over all spatial dims: [N, C, ...] -> [N, C, 1, ...]";
  add_op(table, global);
}

}  // namespace kiln::graph::ops

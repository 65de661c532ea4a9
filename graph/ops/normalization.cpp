// LayerNormalization, BatchNormalization (inference form) and LRN, f32.
#include <algorithm>
#include <cmath>

#include "graph/broadcast.h"
#include "graph/ops/ops.h"
#include "src/base/check.h"

namespace kiln::graph::ops {

namespace {

double read_epsilon(const Node& node) {
  const double epsilon = node.attrs.get_float("epsilon", 1e-5);
  KILN_CHECK(std::isfinite(epsilon) && epsilon >= 0.0, ErrorKind::InvalidArgument,
             "attribute 'epsilon' must be finite and >= 0, got " + std::to_string(epsilon));
  return epsilon;
}

// ---- LayerNormalization -------------------------------------------------------------

// X is normalised over dims [axis, rank): returns axis in [0, rank).
std::int64_t layer_norm_axis(const Node& node, const TensorType& x) {
  check_known_attributes(node, {"axis", "epsilon", "stash_type", "statistics"});
  read_epsilon(node);
  const std::int64_t stash_type = node.attrs.get_int("stash_type", 1);
  KILN_CHECK(stash_type == 1, ErrorKind::Unsupported,
             "attribute 'stash_type' " + std::to_string(stash_type) + " is not supported (1: float)");
  KILN_CHECK(!x.shape.empty(), ErrorKind::ShapeMismatch, "input must have rank >= 1, got " + describe("X", x));
  return normalize_axis(node.attrs.get_int("axis", -1), static_cast<std::int64_t>(x.shape.size()), "axis");
}

std::vector<TensorType> infer_layer_norm(const Node& node, std::span<const TensorType> in) {
  const TensorType& x = in[0];
  require_f32("X", x);
  const std::int64_t axis = layer_norm_axis(node, x);
  const SymShape normalized(x.shape.begin() + axis, x.shape.end());
  const char* names[] = {"X", "Scale", "B"};
  for (std::size_t i = 1; i < 3; ++i) {
    if (!has_input(node, i)) continue;
    require_f32(names[i], in[i]);
    KILN_CHECK(dims_broadcast_to(in[i].shape, normalized), ErrorKind::ShapeMismatch,
               describe(names[i], in[i]) + " does not broadcast to the normalized shape " + shape_str(normalized.hints()) +
                   " of " + describe("X", x) + " (axis " + std::to_string(axis) + ")");
  }
  if (!get_flag(node, "statistics", false)) return {x};
  // Mean and InvStdDev: X's shape with the normalised dims reduced to 1.
  SymShape stats_shape = x.shape;
  for (std::size_t d = static_cast<std::size_t>(axis); d < stats_shape.size(); ++d) stats_shape[d] = 1;
  return {x, {DType::f32, stats_shape}, {DType::f32, stats_shape}};
}

std::vector<Tensor> reference_layer_norm(const Node& node, std::span<const Tensor> in) {
  const Tensor& x = in[0];
  const std::int64_t axis = layer_norm_axis(node, {x.dtype(), x.shape()});
  const double epsilon = read_epsilon(node);
  const Shape normalized(x.shape().begin() + axis, x.shape().end());
  const std::int64_t inner = num_elements(normalized);
  const std::int64_t outer = inner == 0 ? 0 : x.numel() / inner;
  const Strides scale_strides = broadcast_strides(in[1].shape(), normalized);
  const bool has_bias = has_input(node, 2);
  const Strides bias_strides = has_bias ? broadcast_strides(in[2].shape(), normalized) : Strides{};
  auto xv = x.values<float>();
  auto scale = in[1].values<float>();
  Tensor y(DType::f32, x.shape());
  auto yv = y.values<float>();
  Shape stats_shape = x.shape();
  for (std::size_t d = static_cast<std::size_t>(axis); d < stats_shape.size(); ++d) stats_shape[d] = 1;
  Tensor means(DType::f32, stats_shape), inv_stds(DType::f32, stats_shape);
  // Offset of normalized element j in a broadcast parameter.
  auto param_offset = [&](std::int64_t j, const Strides& strides) {
    const std::vector<std::int64_t> coords = unravel_index(j, normalized);
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < coords.size(); ++d) offset += coords[d] * strides[d];
    return offset;
  };
  for (std::int64_t row = 0; row < outer; ++row) {
    const std::int64_t base = row * inner;
    double mean = 0.0;
    for (std::int64_t j = 0; j < inner; ++j) mean += xv[base + j];
    mean /= static_cast<double>(inner);
    double variance = 0.0;
    for (std::int64_t j = 0; j < inner; ++j) variance += (xv[base + j] - mean) * (xv[base + j] - mean);
    variance /= static_cast<double>(inner);
    const double inv_std = 1.0 / std::sqrt(variance + epsilon);
    means.values<float>()[static_cast<std::size_t>(row)] = static_cast<float>(mean);
    inv_stds.values<float>()[static_cast<std::size_t>(row)] = static_cast<float>(inv_std);
    for (std::int64_t j = 0; j < inner; ++j) {
      double value = (xv[base + j] - mean) * inv_std * scale[param_offset(j, scale_strides)];
      if (has_bias) value += in[2].values<float>()[param_offset(j, bias_strides)];
      yv[base + j] = static_cast<float>(value);
    }
  }
  if (!get_flag(node, "statistics", false)) return {y};
  return {y, means, inv_stds};
}

// ---- LRN (local response normalization across channels) -----------------------------

struct LrnParams {
  double alpha, beta, bias;
  std::int64_t size;
};

LrnParams read_lrn(const Node& node) {
  check_known_attributes(node, {"alpha", "beta", "bias", "size"});
  KILN_CHECK(node.attrs.has("size"), ErrorKind::InvalidArgument, "attribute 'size' is required");
  const LrnParams p{node.attrs.get_float("alpha", 1e-4), node.attrs.get_float("beta", 0.75),
                    node.attrs.get_float("bias", 1.0), node.attrs.get_int("size", 1)};
  KILN_CHECK(p.size > 0, ErrorKind::InvalidArgument, "attribute 'size' must be positive, got " + std::to_string(p.size));
  return p;
}

std::vector<TensorType> infer_lrn(const Node& node, std::span<const TensorType> in) {
  read_lrn(node);
  require_f32("X", in[0]);
  KILN_CHECK(in[0].shape.size() >= 2, ErrorKind::ShapeMismatch,
             "input must have rank >= 2 (N, C, ...), got " + describe("X", in[0]));
  return {in[0]};
}

// y = x / (bias + alpha / size * sum of x^2 over channels [c - floor((size-1)/2), c + ceil((size-1)/2)])^beta
std::vector<Tensor> reference_lrn(const Node& node, std::span<const Tensor> in) {
  const LrnParams p = read_lrn(node);
  const Tensor& x = in[0];
  const std::int64_t batch = x.shape()[0], channels = x.shape()[1];
  const std::int64_t spatial = batch * channels == 0 ? 0 : x.numel() / (batch * channels);
  const std::int64_t below = (p.size - 1) / 2, above = p.size - 1 - below;
  auto xv = x.values<float>();
  Tensor y(DType::f32, x.shape());
  auto yv = y.values<float>();
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t c = 0; c < channels; ++c)
      for (std::int64_t s = 0; s < spatial; ++s) {
        double sum = 0.0;
        for (std::int64_t k = std::max<std::int64_t>(0, c - below); k <= std::min(channels - 1, c + above); ++k) {
          const double v = xv[static_cast<std::size_t>((n * channels + k) * spatial + s)];
          sum += v * v;
        }
        const std::size_t i = static_cast<std::size_t>((n * channels + c) * spatial + s);
        yv[i] = static_cast<float>(xv[i] / std::pow(p.bias + p.alpha / static_cast<double>(p.size) * sum, p.beta));
      }
  return {y};
}

// ---- BatchNormalization -------------------------------------------------------------

void read_batch_norm_params(const Node& node) {
  check_known_attributes(node, {"epsilon", "momentum", "training_mode"});
  read_epsilon(node);
  KILN_CHECK(!get_flag(node, "training_mode", false), ErrorKind::Unsupported,
             "training_mode=1 is not supported (inference only)");
}

std::vector<TensorType> infer_batch_norm(const Node& node, std::span<const TensorType> in) {
  read_batch_norm_params(node);
  const TensorType& x = in[0];
  require_f32("X", x);
  KILN_CHECK(x.shape.size() >= 2, ErrorKind::ShapeMismatch,
             "input must have rank >= 2 (N, C, ...), got " + describe("X", x));
  const std::int64_t channels = x.shape[1];
  const char* names[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (std::size_t i = 1; i < 5; ++i) {
    require_f32(names[i], in[i]);
    KILN_CHECK(in[i].shape == Shape{channels}, ErrorKind::ShapeMismatch,
               std::string(names[i]) + " must be [" + std::to_string(channels) + "] (one per channel of " +
                   describe("X", x) + "), got " + describe(names[i], in[i]));
  }
  return {x};
}

std::vector<Tensor> reference_batch_norm(const Node& node, std::span<const Tensor> in) {
  read_batch_norm_params(node);
  const double epsilon = read_epsilon(node);
  const Tensor& x = in[0];
  const std::int64_t batch = x.shape()[0], channels = x.shape()[1];
  const std::int64_t spatial = batch * channels == 0 ? 0 : x.numel() / (batch * channels);
  auto xv = x.values<float>();
  auto scale = in[1].values<float>();
  auto bias = in[2].values<float>();
  auto mean = in[3].values<float>();
  auto var = in[4].values<float>();
  Tensor y(DType::f32, x.shape());
  auto yv = y.values<float>();
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t c = 0; c < channels; ++c) {
      const double inv_std = 1.0 / std::sqrt(static_cast<double>(var[c]) + epsilon);
      for (std::int64_t s = 0; s < spatial; ++s) {
        const std::int64_t i = (n * channels + c) * spatial + s;
        yv[i] = static_cast<float>((xv[i] - static_cast<double>(mean[c])) * inv_std * scale[c] + bias[c]);
      }
    }
  return {y};
}

}  // namespace

void register_normalization_ops(OpTable& table) {
  OpSchema layer_norm;
  layer_norm.name = "LayerNormalization";
  layer_norm.min_inputs = 2;
  layer_norm.max_inputs = 3;
  layer_norm.variadic_outputs = true;  // Y, or Y, Mean and InvStdDev with `statistics`
  layer_norm.infer = infer_layer_norm;
  layer_norm.reference = reference_layer_norm;
  layer_norm.summary =
      "normalise X over dims [axis, rank), then * Scale + B (both broadcast to those dims); with statistics=1 "
      "also Mean and InvStdDev";
  add_op(table, layer_norm);

  add_op(table, make_schema("LRN", 1, 1, infer_lrn, reference_lrn,
                            "x / (bias + alpha / size * sum of squares over `size` neighbouring channels)^beta"));

  OpSchema batch_norm;
  batch_norm.name = "BatchNormalization";
  batch_norm.min_inputs = 5;
  batch_norm.max_inputs = 5;
  batch_norm.infer = infer_batch_norm;
  batch_norm.reference = reference_batch_norm;
  batch_norm.summary = "inference batch norm: (X - mean) / sqrt(var + epsilon) * scale + B, per channel (dim 1)";
  add_op(table, batch_norm);
}

}  // namespace kiln::graph::ops

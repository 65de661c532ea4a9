// Conv (2-D, NCHW): the node's geometry checked and handed to the kernel
// templates (shaders/conv_template.h: 1x1 as GEMM, implicit GEMM,
// register-blocked direct, depthwise), with the algorithm and knobs the
// heuristic picks for the target (or the target's override, tuning_site.h).
// Grouped convolution, dilation, asymmetric pads, optional bias and the
// fused activation are all baked in as constants. A weight the
// pack_weights pass laid out as OIhw4o (weight_layout attribute, with
// out_channels) goes to the direct template's packed variant.
#include "shaders/conv_template.h"
#include "src/lower/index.h"
#include "src/lower/lowerings.h"
#include "src/lower/tuning_site.h"

namespace kiln::lower {

using kir::Access;
using kir::Expr;
using kir::ScalarType;

namespace {

struct ConvGeometry {
  bool packed_weights;  // W is OIhw4o: [groups * ceil(cog / 4), C/g, kH, kW, 4]
  std::int64_t batch, in_channels, out_channels, groups;
  std::int64_t in_channels_per_group, out_channels_per_group;
  WindowAxis rows, cols;  // H and W
};

ConvGeometry conv_geometry(const OpContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& w = ctx.input_shape(1);
  const Shape& y = ctx.output_shape();
  const std::vector<std::int64_t> pads = get_ints_exactly(ctx, "pads", 4, {0, 0, 0, 0});
  const std::vector<std::int64_t> strides = get_ints_exactly(ctx, "strides", 2, {1, 1});
  const std::vector<std::int64_t> dilations = get_ints_exactly(ctx, "dilations", 2, {1, 1});
  ConvGeometry g{};
  g.packed_weights = ctx.node.attrs.get_string("weight_layout", "OIhw") == "OIhw4o";
  g.batch = x[0];
  g.in_channels = x[1];
  g.out_channels = g.packed_weights ? ctx.node.attrs.get_int("out_channels", 0) : w[0];
  g.groups = ctx.node.attrs.get_int("group", 1);
  g.in_channels_per_group = w[1];
  g.out_channels_per_group = g.groups > 0 ? g.out_channels / g.groups : 0;
  g.rows = {x[2], y.size() == 4 ? y[2] : 0, w[2], strides[0], dilations[0], pads[0]};
  g.cols = {x[3], y.size() == 4 ? y[3] : 0, w[3], strides[1], dilations[1], pads[1]};
  return g;
}

// ONNX's output extent of one spatial axis (floor mode).
std::int64_t expected_extent(const WindowAxis& axis, std::int64_t pad_end) {
  return (axis.input_extent + axis.pad_begin + pad_end - axis.dilation * (axis.kernel - 1) - 1) / axis.stride + 1;
}

}  // namespace

std::optional<std::string> conv_unsupported(const OpContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& w = ctx.input_shape(1);
  const std::string layout = ctx.node.attrs.get_string("weight_layout", "OIhw");
  if (layout != "OIhw" && layout != "OIhw4o") return "weight_layout '" + layout + "' is not supported";
  const std::size_t weight_rank = layout == "OIhw4o" ? 5 : 4;
  if (x.size() != 4 || w.size() != weight_rank)
    return "only 2-D convolution is supported (X " + shape_str(x) + ", W " + shape_str(w) + " in layout " + layout +
           ")";
  const std::string auto_pad = ctx.node.attrs.get_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET") return "auto_pad='" + auto_pad + "' is not supported (give explicit pads)";
  if (auto reason = activation_unsupported(ctx)) return reason;
  const ConvGeometry g = conv_geometry(ctx);
  const std::vector<std::int64_t> pads = get_ints_exactly(ctx, "pads", 4, {0, 0, 0, 0});
  if (ctx.node.attrs.has("kernel_shape") && get_ints_exactly(ctx, "kernel_shape", 2, {}) != Shape{w[2], w[3]})
    return "kernel_shape does not match W " + shape_str(w);
  if (g.groups < 1 || g.in_channels % g.groups != 0 || g.out_channels % g.groups != 0 ||
      g.in_channels_per_group * g.groups != g.in_channels)
    return "group=" + std::to_string(g.groups) + " does not fit X " + shape_str(x) + " and W " + shape_str(w);
  for (const WindowAxis* axis : {&g.rows, &g.cols})
    if (axis->stride < 1 || axis->dilation < 1 || axis->pad_begin < 0)
      return "strides and dilations must be >= 1 and pads >= 0";
  if (pads[2] < 0 || pads[3] < 0) return "pads must be >= 0";
  if (g.packed_weights) {
    const std::int64_t blocks = (g.out_channels_per_group + 3) / 4;
    if (g.out_channels < 1 || w[0] != g.groups * blocks || w[4] != 4)
      return "packed weight " + shape_str(w) + " does not hold " + std::to_string(g.out_channels) +
             " output channels in blocks of 4";
  }
  if (ctx.has_input(2) && ctx.input_shape(2) != Shape{g.out_channels})
    return "bias " + shape_str(ctx.input_shape(2)) + " is not [" + std::to_string(g.out_channels) + "]";
  const Shape expected = {g.batch, g.out_channels, expected_extent(g.rows, pads[2]), expected_extent(g.cols, pads[3])};
  if (ctx.output_shape() != expected)
    return "output " + shape_str(ctx.output_shape()) + " is not the expected " + shape_str(expected);
  return std::nullopt;
}

shaders::ConvProblem conv_problem(const OpContext& ctx) {
  const ConvGeometry g = conv_geometry(ctx);
  shaders::ConvProblem problem;
  problem.batch = g.batch;
  problem.in_channels = g.in_channels;
  problem.out_channels = g.out_channels;
  problem.groups = g.groups;
  problem.in_h = g.rows.input_extent;
  problem.in_w = g.cols.input_extent;
  problem.out_h = g.rows.output_extent;
  problem.out_w = g.cols.output_extent;
  problem.kernel_h = g.rows.kernel;
  problem.kernel_w = g.cols.kernel;
  problem.stride_h = g.rows.stride;
  problem.stride_w = g.cols.stride;
  problem.dilation_h = g.rows.dilation;
  problem.dilation_w = g.cols.dilation;
  problem.pad_top = g.rows.pad_begin;
  problem.pad_left = g.cols.pad_begin;
  problem.packed_weights = g.packed_weights;
  problem.spatial_extents_vary = ctx.target.spatial_extents_vary;
  return problem;
}

kir::Kernel lower_conv(const OpContext& ctx) {
  kir::Kernel kernel("conv2d");
  shaders::ConvProblem problem = conv_problem(ctx);
  problem.x = kernel.add_buffer("x", ScalarType::f32, Access::read);
  problem.w = kernel.add_buffer("w", ScalarType::f32, Access::read);
  if (ctx.has_input(2)) problem.bias = kernel.add_buffer("bias", ScalarType::f32, Access::read);
  problem.y = kernel.add_buffer("y", ScalarType::f32, Access::write);
  problem.activation = [&ctx](Expr value) { return apply_activation(ctx, value); };

  build_tuned_conv(kernel, problem, ctx.target);
  return kernel;
}

}  // namespace kiln::lower

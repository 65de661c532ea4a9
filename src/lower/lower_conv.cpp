// Conv (2-D, NCHW): one invocation per output element, looping over the input
// channels of its group and the kernel window. Grouped and depthwise
// convolution, dilation, asymmetric pads, optional bias and the fused
// activation are all baked in as constants.
#include "src/lower/index.h"
#include "src/lower/lowerings.h"

namespace kiln::lower {

using kir::Access;
using kir::Expr;
using kir::ScalarType;
using kir::Stmt;

namespace {

struct ConvGeometry {
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
  g.batch = x[0];
  g.in_channels = x[1];
  g.out_channels = w[0];
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
  if (x.size() != 4 || w.size() != 4)
    return "only 2-D convolution is supported (X " + shape_str(x) + ", W " + shape_str(w) + ")";
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
  if (ctx.has_input(2) && ctx.input_shape(2) != Shape{g.out_channels})
    return "bias " + shape_str(ctx.input_shape(2)) + " is not [" + std::to_string(g.out_channels) + "]";
  const Shape expected = {g.batch, g.out_channels, expected_extent(g.rows, pads[2]), expected_extent(g.cols, pads[3])};
  if (ctx.output_shape() != expected)
    return "output " + shape_str(ctx.output_shape()) + " is not the expected " + shape_str(expected);
  return std::nullopt;
}

kir::Kernel lower_conv(const OpContext& ctx) {
  const ConvGeometry g = conv_geometry(ctx);
  const Shape& out_shape = ctx.output_shape();
  kir::Kernel kernel = make_kernel("conv2d", num_elements(out_shape));
  const kir::Buf x = kernel.add_buffer("x", ScalarType::f32, Access::read);
  const kir::Buf w = kernel.add_buffer("w", ScalarType::f32, Access::read);
  const bool has_bias = ctx.has_input(2);
  const kir::Buf bias = has_bias ? kernel.add_buffer("bias", ScalarType::f32, Access::read) : kir::Buf{};
  const kir::Buf y = kernel.add_buffer("y", ScalarType::f32, Access::write);

  // Per-invocation coordinates, computed once.
  std::vector<Stmt>& body = kernel.body;
  const Expr index = kir::global_index();
  const std::vector<Expr> c = unravel(body, index, out_shape, "out");
  const Expr n = c[0], m = c[1], oh = c[2], ow = c[3];
  const std::int64_t plane = g.rows.input_extent * g.cols.input_extent;
  const std::int64_t window = g.rows.kernel * g.cols.kernel;
  const Expr group = g.groups == 1 ? kir::i32(0)
                     : g.out_channels_per_group == 1
                         ? m
                         : declare_index(body, "grp", m / kir::i32(g.out_channels_per_group));
  const Expr x_base = declare_index(
      body, "x_base",
      IndexSum().add(n, g.in_channels * plane).add(group, g.in_channels_per_group * plane).expr());
  const Expr w_base = declare_index(body, "w_base", IndexSum().add(m, g.in_channels_per_group * window).expr());
  const Expr ih0 = declare_index(body, "ih0", IndexSum(-g.rows.pad_begin).add(oh, g.rows.stride).expr());
  const Expr iw0 = declare_index(body, "iw0", IndexSum(-g.cols.pad_begin).add(ow, g.cols.stride).expr());
  body.push_back(kir::declare("acc", ScalarType::f32,
                              has_bias ? kir::load(bias, m, ScalarType::f32) : kir::f32(0.0)));
  const Expr acc = kir::var("acc", ScalarType::f32);

  // for ci: for kh: [if row in bounds] for kw: [if col in bounds] acc += x * w
  const Expr ci = kir::var("ci", ScalarType::i32);
  const Expr kh = kir::var("kh", ScalarType::i32);
  const Expr kw = kir::var("kw", ScalarType::i32);
  const Expr ih = kir::var("ih", ScalarType::i32);
  const Expr iw = kir::var("iw", ScalarType::i32);
  const Expr x_row = kir::var("x_row", ScalarType::i32);
  const Expr w_row = kir::var("w_row", ScalarType::i32);

  std::vector<Stmt> col_body;
  col_body.push_back(kir::declare("iw", ScalarType::i32, IndexSum().add(iw0).add(kw, g.cols.dilation).expr()));
  append_guarded(col_body, g.cols.in_bounds(iw),
                 {kir::assign("acc", acc + kir::load(x, x_row + iw, ScalarType::f32) *
                                               kir::load(w, w_row + kw, ScalarType::f32))});

  std::vector<Stmt> row_inner;
  row_inner.push_back(kir::declare("x_row", ScalarType::i32,
                                   IndexSum().add(x_base).add(ci, plane).add(ih, g.cols.input_extent).expr()));
  row_inner.push_back(kir::declare("w_row", ScalarType::i32,
                                   IndexSum().add(w_base).add(ci, window).add(kh, g.cols.kernel).expr()));
  row_inner.push_back(kir::loop("kw", kir::i32(0), kir::i32(g.cols.kernel), std::move(col_body)));

  std::vector<Stmt> row_body;
  row_body.push_back(kir::declare("ih", ScalarType::i32, IndexSum().add(ih0).add(kh, g.rows.dilation).expr()));
  append_guarded(row_body, g.rows.in_bounds(ih), std::move(row_inner));

  body.push_back(kir::loop("ci", kir::i32(0), kir::i32(g.in_channels_per_group),
                           {kir::loop("kh", kir::i32(0), kir::i32(g.rows.kernel), std::move(row_body))}));
  body.push_back(kir::store(y, index, apply_activation(ctx, acc)));
  return kernel;
}

}  // namespace kiln::lower

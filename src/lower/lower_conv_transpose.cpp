// ConvTranspose (2-D, NCHW) as a gather: one invocation per output element
// sums the input pixels whose scattered kernel reaches it. Along an axis,
// output o takes tap k from input i when i * stride - pad_begin + k * dilation
// = o, i.e. when t = o + pad_begin - k * dilation is a non-negative multiple of
// the stride and i = t / stride is inside the input. Groups, dilations, pads,
// output_padding and the optional bias are baked in as constants.
#include "src/lower/index.h"
#include "src/lower/lowerings.h"

namespace kiln::lower {

using kir::Access;
using kir::Expr;
using kir::ScalarType;
using kir::Stmt;

namespace {

struct TransposeAxis {
  std::int64_t input_extent, kernel, stride, dilation, pad_begin;
};

// The statements of one axis's tap loop: `position` (t / stride) declared
// under the guard that t is a multiple of the stride inside the input, then
// `inner`. t is checked non-negative before it is divided: GLSL leaves the
// division and remainder of negative integers undefined.
Stmt tap_loop(const std::string& tap, const std::string& position, const TransposeAxis& axis, Expr shifted,
              std::vector<Stmt> inner) {
  const Expr k = kir::var(tap, ScalarType::i32);
  const std::string t_name = position + "_t";
  const Expr t = kir::var(t_name, ScalarType::i32);
  std::vector<Stmt> body = {kir::declare(t_name, ScalarType::i32, IndexSum().add(shifted).add(k, -axis.dilation).expr())};
  const Expr i = kir::var(position, ScalarType::i32);
  std::vector<Stmt> in_input = {kir::declare(position, ScalarType::i32,
                                             axis.stride == 1 ? t : t / kir::i32(axis.stride))};
  append_guarded(in_input, i < kir::i32(axis.input_extent), std::move(inner));
  std::vector<Stmt> non_negative;
  append_guarded(non_negative, axis.stride == 1 ? Expr() : kir::eq(t % kir::i32(axis.stride), kir::i32(0)),
                 std::move(in_input));
  append_guarded(body, t >= kir::i32(0), std::move(non_negative));
  return kir::loop(tap, kir::i32(0), kir::i32(axis.kernel), std::move(body));
}

}  // namespace

std::optional<std::string> conv_transpose_unsupported(const OpContext& ctx) {
  if (ctx.input_shape(0).size() != 4 || ctx.input_shape(1).size() != 4)
    return "only 2-D ConvTranspose of NCHW input is supported";
  return std::nullopt;
}

kir::Kernel lower_conv_transpose(const OpContext& ctx) {
  const Shape& x_shape = ctx.input_shape(0);
  const Shape& w_shape = ctx.input_shape(1);
  const Shape& y_shape = ctx.output_shape();
  const std::vector<std::int64_t> pads = get_ints_exactly(ctx, "pads", 4, {0, 0, 0, 0});
  const std::vector<std::int64_t> strides = get_ints_exactly(ctx, "strides", 2, {1, 1});
  const std::vector<std::int64_t> dilations = get_ints_exactly(ctx, "dilations", 2, {1, 1});
  const std::int64_t groups = ctx.node.attrs.get_int("group", 1);
  const std::int64_t channels = x_shape[1], height = x_shape[2], width = x_shape[3];
  const std::int64_t group_in = channels / groups, group_out = w_shape[1];
  const std::int64_t kernel_h = w_shape[2], kernel_w = w_shape[3];
  const std::int64_t plane = height * width, taps = kernel_h * kernel_w;
  const TransposeAxis rows{height, kernel_h, strides[0], dilations[0], pads[0]};
  const TransposeAxis cols{width, kernel_w, strides[1], dilations[1], pads[1]};

  kir::Kernel kernel = make_kernel("conv_transpose2d", num_elements(y_shape));
  const kir::Buf x = kernel.add_buffer("x", ScalarType::f32, Access::read);
  const kir::Buf w = kernel.add_buffer("w", ScalarType::f32, Access::read);
  const bool has_bias = ctx.has_input(2);
  const kir::Buf b = has_bias ? kernel.add_buffer("b", ScalarType::f32, Access::read) : kir::Buf{};
  const kir::Buf y = kernel.add_buffer("y", ScalarType::f32, Access::write);
  std::vector<Stmt>& body = kernel.body;

  const Expr index = kir::global_index();
  const std::vector<Expr> out = unravel(body, index, {y_shape[0], y_shape[1], y_shape[2], y_shape[3]}, "out");
  const Expr m = out[1];
  // The group of output channel m and its place in the group.
  const Expr g = groups == 1 ? kir::i32(0) : declare_index(body, "g", m / kir::i32(group_out));
  const Expr m_in_group = groups == 1 ? m : declare_index(body, "m_in_group", m % kir::i32(group_out));
  const Expr x_base = declare_index(body, "x_base", IndexSum().add(out[0], channels * plane).add(g, group_in * plane).expr());
  const Expr w_base =
      declare_index(body, "w_base", IndexSum().add(g, group_in * group_out * taps).add(m_in_group, taps).expr());
  const Expr oh_shifted = declare_index(body, "oh_shifted", IndexSum(rows.pad_begin).add(out[2]).expr());
  const Expr ow_shifted = declare_index(body, "ow_shifted", IndexSum(cols.pad_begin).add(out[3]).expr());
  body.push_back(kir::declare("acc", ScalarType::f32, has_bias ? kir::load(b, m, ScalarType::f32) : kir::f32(0.0)));

  const Expr acc = kir::var("acc", ScalarType::f32);
  const Expr ih = kir::var("ih", ScalarType::i32);
  const Expr iw = kir::var("iw", ScalarType::i32);
  const Expr kh = kir::var("kh", ScalarType::i32);
  const Expr kw = kir::var("kw", ScalarType::i32);
  const Expr c = kir::var("c", ScalarType::i32);
  const Expr x_at = kir::var("x_at", ScalarType::i32);
  const Expr w_at = kir::var("w_at", ScalarType::i32);
  // Input channels innermost: one pixel and one tap, every channel of the group.
  std::vector<Stmt> channel_sum = {
      kir::declare("x_at", ScalarType::i32, IndexSum().add(x_base).add(ih, width).add(iw).expr()),
      kir::declare("w_at", ScalarType::i32, IndexSum().add(w_base).add(kh, kernel_w).add(kw).expr()),
      kir::loop("c", kir::i32(0), kir::i32(group_in),
                {kir::assign("acc", acc + kir::load(x, IndexSum().add(x_at).add(c, plane).expr(), ScalarType::f32) *
                                              kir::load(w, IndexSum().add(w_at).add(c, group_out * taps).expr(),
                                                        ScalarType::f32))})};
  body.push_back(tap_loop("kh", "ih", rows, oh_shifted, {tap_loop("kw", "iw", cols, ow_shifted, std::move(channel_sum))}));
  body.push_back(kir::store(y, index, acc));
  return kernel;
}

}  // namespace kiln::lower

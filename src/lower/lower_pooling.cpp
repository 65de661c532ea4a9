// 2-D MaxPool and AveragePool (NCHW; pads, strides, dilations, ceil_mode,
// count_include_pad) with one invocation per output element, and
// GlobalAveragePool with one invocation per (n, c) plane.
#include "src/lower/index.h"
#include "src/lower/lowerings.h"

#include <limits>

namespace kiln::lower {

using kir::Access;
using kir::Expr;
using kir::ScalarType;
using kir::Stmt;

namespace {

struct PoolGeometry {
  bool is_max;
  bool ceil_mode;
  bool count_include_pad;
  std::int64_t planes;   // N * C
  WindowAxis rows, cols;
  std::int64_t pad_end_rows, pad_end_cols;
};

PoolGeometry pool_geometry(const OpContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& y = ctx.output_shape();
  const std::vector<std::int64_t> kernel = get_ints_exactly(ctx, "kernel_shape", 2, {});
  const std::vector<std::int64_t> strides = get_ints_exactly(ctx, "strides", 2, {1, 1});
  const std::vector<std::int64_t> pads = get_ints_exactly(ctx, "pads", 4, {0, 0, 0, 0});
  const std::vector<std::int64_t> dilations = get_ints_exactly(ctx, "dilations", 2, {1, 1});
  PoolGeometry g{};
  g.is_max = ctx.node.op == "MaxPool";
  g.ceil_mode = ctx.node.attrs.get_int("ceil_mode", 0) != 0;
  g.count_include_pad = ctx.node.attrs.get_int("count_include_pad", 0) != 0;
  g.planes = x[0] * x[1];
  g.rows = {x[2], y.size() == 4 ? y[2] : 0, kernel[0], strides[0], dilations[0], pads[0]};
  g.cols = {x[3], y.size() == 4 ? y[3] : 0, kernel[1], strides[1], dilations[1], pads[1]};
  g.pad_end_rows = pads[2];
  g.pad_end_cols = pads[3];
  return g;
}

// ONNX's output extent: floor or ceil of the window count, where in ceil mode
// a last window starting inside the end padding is dropped.
std::int64_t expected_extent(const WindowAxis& axis, std::int64_t pad_end, bool ceil_mode) {
  const std::int64_t span = axis.input_extent + axis.pad_begin + pad_end - ((axis.kernel - 1) * axis.dilation + 1);
  std::int64_t extent = (ceil_mode ? (span + axis.stride - 1) / axis.stride : span / axis.stride) + 1;
  if (ceil_mode && (extent - 1) * axis.stride >= axis.input_extent + axis.pad_begin) --extent;
  return extent;
}

// The number of taps of a window starting at `start` that lie inside the
// padded extent [-pad_begin, input_extent + pad_end) (count_include_pad=1;
// only ceil_mode windows can leave it, and only at the end).
Expr padded_tap_count(const WindowAxis& axis, std::int64_t pad_end, Expr start) {
  const WindowAxis padded{axis.input_extent + axis.pad_begin + pad_end, axis.output_extent, axis.kernel,
                          axis.stride, axis.dilation, 0};
  if (!padded.can_overflow()) return kir::i32(axis.kernel);
  // taps with start + tap * dilation < limit: (limit - start - 1) / dilation + 1,
  // where limit - start >= 1 because every window starts before the limit.
  const std::int64_t limit = axis.input_extent + pad_end;
  Expr room = kir::i32(limit - 1) - start;
  if (axis.dilation != 1) room = room / kir::i32(axis.dilation);
  return kir::min(room + kir::i32(1), kir::i32(axis.kernel));
}

}  // namespace

std::optional<std::string> pool_unsupported(const OpContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  if (x.size() != 4) return "only 2-D pooling of NCHW input is supported (X " + shape_str(x) + ")";
  const std::string auto_pad = ctx.node.attrs.get_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET") return "auto_pad='" + auto_pad + "' is not supported (give explicit pads)";
  if (!ctx.node.attrs.has("kernel_shape")) return "attribute 'kernel_shape' is missing";
  const PoolGeometry g = pool_geometry(ctx);
  for (const WindowAxis* axis : {&g.rows, &g.cols})
    if (axis->kernel < 1 || axis->stride < 1 || axis->dilation < 1 || axis->pad_begin < 0)
      return "kernel_shape, strides and dilations must be >= 1 and pads >= 0";
  if (g.pad_end_rows < 0 || g.pad_end_cols < 0) return "pads must be >= 0";
  const std::int64_t row_extent = (g.rows.kernel - 1) * g.rows.dilation + 1;
  const std::int64_t col_extent = (g.cols.kernel - 1) * g.cols.dilation + 1;
  if (g.rows.pad_begin >= row_extent || g.pad_end_rows >= row_extent || g.cols.pad_begin >= col_extent ||
      g.pad_end_cols >= col_extent)
    return "pads must be smaller than the window extent (a window would see only padding)";
  const Shape expected = {x[0], x[1], expected_extent(g.rows, g.pad_end_rows, g.ceil_mode),
                          expected_extent(g.cols, g.pad_end_cols, g.ceil_mode)};
  if (ctx.output_shape() != expected)
    return "output " + shape_str(ctx.output_shape()) + " is not the expected " + shape_str(expected);
  return std::nullopt;
}

kir::Kernel lower_pool(const OpContext& ctx) {
  const PoolGeometry g = pool_geometry(ctx);
  const Shape& out_shape = ctx.output_shape();
  kir::Kernel kernel = make_kernel(g.is_max ? "max_pool2d" : "average_pool2d", num_elements(out_shape));
  const kir::Buf x = kernel.add_buffer("x", ScalarType::f32, Access::read);
  const kir::Buf y = kernel.add_buffer("y", ScalarType::f32, Access::write);
  std::vector<Stmt>& body = kernel.body;

  const Expr index = kir::global_index();
  const std::vector<Expr> c =
      unravel(body, index, {g.planes, g.rows.output_extent, g.cols.output_extent}, "out");
  const std::int64_t plane = g.rows.input_extent * g.cols.input_extent;
  const Expr x_base = declare_index(body, "x_base", IndexSum().add(c[0], plane).expr());
  const Expr ih0 = declare_index(body, "ih0", IndexSum(-g.rows.pad_begin).add(c[1], g.rows.stride).expr());
  const Expr iw0 = declare_index(body, "iw0", IndexSum(-g.cols.pad_begin).add(c[2], g.cols.stride).expr());

  // Padded taps are skipped: they never win a max and, unless
  // count_include_pad, are not counted in the average.
  const Expr acc = kir::var("acc", ScalarType::f32);
  const Expr count = kir::var("count", ScalarType::f32);
  const bool needs_checks = g.rows.can_underflow() || g.rows.can_overflow() || g.cols.can_underflow() ||
                            g.cols.can_overflow();
  const bool count_taps = !g.is_max && !g.count_include_pad && needs_checks;
  body.push_back(kir::declare("acc", ScalarType::f32,
                              kir::f32(g.is_max ? std::numeric_limits<float>::lowest() : 0.0)));
  if (count_taps) body.push_back(kir::declare("count", ScalarType::f32, kir::f32(0.0)));

  const Expr ih = kir::var("ih", ScalarType::i32);
  const Expr iw = kir::var("iw", ScalarType::i32);
  const Expr kh = kir::var("kh", ScalarType::i32);
  const Expr kw = kir::var("kw", ScalarType::i32);
  const Expr x_row = kir::var("x_row", ScalarType::i32);
  const Expr tap = kir::load(x, x_row + iw, ScalarType::f32);

  std::vector<Stmt> accumulate = {kir::assign("acc", g.is_max ? kir::max(acc, tap) : acc + tap)};
  if (count_taps) accumulate.push_back(kir::assign("count", count + kir::f32(1.0)));
  std::vector<Stmt> col_body = {
      kir::declare("iw", ScalarType::i32, IndexSum().add(iw0).add(kw, g.cols.dilation).expr())};
  append_guarded(col_body, g.cols.in_bounds(iw), std::move(accumulate));

  std::vector<Stmt> row_inner = {
      kir::declare("x_row", ScalarType::i32, IndexSum().add(x_base).add(ih, g.cols.input_extent).expr()),
      kir::loop("kw", kir::i32(0), kir::i32(g.cols.kernel), std::move(col_body))};
  std::vector<Stmt> row_body = {
      kir::declare("ih", ScalarType::i32, IndexSum().add(ih0).add(kh, g.rows.dilation).expr())};
  append_guarded(row_body, g.rows.in_bounds(ih), std::move(row_inner));
  body.push_back(kir::loop("kh", kir::i32(0), kir::i32(g.rows.kernel), std::move(row_body)));

  Expr result = acc;
  if (!g.is_max) {
    Expr divisor;
    if (count_taps) {
      divisor = count;
    } else if (g.count_include_pad) {
      const Expr row_taps = padded_tap_count(g.rows, g.pad_end_rows, ih0);
      const Expr col_taps = padded_tap_count(g.cols, g.pad_end_cols, iw0);
      const bool constant = row_taps->kind == kir::ExprKind::constant && col_taps->kind == kir::ExprKind::constant;
      divisor = constant ? kir::f32(static_cast<double>(row_taps->ivalue * col_taps->ivalue))
                         : kir::cast(ScalarType::f32, row_taps * col_taps);
    } else {
      divisor = kir::f32(static_cast<double>(g.rows.kernel * g.cols.kernel));
    }
    result = acc / divisor;
  }
  body.push_back(kir::store(y, index, result));
  return kernel;
}

std::optional<std::string> global_pool_unsupported(const OpContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  if (x.size() < 3) return "input " + shape_str(x) + " has no spatial dimensions";
  Shape expected(x.size(), 1);
  expected[0] = x[0];
  expected[1] = x[1];
  if (ctx.output_shape() != expected)
    return "output " + shape_str(ctx.output_shape()) + " is not the expected " + shape_str(expected);
  return std::nullopt;
}

kir::Kernel lower_global_average_pool(const OpContext& ctx) {
  const Shape& x_shape = ctx.input_shape(0);
  const std::int64_t plane = extent_product(x_shape, 2, x_shape.size());
  kir::Kernel kernel = make_kernel("global_average_pool", x_shape[0] * x_shape[1]);
  const kir::Buf x = kernel.add_buffer("x", ScalarType::f32, Access::read);
  const kir::Buf y = kernel.add_buffer("y", ScalarType::f32, Access::write);

  const Expr index = kir::global_index();
  const Expr base = declare_index(kernel.body, "base", IndexSum().add(index, plane).expr());
  const Expr acc = kir::var("acc", ScalarType::f32);
  kernel.body.push_back(kir::declare("acc", ScalarType::f32, kir::f32(0.0)));
  kernel.body.push_back(kir::loop(
      "j", kir::i32(0), kir::i32(plane),
      {kir::assign("acc", acc + kir::load(x, base + kir::var("j", ScalarType::i32), ScalarType::f32))}));
  kernel.body.push_back(kir::store(y, index, acc / kir::cast(ScalarType::f32, kir::i32(plane))));
  return kernel;
}

}  // namespace kiln::lower

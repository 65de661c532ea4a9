// WinogradInput and WinogradOutput (graph/ops/winograd.cpp, which defines the
// tile layout): the transforms around the batched MatMul of a Winograd
// F(2x2, 3x3) convolution. Both run one invocation per (channel, tile): the
// input transform loads its 4x4 window once and stores 16 values; the output
// transform loads 16 values and stores 2x2 outputs, each with one plain store
// at its flat index, so the scheduler fuses the residual Add and Relu that
// follow into it as an epilogue (and, storing several times, it is never
// inlined at a consumer's loads as a prologue, which would redo its loads at
// every load).
#include "src/lower/index.h"
#include "src/lower/lowerings.h"

#include <algorithm>
#include <array>

namespace kiln::lower {

using kir::Access;
using kir::Expr;
using kir::ScalarType;
using kir::Stmt;

namespace {

constexpr std::int64_t kTileElements = 16;

// B^T of F(2x2, 3x3).
constexpr std::array<std::array<int, 4>, 4> kBT = {{{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}}};

// Tiles along an axis of `extent` outputs at dilation d (graph/ops/winograd.cpp).
std::int64_t tiles_along(std::int64_t extent, std::int64_t dilation) {
  const std::int64_t per_phase = (extent + dilation - 1) / dilation;
  return dilation * ((per_phase + 1) / 2);
}

// The first output position of tile row/column r (graph/ops/winograd.cpp).
std::int64_t tile_origin(std::int64_t r, std::int64_t dilation) {
  return r % dilation + 2 * dilation * (r / dilation);
}

// The same as an expression over the tile coordinate; no division at dilation 1.
Expr tile_origin(std::vector<Stmt>& body, Expr r, std::int64_t dilation, const std::string& name) {
  if (dilation == 1) return IndexSum().add(r, 2).expr();
  const Expr origin = IndexSum().add(r % kir::i32(dilation)).add(r / kir::i32(dilation), 2 * dilation).expr();
  return declare_index(body, name, origin);
}

// sum_k coefficient[k] * terms[k] for coefficients in {-1, 0, 1}.
Expr combine(const std::array<int, 4>& coefficients, const std::array<Expr, 4>& terms) {
  Expr sum;
  for (std::size_t k = 0; k < 4; ++k) {
    if (coefficients[k] == 0) continue;
    if (!sum) sum = coefficients[k] > 0 ? terms[k] : -terms[k];
    else sum = coefficients[k] > 0 ? sum + terms[k] : sum - terms[k];
  }
  return sum;
}

struct InputGeometry {
  std::int64_t batch, channels, height, width, tiles_h, tiles_w;
  std::vector<std::int64_t> pads, dilations;
  std::int64_t columns;  // V's columns: the tiles, then zero padding
  std::int64_t tiles() const { return batch * tiles_h * tiles_w; }
};

InputGeometry input_geometry(const OpContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  InputGeometry g{x[0], x[1], x[2], x[3], 0, 0, get_ints_exactly(ctx, "pads", 4, {0, 0, 0, 0}),
                  get_ints_exactly(ctx, "dilations", 2, {1, 1}), 0};
  g.tiles_h = tiles_along(g.height + g.pads[0] + g.pads[2] - 2 * g.dilations[0], g.dilations[0]);
  g.tiles_w = tiles_along(g.width + g.pads[1] + g.pads[3] - 2 * g.dilations[1], g.dilations[1]);
  g.columns = std::max(ctx.node.attrs.get_int("columns", 0), g.tiles());
  return g;
}

// a && b where either may be empty (Expr overloads && to build IR, so test
// presence explicitly); empty when both are.
Expr both(const Expr& a, const Expr& b) {
  if (static_cast<bool>(a) && static_cast<bool>(b)) return a && b;
  return a ? a : b;
}

// "0 <= origin + offset + step * tap < extent" for tap 0..3, leaving out the
// comparisons no tile can fail (empty when none can).
std::array<Expr, 4> tap_bounds(Expr origin, std::int64_t lowest_origin, std::int64_t highest_origin,
                               std::int64_t step, std::int64_t extent) {
  std::array<Expr, 4> bounds;
  for (std::size_t tap = 0; tap < 4; ++tap) {
    const std::int64_t offset = step * static_cast<std::int64_t>(tap);
    Expr position = IndexSum().add(origin).add(offset).expr();
    Expr low = lowest_origin + offset < 0 ? position >= kir::i32(0) : Expr();
    Expr high = highest_origin + offset >= extent ? position < kir::i32(extent) : Expr();
    bounds[tap] = both(low, high);
  }
  return bounds;
}

struct OutputGeometry {
  std::int64_t batch, channels, out_h, out_w, tiles_h, tiles_w;
  std::vector<std::int64_t> dilations;
};

OutputGeometry output_geometry(const OpContext& ctx) {
  const std::vector<std::int64_t> shape = get_ints_exactly(ctx, "output_shape", 4, {});
  OutputGeometry g{shape[0], shape[1], shape[2], shape[3], 0, 0, get_ints_exactly(ctx, "dilations", 2, {1, 1})};
  g.tiles_h = tiles_along(g.out_h, g.dilations[0]);
  g.tiles_w = tiles_along(g.out_w, g.dilations[1]);
  return g;
}

}  // namespace

std::optional<std::string> winograd_input_unsupported(const OpContext& ctx) {
  if (ctx.input_shape(0).size() != 4) return "input " + shape_str(ctx.input_shape(0)) + " is not [N, C, H, W]";
  const InputGeometry g = input_geometry(ctx);
  const Shape expected = {kTileElements, g.channels, g.columns};
  if (ctx.output_shape() != expected)
    return "output " + shape_str(ctx.output_shape()) + " is not the expected " + shape_str(expected);
  return std::nullopt;
}

kir::Kernel lower_winograd_input(const OpContext& ctx) {
  const InputGeometry g = input_geometry(ctx);
  kir::Kernel kernel = make_kernel("winograd_input", g.channels * g.columns);
  const kir::Buf x = kernel.add_buffer("x", ScalarType::f32, Access::read);
  const kir::Buf v = kernel.add_buffer("v", ScalarType::f32, Access::write);
  const Expr index = kir::global_index();
  const auto store_plane = [&](std::int64_t plane, Expr value) {
    return kir::store(v, IndexSum().add(index).add(plane * g.channels * g.columns).expr(), std::move(value));
  };

  // Invocation (c, t): channel c of tile t = (n, r, s), tile (r, s) of image n;
  // a padding column (t past the tiles) stores zeros.
  std::vector<Stmt> zeros;
  for (std::int64_t plane = 0; plane < kTileElements; ++plane) zeros.push_back(store_plane(plane, kir::f32(0.0)));
  std::vector<Stmt> tile_body;
  std::vector<Stmt>& body = g.columns > g.tiles() ? tile_body : kernel.body;
  const std::vector<Expr> column = unravel(kernel.body, index, {g.channels, g.columns}, "t");
  const std::vector<Expr> tile = unravel(body, column[1], {g.batch, g.tiles_h, g.tiles_w}, "tile");
  const Expr row0 = tile_origin(body, tile[1], g.dilations[0], "origin_h");
  const Expr col0 = tile_origin(body, tile[2], g.dilations[1], "origin_w");
  // The window's top-left input element (may lie in the padding).
  const Expr origin = declare_index(body, "origin", IndexSum(-g.pads[0] * g.width - g.pads[1])
                                                        .add(tile[0], g.channels * g.height * g.width)
                                                        .add(column[0], g.height * g.width)
                                                        .add(row0, g.width)
                                                        .add(col0)
                                                        .expr());
  const Expr row = declare_index(body, "row", IndexSum(-g.pads[0]).add(row0).expr());
  const Expr col = declare_index(body, "col", IndexSum(-g.pads[1]).add(col0).expr());
  const std::int64_t last_row = tile_origin(g.tiles_h - 1, g.dilations[0]) - g.pads[0];
  const std::int64_t last_col = tile_origin(g.tiles_w - 1, g.dilations[1]) - g.pads[1];
  const std::array<Expr, 4> row_ok = tap_bounds(row, -g.pads[0], last_row, g.dilations[0], g.height);
  const std::array<Expr, 4> col_ok = tap_bounds(col, -g.pads[1], last_col, g.dilations[1], g.width);

  // d: the 4x4 window, zero outside the input (a select loads only when inside).
  std::array<std::array<Expr, 4>, 4> d;
  for (std::size_t u = 0; u < 4; ++u)
    for (std::size_t w = 0; w < 4; ++w) {
      const auto offset =
          static_cast<std::int64_t>(u) * g.dilations[0] * g.width + static_cast<std::int64_t>(w) * g.dilations[1];
      Expr value = kir::load(x, IndexSum().add(origin).add(offset).expr(), ScalarType::f32);
      const Expr inside = both(row_ok[u], col_ok[w]);
      if (inside) value = kir::select(inside, value, kir::f32(0.0));
      const std::string name = "d" + std::to_string(u) + std::to_string(w);
      body.push_back(kir::declare(name, ScalarType::f32, value));
      d[u][w] = kir::var(name, ScalarType::f32);
    }
  // B^T d (rows), then (B^T d) B (columns), stored plane by plane.
  std::array<std::array<Expr, 4>, 4> bd;
  for (std::size_t xi = 0; xi < 4; ++xi)
    for (std::size_t w = 0; w < 4; ++w) {
      const std::string name = "b" + std::to_string(xi) + std::to_string(w);
      body.push_back(kir::declare(name, ScalarType::f32, combine(kBT[xi], {d[0][w], d[1][w], d[2][w], d[3][w]})));
      bd[xi][w] = kir::var(name, ScalarType::f32);
    }
  for (std::size_t xi = 0; xi < 4; ++xi)
    for (std::size_t nu = 0; nu < 4; ++nu)
      body.push_back(store_plane(static_cast<std::int64_t>(xi * 4 + nu), combine(kBT[nu], bd[xi])));
  if (g.columns > g.tiles())
    kernel.body.push_back(kir::branch(column[1] < kir::i32(g.tiles()), std::move(tile_body), std::move(zeros)));
  return kernel;
}

std::optional<std::string> winograd_output_unsupported(const OpContext& ctx) {
  if (auto reason = activation_unsupported(ctx)) return reason;
  const Shape& m = ctx.input_shape(0);
  if (m.size() != 3 || m[0] != kTileElements) return "input " + shape_str(m) + " is not [16, K, tiles]";
  const OutputGeometry g = output_geometry(ctx);
  if (m[1] != g.channels || m[2] < g.batch * g.tiles_h * g.tiles_w)
    return "input " + shape_str(m) + " does not hold the " + std::to_string(g.batch * g.tiles_h * g.tiles_w) +
           " tiles of " + std::to_string(g.channels) + " channels";
  if (ctx.has_input(1) && ctx.input_shape(1) != Shape{g.channels})
    return "bias " + shape_str(ctx.input_shape(1)) + " is not [" + std::to_string(g.channels) + "]";
  const Shape expected = {g.batch, g.channels, g.out_h, g.out_w};
  if (ctx.output_shape() != expected)
    return "output " + shape_str(ctx.output_shape()) + " is not the expected " + shape_str(expected);
  return std::nullopt;
}

kir::Kernel lower_winograd_output(const OpContext& ctx) {
  const OutputGeometry g = output_geometry(ctx);
  const std::int64_t columns = ctx.input_shape(0)[2], plane = g.channels * columns;
  kir::Kernel kernel = make_kernel("winograd_output", g.batch * g.channels * g.tiles_h * g.tiles_w);
  const kir::Buf m = kernel.add_buffer("m", ScalarType::f32, Access::read);
  const bool has_bias = ctx.has_input(1);
  const kir::Buf bias = has_bias ? kernel.add_buffer("bias", ScalarType::f32, Access::read) : kir::Buf{};
  const kir::Buf y = kernel.add_buffer("y", ScalarType::f32, Access::write);
  std::vector<Stmt>& body = kernel.body;

  // Invocation (n, k, r, s): channel k of tile (r, s) of image n, whose 16
  // values neighbouring invocations load from consecutive columns of M.
  const Expr index = kir::global_index();
  const std::vector<Expr> c = unravel(body, index, {g.batch, g.channels, g.tiles_h, g.tiles_w}, "t");
  const Expr base = declare_index(
      body, "base",
      IndexSum().add(c[1], columns).add(c[0], g.tiles_h * g.tiles_w).add(c[2], g.tiles_w).add(c[3]).expr());
  std::array<std::array<Expr, 4>, 4> values;
  for (std::int64_t xi = 0; xi < 4; ++xi)
    for (std::int64_t nu = 0; nu < 4; ++nu) {
      const std::string name = "m" + std::to_string(xi) + std::to_string(nu);
      const Expr at = IndexSum().add(base).add((xi * 4 + nu) * plane).expr();
      body.push_back(kir::declare(name, ScalarType::f32, kir::load(m, at, ScalarType::f32)));
      values[xi][nu] = kir::var(name, ScalarType::f32);
    }
  // A^T m A with A^T's rows (1, 1, 1, 0) and (0, 1, -1, -1): rows first.
  const auto row_of_at = [](std::size_t e, const std::array<Expr, 4>& v) {
    return e == 0 ? v[0] + v[1] + v[2] : v[1] - v[2] - v[3];
  };
  std::array<std::array<Expr, 4>, 2> rows;
  for (std::size_t e = 0; e < 2; ++e)
    for (std::size_t nu = 0; nu < 4; ++nu) {
      const std::string name = "a" + std::to_string(e) + std::to_string(nu);
      body.push_back(kir::declare(name, ScalarType::f32,
                                  row_of_at(e, {values[0][nu], values[1][nu], values[2][nu], values[3][nu]})));
      rows[e][nu] = kir::var(name, ScalarType::f32);
    }

  // The tile's 2x2 outputs, d apart at dilation d; those past the output's
  // edge (odd extents, dilation phases with fewer rows) are not stored.
  const Expr row0 = tile_origin(body, c[2], g.dilations[0], "origin_h");
  const Expr col0 = tile_origin(body, c[3], g.dilations[1], "origin_w");
  const Expr out_base = declare_index(body, "out_base", IndexSum()
                                                            .add(c[0], g.channels * g.out_h * g.out_w)
                                                            .add(c[1], g.out_h * g.out_w)
                                                            .add(row0, g.out_w)
                                                            .add(col0)
                                                            .expr());
  const std::int64_t last_row = tile_origin(g.tiles_h - 1, g.dilations[0]);
  const std::int64_t last_col = tile_origin(g.tiles_w - 1, g.dilations[1]);
  const Expr bias_value = has_bias ? kir::load(bias, c[1], ScalarType::f32) : Expr();
  for (std::int64_t e = 0; e < 2; ++e)
    for (std::int64_t f = 0; f < 2; ++f) {
      const std::int64_t row_offset = e * g.dilations[0], col_offset = f * g.dilations[1];
      const Expr row = IndexSum().add(row0).add(row_offset).expr();
      const Expr col = IndexSum().add(col0).add(col_offset).expr();
      const Expr row_ok = last_row + row_offset >= g.out_h ? row < kir::i32(g.out_h) : Expr();
      const Expr col_ok = last_col + col_offset >= g.out_w ? col < kir::i32(g.out_w) : Expr();
      const auto& a = rows[static_cast<std::size_t>(e)];
      Expr value = row_of_at(static_cast<std::size_t>(f), a);
      if (has_bias) value = value + bias_value;
      append_guarded(body, both(row_ok, col_ok),
                     {kir::store(y, IndexSum().add(out_base).add(row_offset * g.out_w + col_offset).expr(),
                                 apply_activation(ctx, value))});
    }
  return kernel;
}

}  // namespace kiln::lower

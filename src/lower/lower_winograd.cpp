// WinogradInput and WinogradOutput (graph/ops/winograd.cpp, which defines the
// tile layout and the F(2x2, 3x3) and F(4x4, 3x3) transforms): the
// transforms around the batched MatMul of a Winograd convolution. Both run
// one invocation per (channel, tile): the input transform loads its n x n
// window once and stores n*n values; the output transform loads n*n values
// and stores m x m outputs, each with one plain store at its flat index, so
// the scheduler fuses the residual Add and Relu that follow into it as an
// epilogue (and, storing several times, it is never inlined at a consumer's
// loads as a prologue, which would redo its loads at every load). The
// matrix products are expanded here with their integer coefficients: zero
// coefficients cost nothing, and the sums and differences that pairs of
// interpolation points +-p share are computed once.
// WinogradWeight (eager mode's filter transform, every call) runs one
// invocation per 3x3 filter with G's coefficients (graph/winograd_weights.h)
// in fp32, in the order the compile-time transform adds them in double.
#include "graph/winograd_weights.h"
#include "src/lower/index.h"
#include "src/lower/lowerings.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <span>

namespace kiln::lower {

using kir::Access;
using kir::Expr;
using kir::ScalarType;
using kir::Stmt;

namespace {

// Rows of integer coefficients over a list of terms.
using Coefficients = std::vector<std::vector<int>>;

// B^T and A^T of F(m x m, 3x3), as in graph/ops/winograd.cpp.
struct Transform {
  std::int64_t output_tile;  // m
  std::int64_t input_tile;   // n = m + 2
  Coefficients bt, at;
  std::int64_t elements() const { return input_tile * input_tile; }
};

const Transform kF2 = {2, 4, {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}}, {{1, 1, 1, 0}, {0, 1, -1, -1}}};
const Transform kF4 = {4,
                       6,
                       {{4, 0, -5, 0, 1, 0},
                        {0, -4, -4, 1, 1, 0},
                        {0, 4, -4, -1, 1, 0},
                        {0, -2, -1, 2, 1, 0},
                        {0, 2, -1, -2, 1, 0},
                        {0, 4, 0, -5, 0, 1}},
                       {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}}};

// The transform of the node's output_tile attribute (2 or 4; inference has
// checked it).
const Transform& transform_of(const OpContext& ctx) {
  return ctx.node.attrs.get_int("output_tile", 2) == 4 ? kF4 : kF2;
}

// Tiles along an axis of `extent` outputs at dilation d (graph/ops/winograd.cpp).
std::int64_t tiles_along(std::int64_t extent, std::int64_t dilation, std::int64_t tile) {
  const std::int64_t per_phase = (extent + dilation - 1) / dilation;
  return dilation * ((per_phase + tile - 1) / tile);
}

// The first output position of tile row/column r (graph/ops/winograd.cpp).
std::int64_t tile_origin(std::int64_t r, std::int64_t dilation, std::int64_t tile) {
  return r % dilation + tile * dilation * (r / dilation);
}

// The same as an expression over the tile coordinate; no division at dilation 1.
Expr tile_origin(std::vector<Stmt>& body, Expr r, std::int64_t dilation, std::int64_t tile, const std::string& name) {
  if (dilation == 1) return IndexSum().add(r, tile).expr();
  const Expr origin = IndexSum().add(r % kir::i32(dilation)).add(r / kir::i32(dilation), tile * dilation).expr();
  return declare_index(body, name, origin);
}

// sum_k coefficients[k] * terms[k], leaving out zeros, multiplying only by
// coefficients other than +-1, starting from a positive term (no negation)
// and taking a common factor out ((d3 - d1) * 2); empty when all are zero.
Expr combine(const std::vector<int>& coefficients, const std::vector<Expr>& terms) {
  int factor = 0;
  for (const int c : coefficients) factor = std::gcd(factor, std::abs(c));
  if (factor == 0) return Expr();
  std::vector<std::size_t> order;
  for (std::size_t k = 0; k < coefficients.size(); ++k)
    if (coefficients[k] > 0) order.push_back(k);
  for (std::size_t k = 0; k < coefficients.size(); ++k)
    if (coefficients[k] < 0) order.push_back(k);
  Expr sum;
  for (const std::size_t k : order) {
    const int c = coefficients[k] / factor;
    const Expr magnitude = std::abs(c) == 1 ? terms[k] : kir::f32(std::abs(c)) * terms[k];
    if (!sum) sum = c > 0 ? magnitude : -magnitude;
    else sum = c > 0 ? sum + magnitude : sum - magnitude;
  }
  return factor == 1 ? sum : sum * kir::f32(factor);
}

// Declares `value` as an f32 variable unless it is a lone term.
Expr named(std::vector<Stmt>& body, const std::string& name, const std::vector<int>& coefficients,
           const std::vector<Expr>& terms) {
  const auto nonzero = std::count_if(coefficients.begin(), coefficients.end(), [](int c) { return c != 0; });
  const auto unit = std::find_if(coefficients.begin(), coefficients.end(), [](int c) { return c != 0; });
  if (nonzero == 1 && *unit == 1) return terms[static_cast<std::size_t>(unit - coefficients.begin())];
  body.push_back(kir::declare(name, ScalarType::f32, combine(coefficients, terms)));
  return kir::var(name, ScalarType::f32);
}

bool plus_or_minus(int a, int b) { return a == b || a == -b; }

bool any_nonzero(const std::vector<int>& coefficients) {
  return std::any_of(coefficients.begin(), coefficients.end(), [](int c) { return c != 0; });
}

// out[i] = sum_k rows[i][k] * terms[k] as declared f32 variables `name`i.
// Two columns whose coefficients agree up to sign in every row (A^T's
// points +-p) become their sum and difference, computed once; two rows that
// agree up to sign term by term (B^T's points +-p) become common + odd and
// common - odd.
std::vector<Expr> apply_transform(std::vector<Stmt>& body, Coefficients rows, std::vector<Expr> terms,
                                  const std::string& name) {
  const std::size_t width = terms.size();
  std::vector<bool> paired(width, false);
  for (std::size_t a = 0; a < width; ++a)
    for (std::size_t b = a + 1; b < width && !paired[a]; ++b) {
      if (paired[b]) continue;
      bool fits = true, any_sum = false, any_difference = false;
      for (const auto& row : rows) {
        fits = fits && plus_or_minus(row[a], row[b]);
        any_sum = any_sum || (row[a] != 0 && row[a] == row[b]);
        any_difference = any_difference || (row[a] != 0 && row[a] == -row[b]);
      }
      if (!fits || !(any_sum && any_difference)) continue;
      paired[a] = paired[b] = true;
      const std::string pair = name + "p" + std::to_string(a) + std::to_string(b);
      body.push_back(kir::declare(pair + "s", ScalarType::f32, terms[a] + terms[b]));
      body.push_back(kir::declare(pair + "d", ScalarType::f32, terms[a] - terms[b]));
      terms.push_back(kir::var(pair + "s", ScalarType::f32));
      terms.push_back(kir::var(pair + "d", ScalarType::f32));
      for (auto& row : rows) {
        row.push_back(row[a] == row[b] ? row[a] : 0);
        row.push_back(row[a] == -row[b] ? row[a] : 0);
        row[a] = row[b] = 0;
      }
    }

  std::vector<Expr> out(rows.size());
  const auto declare_out = [&](std::size_t i, Expr value) {
    const std::string out_name = name + std::to_string(i);
    body.push_back(kir::declare(out_name, ScalarType::f32, std::move(value)));
    out[i] = kir::var(out_name, ScalarType::f32);
  };
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (out[i]) continue;
    std::size_t partner = i + 1;
    std::vector<int> common(terms.size(), 0), odd(terms.size(), 0);
    for (; partner < rows.size(); ++partner) {
      if (out[partner]) continue;
      bool fits = true;
      for (std::size_t k = 0; k < terms.size(); ++k) {
        fits = fits && plus_or_minus(rows[i][k], rows[partner][k]);
        common[k] = rows[i][k] == rows[partner][k] ? rows[i][k] : 0;
        odd[k] = rows[i][k] == rows[partner][k] ? 0 : rows[i][k];
      }
      if (fits && any_nonzero(common) && any_nonzero(odd)) break;
    }
    if (partner == rows.size()) {
      declare_out(i, combine(rows[i], terms));
      continue;
    }
    const std::string pair = name + "r" + std::to_string(i) + std::to_string(partner);
    const Expr even_part = named(body, pair + "e", common, terms);
    const Expr odd_part = named(body, pair + "o", odd, terms);
    declare_out(i, even_part + odd_part);
    declare_out(partner, even_part - odd_part);
  }
  return out;
}

struct InputGeometry {
  std::int64_t batch, channels, height, width, tiles_h, tiles_w;
  std::vector<std::int64_t> pads, dilations;
  std::int64_t columns;  // V's columns: the tiles, then zero padding
  std::int64_t tiles() const { return batch * tiles_h * tiles_w; }
};

InputGeometry input_geometry(const OpContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const std::int64_t tile = transform_of(ctx).output_tile;
  InputGeometry g{x[0], x[1], x[2], x[3], 0, 0, get_ints_exactly(ctx, "pads", 4, {0, 0, 0, 0}),
                  get_ints_exactly(ctx, "dilations", 2, {1, 1}), 0};
  g.tiles_h = tiles_along(g.height + g.pads[0] + g.pads[2] - 2 * g.dilations[0], g.dilations[0], tile);
  g.tiles_w = tiles_along(g.width + g.pads[1] + g.pads[3] - 2 * g.dilations[1], g.dilations[1], tile);
  g.columns = std::max(ctx.node.attrs.get_int("columns", 0), g.tiles());
  return g;
}

// a && b where either may be empty (Expr overloads && to build IR, so test
// presence explicitly); empty when both are.
Expr both(const Expr& a, const Expr& b) {
  if (static_cast<bool>(a) && static_cast<bool>(b)) return a && b;
  return a ? a : b;
}

// "0 <= origin + step * tap < extent" for each of the window's taps,
// leaving out the comparisons no tile can fail (empty when none can). Where
// the extents vary (LowerTarget::spatial_extents_vary) every upper bound stays.
std::vector<Expr> tap_bounds(Expr origin, std::int64_t taps, std::int64_t lowest_origin, std::int64_t highest_origin,
                             std::int64_t step, std::int64_t extent, bool extents_vary) {
  std::vector<Expr> bounds;
  for (std::int64_t tap = 0; tap < taps; ++tap) {
    const std::int64_t offset = step * tap;
    Expr position = IndexSum().add(origin).add(offset).expr();
    Expr low = lowest_origin + offset < 0 ? position >= kir::i32(0) : Expr();
    Expr high = extents_vary || highest_origin + offset >= extent ? position < kir::i32(extent) : Expr();
    bounds.push_back(both(low, high));
  }
  return bounds;
}

struct OutputGeometry {
  std::int64_t batch, channels, out_h, out_w, tiles_h, tiles_w;
  std::vector<std::int64_t> dilations;
};

OutputGeometry output_geometry(const OpContext& ctx) {
  const std::vector<std::int64_t> shape = get_ints_exactly(ctx, "output_shape", 4, {});
  const std::int64_t tile = transform_of(ctx).output_tile;
  OutputGeometry g{shape[0], shape[1], shape[2], shape[3], 0, 0, get_ints_exactly(ctx, "dilations", 2, {1, 1})};
  g.tiles_h = tiles_along(g.out_h, g.dilations[0], tile);
  g.tiles_w = tiles_along(g.out_w, g.dilations[1], tile);
  return g;
}

std::string digits(std::size_t a, std::size_t b) { return std::to_string(a) + std::to_string(b); }

// sum_k coefficients[k] * terms[k] in order, leaving out zeros and
// multiplications by +-1 (G's entries are fractions, so no common factor).
Expr weighted_sum(const std::array<double, 3>& coefficients, const std::array<Expr, 3>& terms) {
  Expr sum;
  for (std::size_t k = 0; k < 3; ++k) {
    const double c = coefficients[k];
    if (c == 0) continue;
    const Expr magnitude = std::abs(c) == 1 ? terms[k] : kir::f32(std::abs(c)) * terms[k];
    if (!sum) sum = c > 0 ? magnitude : -magnitude;
    else sum = c > 0 ? sum + magnitude : sum - magnitude;
  }
  return sum ? sum : kir::f32(0.0);
}

}  // namespace

std::optional<std::string> winograd_weight_unsupported(const OpContext& ctx) {
  const Shape& w = ctx.input_shape(0);
  if (w.size() != 4 || w[2] != 3 || w[3] != 3) return "weight " + shape_str(w) + " is not [K, C, 3, 3]";
  const Shape expected = {transform_of(ctx).elements(), w[0], w[1]};
  if (ctx.output_shape() != expected)
    return "output " + shape_str(ctx.output_shape()) + " is not the expected " + shape_str(expected);
  return std::nullopt;
}

kir::Kernel lower_winograd_weight(const OpContext& ctx) {
  const Transform& f = transform_of(ctx);
  const std::span<const std::array<double, 3>> g_matrix = graph::winograd_filter_transform(f.output_tile);
  const auto n = static_cast<std::size_t>(f.input_tile);
  const Shape& w = ctx.input_shape(0);
  const std::int64_t filters = w[0] * w[1];
  kir::Kernel kernel = make_kernel(f.output_tile == 4 ? "winograd4_weight" : "winograd_weight", filters);
  const kir::Buf weight = kernel.add_buffer("w", ScalarType::f32, Access::read);
  const kir::Buf u = kernel.add_buffer("u", ScalarType::f32, Access::write);
  std::vector<Stmt>& body = kernel.body;

  // Invocation k*C + c: filter (k, c), its 9 taps contiguous in OIHW; its
  // n*n values go to that same index of each of U's planes [K, C], so
  // neighbouring invocations store neighbouring elements.
  const Expr index = kir::global_index();
  const Expr first_tap = declare_index(body, "tap0", IndexSum().add(index, 9).expr());
  std::array<std::array<Expr, 3>, 3> columns;  // columns[col][row]: g[row][col]
  for (std::size_t row = 0; row < 3; ++row)
    for (std::size_t col = 0; col < 3; ++col) {
      const std::string name = "g" + digits(row, col);
      const auto offset = static_cast<std::int64_t>(row * 3 + col);
      const Expr tap = kir::load(weight, IndexSum().add(first_tap).add(offset).expr(), ScalarType::f32);
      body.push_back(kir::declare(name, ScalarType::f32, tap));
      columns[col][row] = kir::var(name, ScalarType::f32);
    }
  // G g, row xi: (G g)[xi][col] = sum_row G[xi][row] g[row][col].
  std::vector<std::array<Expr, 3>> gg(n);
  for (std::size_t xi = 0; xi < n; ++xi)
    for (std::size_t col = 0; col < 3; ++col) {
      const std::string name = "h" + digits(xi, col);
      body.push_back(kir::declare(name, ScalarType::f32, weighted_sum(g_matrix[xi], columns[col])));
      gg[xi][col] = kir::var(name, ScalarType::f32);
    }
  // (G g) G^T: U[xi][nu] = sum_col (G g)[xi][col] G[nu][col].
  for (std::size_t xi = 0; xi < n; ++xi)
    for (std::size_t nu = 0; nu < n; ++nu) {
      const auto plane = static_cast<std::int64_t>(xi * n + nu);
      const Expr at = IndexSum().add(index).add(plane * filters).expr();
      body.push_back(kir::store(u, at, weighted_sum(g_matrix[nu], gg[xi])));
    }
  return kernel;
}

std::optional<std::string> winograd_input_unsupported(const OpContext& ctx) {
  if (ctx.input_shape(0).size() != 4) return "input " + shape_str(ctx.input_shape(0)) + " is not [N, C, H, W]";
  const InputGeometry g = input_geometry(ctx);
  const Shape expected = {transform_of(ctx).elements(), g.channels, g.columns};
  if (ctx.output_shape() != expected)
    return "output " + shape_str(ctx.output_shape()) + " is not the expected " + shape_str(expected);
  return std::nullopt;
}

kir::Kernel lower_winograd_input(const OpContext& ctx) {
  const Transform& f = transform_of(ctx);
  const auto n = static_cast<std::size_t>(f.input_tile);
  const InputGeometry g = input_geometry(ctx);
  kir::Kernel kernel = make_kernel(f.output_tile == 4 ? "winograd4_input" : "winograd_input", g.channels * g.columns);
  const kir::Buf x = kernel.add_buffer("x", ScalarType::f32, Access::read);
  const kir::Buf v = kernel.add_buffer("v", ScalarType::f32, Access::write);
  const Expr index = kir::global_index();
  const bool vary = ctx.target.spatial_extents_vary;
  // Where the extents vary, the planes' and the window rows' distances are
  // one variable each times a constant, not one constant per plane or row:
  // a kernel then takes two parameters for them instead of dozens.
  const Expr plane_step = vary ? declare_index(kernel.body, "plane_step", kir::i32(g.channels * g.columns)) : Expr();
  const auto store_plane = [&](std::int64_t plane, Expr value) {
    const Expr at = vary ? IndexSum().add(index).add(plane_step, plane).expr()
                         : IndexSum().add(index).add(plane * g.channels * g.columns).expr();
    return kir::store(v, at, std::move(value));
  };

  // Invocation (c, t): channel c of tile t = (b, r, s), tile (r, s) of image b;
  // a padding column (t past the tiles) stores zeros.
  std::vector<Stmt> zeros;
  for (std::int64_t plane = 0; plane < f.elements(); ++plane) zeros.push_back(store_plane(plane, kir::f32(0.0)));
  std::vector<Stmt> tile_body;
  const bool padded = vary || g.columns > g.tiles();
  std::vector<Stmt>& body = padded ? tile_body : kernel.body;
  const std::vector<Expr> column = unravel(kernel.body, index, {g.channels, g.columns}, "t");
  const std::vector<Expr> tile = unravel(body, column[1], {g.batch, g.tiles_h, g.tiles_w}, "tile");
  const Expr row0 = tile_origin(body, tile[1], g.dilations[0], f.output_tile, "origin_h");
  const Expr col0 = tile_origin(body, tile[2], g.dilations[1], f.output_tile, "origin_w");
  // The window's top-left input element (may lie in the padding).
  const Expr origin = declare_index(body, "origin", IndexSum(-g.pads[0] * g.width - g.pads[1])
                                                        .add(tile[0], g.channels * g.height * g.width)
                                                        .add(column[0], g.height * g.width)
                                                        .add(row0, g.width)
                                                        .add(col0)
                                                        .expr());
  const Expr row = declare_index(body, "row", IndexSum(-g.pads[0]).add(row0).expr());
  const Expr col = declare_index(body, "col", IndexSum(-g.pads[1]).add(col0).expr());
  const std::int64_t last_row = tile_origin(g.tiles_h - 1, g.dilations[0], f.output_tile) - g.pads[0];
  const std::int64_t last_col = tile_origin(g.tiles_w - 1, g.dilations[1], f.output_tile) - g.pads[1];
  const std::vector<Expr> row_ok = tap_bounds(row, f.input_tile, -g.pads[0], last_row, g.dilations[0], g.height, vary);
  const std::vector<Expr> col_ok = tap_bounds(col, f.input_tile, -g.pads[1], last_col, g.dilations[1], g.width, vary);

  // d: the n x n window, zero outside the input (a select loads only when
  // inside), one column of it at a time as B^T's terms.
  std::vector<std::vector<Expr>> window_columns(n, std::vector<Expr>(n));
  const Expr row_step = vary ? declare_index(body, "row_step", kir::i32(g.dilations[0] * g.width)) : Expr();
  for (std::size_t u = 0; u < n; ++u)
    for (std::size_t w = 0; w < n; ++w) {
      const auto row = static_cast<std::int64_t>(u), column = static_cast<std::int64_t>(w) * g.dilations[1];
      const Expr at = vary ? IndexSum().add(origin).add(row_step, row).add(column).expr()
                           : IndexSum().add(origin).add(row * g.dilations[0] * g.width + column).expr();
      Expr value = kir::load(x, at, ScalarType::f32);
      const Expr inside = both(row_ok[u], col_ok[w]);
      if (inside) value = kir::select(inside, value, kir::f32(0.0));
      const std::string name = "d" + digits(u, w);
      body.push_back(kir::declare(name, ScalarType::f32, value));
      window_columns[w][u] = kir::var(name, ScalarType::f32);
    }
  // B^T d column by column, then (B^T d) B row by row, stored plane by plane.
  std::vector<std::vector<Expr>> bd_rows(n, std::vector<Expr>(n));
  for (std::size_t w = 0; w < n; ++w) {
    const std::vector<Expr> bd_column = apply_transform(body, f.bt, window_columns[w], "b" + std::to_string(w) + "_");
    for (std::size_t xi = 0; xi < n; ++xi) bd_rows[xi][w] = bd_column[xi];
  }
  for (std::size_t xi = 0; xi < n; ++xi) {
    const std::vector<Expr> planes = apply_transform(body, f.bt, bd_rows[xi], "v" + std::to_string(xi) + "_");
    for (std::size_t nu = 0; nu < n; ++nu)
      body.push_back(store_plane(static_cast<std::int64_t>(xi * n + nu), planes[nu]));
  }
  if (padded)
    kernel.body.push_back(kir::branch(column[1] < kir::i32(g.tiles()), std::move(tile_body), std::move(zeros)));
  return kernel;
}

std::optional<std::string> winograd_output_unsupported(const OpContext& ctx) {
  if (auto reason = activation_unsupported(ctx)) return reason;
  const std::int64_t elements = transform_of(ctx).elements();
  const Shape& m = ctx.input_shape(0);
  if (m.size() != 3 || m[0] != elements)
    return "input " + shape_str(m) + " is not [" + std::to_string(elements) + ", K, tiles]";
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
  const Transform& f = transform_of(ctx);
  const auto n = static_cast<std::size_t>(f.input_tile);
  const auto tile = static_cast<std::size_t>(f.output_tile);
  const OutputGeometry g = output_geometry(ctx);
  const std::int64_t columns = ctx.input_shape(0)[2], plane = g.channels * columns;
  const bool vary = ctx.target.spatial_extents_vary;
  kir::Kernel kernel = make_kernel(f.output_tile == 4 ? "winograd4_output" : "winograd_output",
                                   g.batch * g.channels * g.tiles_h * g.tiles_w);
  const kir::Buf m = kernel.add_buffer("m", ScalarType::f32, Access::read);
  const bool has_bias = ctx.has_input(1);
  const kir::Buf bias = has_bias ? kernel.add_buffer("bias", ScalarType::f32, Access::read) : kir::Buf{};
  const kir::Buf y = kernel.add_buffer("y", ScalarType::f32, Access::write);
  std::vector<Stmt>& body = kernel.body;

  // Invocation (b, k, r, s): channel k of tile (r, s) of image b, whose n*n
  // values neighbouring invocations load from consecutive columns of M.
  const Expr index = kir::global_index();
  const std::vector<Expr> c = unravel(body, index, {g.batch, g.channels, g.tiles_h, g.tiles_w}, "t");
  const Expr base = declare_index(
      body, "base",
      IndexSum().add(c[1], columns).add(c[0], g.tiles_h * g.tiles_w).add(c[2], g.tiles_w).add(c[3]).expr());
  std::vector<std::vector<Expr>> value_columns(n, std::vector<Expr>(n));
  // As in the input transform: one variable for the planes' distance where
  // the extents vary.
  const Expr plane_step = vary ? declare_index(body, "plane_step", kir::i32(plane)) : Expr();
  for (std::size_t xi = 0; xi < n; ++xi)
    for (std::size_t nu = 0; nu < n; ++nu) {
      const std::string name = "m" + digits(xi, nu);
      const auto k = static_cast<std::int64_t>(xi * n + nu);
      const Expr at = vary ? IndexSum().add(base).add(plane_step, k).expr() : IndexSum().add(base).add(k * plane).expr();
      body.push_back(kir::declare(name, ScalarType::f32, kir::load(m, at, ScalarType::f32)));
      value_columns[nu][xi] = kir::var(name, ScalarType::f32);
    }
  // A^T m column by column, then (A^T m) A row by row.
  std::vector<std::vector<Expr>> am_rows(tile, std::vector<Expr>(n));
  for (std::size_t nu = 0; nu < n; ++nu) {
    const std::vector<Expr> am_column = apply_transform(body, f.at, value_columns[nu], "a" + std::to_string(nu) + "_");
    for (std::size_t e = 0; e < tile; ++e) am_rows[e][nu] = am_column[e];
  }
  std::vector<std::vector<Expr>> outputs;
  for (std::size_t e = 0; e < tile; ++e)
    outputs.push_back(apply_transform(body, f.at, am_rows[e], "y" + std::to_string(e) + "_"));

  // The tile's m x m outputs, d apart at dilation d; those past the output's
  // edge (extents that are not multiples of m, dilation phases with fewer
  // rows) are not stored.
  const Expr row0 = tile_origin(body, c[2], g.dilations[0], f.output_tile, "origin_h");
  const Expr col0 = tile_origin(body, c[3], g.dilations[1], f.output_tile, "origin_w");
  const Expr out_base = declare_index(body, "out_base", IndexSum()
                                                            .add(c[0], g.channels * g.out_h * g.out_w)
                                                            .add(c[1], g.out_h * g.out_w)
                                                            .add(row0, g.out_w)
                                                            .add(col0)
                                                            .expr());
  const std::int64_t last_row = tile_origin(g.tiles_h - 1, g.dilations[0], f.output_tile);
  const std::int64_t last_col = tile_origin(g.tiles_w - 1, g.dilations[1], f.output_tile);
  const Expr bias_value = has_bias ? kir::load(bias, c[1], ScalarType::f32) : Expr();
  for (std::size_t e = 0; e < tile; ++e)
    for (std::size_t j = 0; j < tile; ++j) {
      const std::int64_t row_offset = static_cast<std::int64_t>(e) * g.dilations[0];
      const std::int64_t col_offset = static_cast<std::int64_t>(j) * g.dilations[1];
      const Expr row = IndexSum().add(row0).add(row_offset).expr();
      const Expr col = IndexSum().add(col0).add(col_offset).expr();
      const Expr row_ok = vary || last_row + row_offset >= g.out_h ? row < kir::i32(g.out_h) : Expr();
      const Expr col_ok = vary || last_col + col_offset >= g.out_w ? col < kir::i32(g.out_w) : Expr();
      Expr value = outputs[e][j];
      if (has_bias) value = value + bias_value;
      append_guarded(body, both(row_ok, col_ok),
                     {kir::store(y, IndexSum().add(out_base).add(row_offset * g.out_w + col_offset).expr(),
                                 apply_activation(ctx, value))});
    }
  return kernel;
}

}  // namespace kiln::lower

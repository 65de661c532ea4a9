// WinogradInput and WinogradOutput: the two halves of a Winograd F(m x m, 3x3)
// convolution (m = 2 or 4, attribute output_tile, default 2) around a
// batched MatMul, written by the winograd pass (graph/passes/winograd.cpp)
// for a 3x3 stride-1 Conv; and WinogradWeight, the filter transform the pass
// writes instead of a transformed constant for eager mode, where it runs
// every call as a vendor library's eager Winograd does. kiln ops: the
// importer never produces them.
//
// Tiles: every tile computes m x m outputs from an n x n input window,
// n = m + 2. With dilation d along an axis, outputs d apart share a tile
// (each of the d interleaved sub-grids is an undilated convolution), so tile
// row r = a*d + p (a in [0, ceil(ceil(H_out/d)/m)), p in [0, d)) covers
// output rows p + m*d*a + e*d (e in [0, m)), and reads input rows from
// p + m*d*a - pad_top in steps of d. Positions past the output are computed
// and discarded.
//
// WinogradInput: X [N, C, H, W] -> V [n*n, C, columns], attributes pads
// (top, left, bottom, right), dilations, output_tile and columns (default
// N*TH*TW, the tile count; more pads the GEMM that reads V to a size its
// register tiles fit, and the extra columns are zero); V[xi*n+nu][c][t] =
// (B^T d B)[xi][nu] of tile t's n x n input window d (zero outside the
// input), t = (n*TH + r)*TW + s.
// WinogradOutput: M [n*n, K, columns >= N*TH*TW] (the MatMul of the
// transformed weights U [n*n, K, C] with V), optional bias [K] -> Y [N, K,
// H_out, W_out], attributes output_shape (N, K, H_out, W_out), dilations,
// output_tile and activation ("" or "Relu", after the bias); Y's m x m block
// of tile t is A^T m A.
// WinogradWeight: W [K, C, 3, 3] -> U [n*n, K, C], attribute output_tile;
// U[xi*n+nu][k][c] = (G g G^T)[xi][nu] of filter g = W[k][c]
// (graph/winograd_weights.h).
#include <algorithm>
#include <array>

#include "graph/ops/ops.h"
#include "graph/winograd_weights.h"
#include "src/base/check.h"

namespace kiln::graph::ops {

namespace {

// The transforms of F(m x m, 3x3): B^T [n x n] for the input, A^T [m x n] for
// the output (unused entries zero). F(2x2) interpolates at 0, +-1, inf;
// F(4x4) at 0, +-1, +-2, inf: A^T's column j holds the powers of point p_j
// (inf: the last row only), B^T's row j the coefficients of
// prod_{l != j} (x - p_l) up to sign and order. The pass's G (U = G g G^T)
// must use the same points in the same order.
struct Transform {
  int output_tile = 0;  // m
  int input_tile = 0;   // n = m + 2
  std::array<std::array<double, 6>, 6> bt{};
  std::array<std::array<double, 6>, 4> at{};
};

constexpr Transform kF2 = {2,
                           4,
                           {{{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}}},
                           {{{1, 1, 1, 0}, {0, 1, -1, -1}}}};
constexpr Transform kF4 = {4,
                           6,
                           {{{4, 0, -5, 0, 1, 0},
                             {0, -4, -4, 1, 1, 0},
                             {0, 4, -4, -1, 1, 0},
                             {0, -2, -1, 2, 1, 0},
                             {0, 2, -1, -2, 1, 0},
                             {0, 4, 0, -5, 0, 1}}},
                           {{{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}}}};

// The transform the node's output_tile attribute (2 or 4, default 2) names.
const Transform& read_transform(const Node& node) {
  const std::int64_t tile = node.attrs.get_int("output_tile", 2);
  KILN_CHECK(tile == 2 || tile == 4, ErrorKind::InvalidArgument,
             "attribute 'output_tile' must be 2 (F(2x2, 3x3)) or 4 (F(4x4, 3x3)), got " + std::to_string(tile));
  return tile == 2 ? kF2 : kF4;
}

std::int64_t tile_elements(const Transform& f) { return std::int64_t{f.input_tile} * f.input_tile; }

// Tiles along one axis of `extent` outputs at dilation d (see the file comment).
std::int64_t tiles_along(std::int64_t extent, std::int64_t dilation, std::int64_t tile) {
  const std::int64_t per_phase = (extent + dilation - 1) / dilation;
  return dilation * ((per_phase + tile - 1) / tile);
}

// The first output (and input, before padding) position of tile row/column r.
std::int64_t tile_origin(std::int64_t r, std::int64_t dilation, std::int64_t tile) {
  return r % dilation + tile * dilation * (r / dilation);
}

struct TileGrid {
  std::int64_t batch = 0, out_h = 0, out_w = 0, tiles_h = 0, tiles_w = 0;
  std::vector<std::int64_t> dilations;
  std::int64_t tiles() const { return batch * tiles_h * tiles_w; }
};

// ---- WinogradInput --------------------------------------------------------------

struct InputParams {
  std::vector<std::int64_t> pads, dilations;
  std::int64_t columns = 0;  // 0: the tile count
  const Transform* transform = nullptr;
};

InputParams read_input_params(const Node& node) {
  check_known_attributes(node, {"pads", "dilations", "columns", "output_tile"});
  InputParams p;
  p.pads = get_ints_of_length(node, "pads", {0, 0, 0, 0}, 4);
  check_non_negative("pads", p.pads);
  p.dilations = get_ints_of_length(node, "dilations", {1, 1}, 2);
  check_positive("dilations", p.dilations);
  p.columns = node.attrs.get_int("columns", 0);
  check_non_negative("columns", {p.columns});
  p.transform = &read_transform(node);
  return p;
}

TileGrid input_grid(const InputParams& p, const TensorType& x) {
  TileGrid grid;
  grid.batch = x.shape[0];
  grid.dilations = p.dilations;
  for (int d = 0; d < 2; ++d) {
    const std::int64_t padded = x.shape[2 + d] + p.pads[d] + p.pads[d + 2];
    const std::int64_t window = 2 * p.dilations[d] + 1;  // a 3x3 kernel's extent with dilation
    KILN_CHECK(padded >= window, ErrorKind::ShapeMismatch,
               std::string(d == 0 ? "height" : "width") + ": the 3x3 window (extent " + std::to_string(window) +
                   " with dilation) is larger than the padded input (" + std::to_string(padded) + "): " +
                   describe("input", x));
    (d == 0 ? grid.out_h : grid.out_w) = padded - window + 1;
    (d == 0 ? grid.tiles_h : grid.tiles_w) =
        tiles_along(padded - window + 1, p.dilations[d], p.transform->output_tile);
  }
  return grid;
}

// V's column count: the tile count unless `columns` asks for more.
std::int64_t input_columns(const InputParams& p, const TileGrid& grid) {
  KILN_CHECK(p.columns == 0 || p.columns >= grid.tiles(), ErrorKind::InvalidArgument,
             "attribute 'columns' (" + std::to_string(p.columns) + ") is less than the tile count (" +
                 std::to_string(grid.tiles()) + ")");
  return p.columns == 0 ? grid.tiles() : p.columns;
}

std::vector<TensorType> infer_input(const Node& node, std::span<const TensorType> in) {
  const InputParams p = read_input_params(node);
  require_f32("input", in[0]);
  require_rank("input", in[0], 4);
  const TileGrid grid = input_grid(p, in[0]);
  return {{DType::f32, {tile_elements(*p.transform), in[0].shape[1], input_columns(p, grid)}}};
}

std::vector<Tensor> reference_input(const Node& node, std::span<const Tensor> in) {
  const InputParams p = read_input_params(node);
  const Transform& f = *p.transform;
  const Tensor& x = in[0];
  const TileGrid grid = input_grid(p, {x.dtype(), x.shape()});
  const std::int64_t channels = x.shape()[1], height = x.shape()[2], width = x.shape()[3];
  const std::int64_t tiles = input_columns(p, grid);
  const int n = f.input_tile;
  Tensor v(DType::f32, {tile_elements(f), channels, tiles});
  auto xv = x.values<float>();
  auto vv = v.values<float>();
  std::fill(vv.begin(), vv.end(), 0.0f);  // the padding columns
  for (std::int64_t b = 0; b < grid.batch; ++b)
    for (std::int64_t c = 0; c < channels; ++c)
      for (std::int64_t r = 0; r < grid.tiles_h; ++r)
        for (std::int64_t s = 0; s < grid.tiles_w; ++s) {
          double d[6][6] = {};
          for (int u = 0; u < n; ++u)
            for (int w = 0; w < n; ++w) {
              const std::int64_t ih = tile_origin(r, p.dilations[0], f.output_tile) - p.pads[0] + u * p.dilations[0];
              const std::int64_t iw = tile_origin(s, p.dilations[1], f.output_tile) - p.pads[1] + w * p.dilations[1];
              const bool inside = ih >= 0 && ih < height && iw >= 0 && iw < width;
              d[u][w] = inside ? xv[((b * channels + c) * height + ih) * width + iw] : 0.0;  // zero padding
            }
          const std::int64_t t = (b * grid.tiles_h + r) * grid.tiles_w + s;
          for (int xi = 0; xi < n; ++xi)
            for (int nu = 0; nu < n; ++nu) {
              double acc = 0;
              for (int u = 0; u < n; ++u)
                for (int w = 0; w < n; ++w) acc += f.bt[xi][u] * d[u][w] * f.bt[nu][w];
              vv[((xi * n + nu) * channels + c) * tiles + t] = static_cast<float>(acc);
            }
        }
  return {v};
}

// ---- WinogradOutput -------------------------------------------------------------

struct OutputParams {
  std::vector<std::int64_t> output_shape, dilations;
  Activation activation = Activation::none;
  const Transform* transform = nullptr;
};

OutputParams read_output_params(const Node& node) {
  check_known_attributes(node, {"output_shape", "dilations", "activation", "output_tile"});
  OutputParams p;
  KILN_CHECK(node.attrs.has("output_shape"), ErrorKind::InvalidArgument,
             "attribute 'output_shape' (N, K, H_out, W_out) is missing");
  p.output_shape = get_ints_of_length(node, "output_shape", {}, 4);
  check_positive("output_shape", p.output_shape);
  p.dilations = get_ints_of_length(node, "dilations", {1, 1}, 2);
  check_positive("dilations", p.dilations);
  p.activation = get_activation(node);
  p.transform = &read_transform(node);
  return p;
}

// The grid and output shape of M; throws ShapeMismatch when M does not fit.
TileGrid output_grid(const Node& node, const OutputParams& p, std::span<const TensorType> in) {
  const TensorType& m = in[0];
  require_f32("input", m);
  require_rank("input", m, 3);
  const std::int64_t tile = p.transform->output_tile, elements = tile_elements(*p.transform);
  TileGrid grid;
  grid.batch = p.output_shape[0];
  grid.out_h = p.output_shape[2];
  grid.out_w = p.output_shape[3];
  grid.dilations = p.dilations;
  grid.tiles_h = tiles_along(grid.out_h, p.dilations[0], tile);
  grid.tiles_w = tiles_along(grid.out_w, p.dilations[1], tile);
  KILN_CHECK(m.shape[0] == elements && m.shape[1] == p.output_shape[1] && m.shape[2] >= grid.tiles(),
             ErrorKind::ShapeMismatch,
             "input must be [" + std::to_string(elements) + ", " + std::to_string(p.output_shape[1]) +
                 ", at least " + std::to_string(grid.tiles()) + "] (" + std::to_string(elements) +
                 " transformed values of the " + std::to_string(tile) + "x" + std::to_string(tile) +
                 " tiles of output_shape " + shape_str(p.output_shape) + "), got " + describe("input", m));
  if (in.size() > 1 && has_input(node, 1)) {
    require_f32("bias", in[1]);
    KILN_CHECK(in[1].shape == Shape{m.shape[1]}, ErrorKind::ShapeMismatch,
               "bias must be [" + std::to_string(m.shape[1]) + "] (one per output channel), got " +
                   describe("bias", in[1]));
  }
  return grid;
}

std::vector<TensorType> infer_output(const Node& node, std::span<const TensorType> in) {
  const OutputParams p = read_output_params(node);
  const TileGrid grid = output_grid(node, p, in);
  return {{DType::f32, {grid.batch, in[0].shape[1], grid.out_h, grid.out_w}}};
}

std::vector<Tensor> reference_output(const Node& node, std::span<const Tensor> in) {
  const OutputParams p = read_output_params(node);
  const Transform& f = *p.transform;
  const TileGrid grid = output_grid(node, p, types_of(in));
  const std::int64_t channels = in[0].shape()[1], tiles = in[0].shape()[2], tile = f.output_tile;
  const int n = f.input_tile;
  const bool has_bias = has_input(node, 1);
  Tensor y(DType::f32, {grid.batch, channels, grid.out_h, grid.out_w});
  auto mv = in[0].values<float>();
  auto yv = y.values<float>();
  for (std::int64_t b = 0; b < grid.batch; ++b)
    for (std::int64_t k = 0; k < channels; ++k)
      for (std::int64_t i = 0; i < grid.out_h; ++i)
        for (std::int64_t j = 0; j < grid.out_w; ++j) {
          // Output row i is element e of tile row r (see the file comment).
          const std::int64_t dh = p.dilations[0], dw = p.dilations[1];
          const std::int64_t r = (i / dh / tile) * dh + i % dh, e = (i / dh) % tile;
          const std::int64_t s = (j / dw / tile) * dw + j % dw, g = (j / dw) % tile;
          const std::int64_t t = (b * grid.tiles_h + r) * grid.tiles_w + s;
          double acc = has_bias ? in[1].values<float>()[k] : 0.0;
          for (int xi = 0; xi < n; ++xi)
            for (int nu = 0; nu < n; ++nu)
              acc += f.at[e][xi] * mv[((xi * n + nu) * channels + k) * tiles + t] * f.at[g][nu];
          yv[((b * channels + k) * grid.out_h + i) * grid.out_w + j] =
              static_cast<float>(apply_activation(p.activation, acc));
        }
  return {y};
}

// ---- WinogradWeight -------------------------------------------------------------

std::vector<TensorType> infer_weight(const Node& node, std::span<const TensorType> in) {
  check_known_attributes(node, {"output_tile"});
  const Transform& f = read_transform(node);
  require_f32("weight", in[0]);
  require_rank("weight", in[0], 4);
  KILN_CHECK(in[0].shape[2] == 3 && in[0].shape[3] == 3, ErrorKind::ShapeMismatch,
             "weight must be [K, C, 3, 3] (OIHW 3x3 filters), got " + describe("weight", in[0]));
  return {{DType::f32, {tile_elements(f), in[0].shape[0], in[0].shape[1]}}};
}

std::vector<Tensor> reference_weight(const Node& node, std::span<const Tensor> in) {
  return {winograd_transform_weight(in[0], read_transform(node).output_tile)};
}

}  // namespace

void register_winograd_ops(OpTable& table) {
  add_op(table, make_schema("WinogradInput", 1, 1, infer_input, reference_input,
                            "X [N, C, H, W] -> V [n*n, C, tiles]: B^T d B per n x n input tile of a 3x3 stride-1 "
                            "convolution, n = output_tile + 2 (kiln's, from the winograd pass)"));
  add_op(table, make_schema("WinogradOutput", 1, 2, infer_output, reference_output,
                            "M [n*n, K, tiles] (+ bias [K]) -> Y [N, K, H, W]: A^T m A per output_tile^2 output "
                            "tile, activation=\"Relu\" fuses a Relu (kiln's, from the winograd pass)"));
  add_op(table, make_schema("WinogradWeight", 1, 1, infer_weight, reference_weight,
                            "W [K, C, 3, 3] -> U [n*n, K, C]: G g G^T per 3x3 filter, n = output_tile + 2 "
                            "(kiln's, from the winograd pass in eager mode, which transforms the filter every call)"));
}

}  // namespace kiln::graph::ops

namespace kiln::graph {

std::span<const std::array<double, 3>> winograd_filter_transform(std::int64_t output_tile) {
  KILN_CHECK(output_tile == 2 || output_tile == 4, ErrorKind::InvalidArgument,
             "Winograd output tile must be 2 (F(2x2, 3x3)) or 4 (F(4x4, 3x3)), got " + std::to_string(output_tile));
  if (output_tile == 2) return kWinogradG2;
  return kWinogradG4;
}

Tensor winograd_transform_weight(const Tensor& weight, std::int64_t output_tile) {
  const std::span<const std::array<double, 3>> g_matrix = winograd_filter_transform(output_tile);
  KILN_CHECK(weight.dtype() == DType::f32 && weight.shape().size() == 4 && weight.shape()[2] == 3 &&
                 weight.shape()[3] == 3,
             ErrorKind::ShapeMismatch, "a Winograd filter transform needs an f32 [K, C, 3, 3] weight, got " +
                                           ops::describe("weight", {weight.dtype(), weight.shape()}));
  const std::int64_t out_channels = weight.shape()[0], in_channels = weight.shape()[1];
  const std::int64_t plane = out_channels * in_channels;
  const std::size_t n = g_matrix.size();
  const auto elements = static_cast<std::int64_t>(n * n);
  Tensor u(DType::f32, {elements, out_channels, in_channels});
  const auto g = weight.values<float>();
  auto to = u.values<float>();
  for (std::int64_t filter = 0; filter < plane; ++filter) {
    const float* taps = &g[static_cast<std::size_t>(filter * 9)];
    std::array<std::array<double, 3>, 6> gg{};  // G g
    for (std::size_t xi = 0; xi < n; ++xi)
      for (std::size_t col = 0; col < 3; ++col)
        for (std::size_t row = 0; row < 3; ++row) gg[xi][col] += g_matrix[xi][row] * taps[row * 3 + col];
    for (std::size_t xi = 0; xi < n; ++xi)
      for (std::size_t nu = 0; nu < n; ++nu) {
        double acc = 0;
        for (std::size_t col = 0; col < 3; ++col) acc += gg[xi][col] * g_matrix[nu][col];
        to[static_cast<std::size_t>(static_cast<std::int64_t>(xi * n + nu) * plane + filter)] =
            static_cast<float>(acc);
      }
  }
  return u;
}

}  // namespace kiln::graph

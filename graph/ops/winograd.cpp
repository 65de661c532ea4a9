// WinogradInput and WinogradOutput: the two halves of a Winograd F(2x2, 3x3)
// convolution around a batched MatMul, written by the winograd compile pass
// (graph/passes/winograd.cpp) for a 3x3 stride-1 Conv. kiln ops: the
// importer never produces them.
//
// Tiles: every tile computes 2x2 outputs from a 4x4 input window. With
// dilation d along an axis, outputs d apart share a tile (each of the d
// interleaved sub-grids is an undilated convolution), so tile row r = a*d + p
// (a in [0, ceil(ceil(H_out/d)/2)), p in [0, d)) covers output rows
// p + 2*d*a and p + 2*d*a + d, and reads input rows from p + 2*d*a - pad_top
// in steps of d. Positions past the output are computed and discarded.
//
// WinogradInput: X [N, C, H, W] -> V [16, C, columns], attributes pads (top,
// left, bottom, right), dilations and columns (default N*TH*TW, the tile
// count; more pads the GEMM that reads V to a size its register tiles fit,
// and the extra columns are zero); V[xi*4+nu][c][t] = (B^T d B)[xi][nu] of
// tile t's 4x4 input window d (zero outside the input), t = (n*TH + r)*TW + s.
// WinogradOutput: M [16, K, columns >= N*TH*TW] (the MatMul of the
// transformed weights U [16, K, C] with V), optional bias [K] -> Y [N, K,
// H_out, W_out], attributes output_shape (N, K, H_out, W_out), dilations and
// activation ("" or "Relu", after the bias); Y's 2x2 block of tile t is
// A^T m A.
#include <algorithm>
#include <array>

#include "graph/ops/ops.h"

namespace kiln::graph::ops {

namespace {

constexpr std::int64_t kTileElements = 16;  // 4x4 transformed values per tile

// B^T (input transform) and A^T (output transform) of F(2x2, 3x3).
constexpr std::array<std::array<double, 4>, 4> kBT = {{{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}}};
constexpr std::array<std::array<double, 4>, 2> kAT = {{{1, 1, 1, 0}, {0, 1, -1, -1}}};

// Tiles along one axis of `extent` outputs at dilation d (see the file comment).
std::int64_t tiles_along(std::int64_t extent, std::int64_t dilation) {
  const std::int64_t per_phase = (extent + dilation - 1) / dilation;
  return dilation * ((per_phase + 1) / 2);
}

// The first output (and input, before padding) position of tile row/column r.
std::int64_t tile_origin(std::int64_t r, std::int64_t dilation) {
  return r % dilation + 2 * dilation * (r / dilation);
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
};

InputParams read_input_params(const Node& node) {
  check_known_attributes(node, {"pads", "dilations", "columns"});
  InputParams p;
  p.pads = get_ints_of_length(node, "pads", {0, 0, 0, 0}, 4);
  check_non_negative("pads", p.pads);
  p.dilations = get_ints_of_length(node, "dilations", {1, 1}, 2);
  check_positive("dilations", p.dilations);
  p.columns = node.attrs.get_int("columns", 0);
  check_non_negative("columns", {p.columns});
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
    (d == 0 ? grid.tiles_h : grid.tiles_w) = tiles_along(padded - window + 1, p.dilations[d]);
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
  return {{DType::f32, {kTileElements, in[0].shape[1], input_columns(p, grid)}}};
}

std::vector<Tensor> reference_input(const Node& node, std::span<const Tensor> in) {
  const InputParams p = read_input_params(node);
  const Tensor& x = in[0];
  const TileGrid grid = input_grid(p, {x.dtype(), x.shape()});
  const std::int64_t channels = x.shape()[1], height = x.shape()[2], width = x.shape()[3];
  const std::int64_t tiles = input_columns(p, grid);
  Tensor v(DType::f32, {kTileElements, channels, tiles});
  auto xv = x.values<float>();
  auto vv = v.values<float>();
  std::fill(vv.begin(), vv.end(), 0.0f);  // the padding columns
  for (std::int64_t n = 0; n < grid.batch; ++n)
    for (std::int64_t c = 0; c < channels; ++c)
      for (std::int64_t r = 0; r < grid.tiles_h; ++r)
        for (std::int64_t s = 0; s < grid.tiles_w; ++s) {
          double d[4][4];
          for (int u = 0; u < 4; ++u)
            for (int w = 0; w < 4; ++w) {
              const std::int64_t ih = tile_origin(r, p.dilations[0]) - p.pads[0] + u * p.dilations[0];
              const std::int64_t iw = tile_origin(s, p.dilations[1]) - p.pads[1] + w * p.dilations[1];
              const bool inside = ih >= 0 && ih < height && iw >= 0 && iw < width;
              d[u][w] = inside ? xv[((n * channels + c) * height + ih) * width + iw] : 0.0;  // zero padding
            }
          const std::int64_t t = (n * grid.tiles_h + r) * grid.tiles_w + s;
          for (int xi = 0; xi < 4; ++xi)
            for (int nu = 0; nu < 4; ++nu) {
              double acc = 0;
              for (int u = 0; u < 4; ++u)
                for (int w = 0; w < 4; ++w) acc += kBT[xi][u] * d[u][w] * kBT[nu][w];
              vv[((xi * 4 + nu) * channels + c) * tiles + t] = static_cast<float>(acc);
            }
        }
  return {v};
}

// ---- WinogradOutput -------------------------------------------------------------

struct OutputParams {
  std::vector<std::int64_t> output_shape, dilations;
  Activation activation = Activation::none;
};

OutputParams read_output_params(const Node& node) {
  check_known_attributes(node, {"output_shape", "dilations", "activation"});
  OutputParams p;
  KILN_CHECK(node.attrs.has("output_shape"), ErrorKind::InvalidArgument,
             "attribute 'output_shape' (N, K, H_out, W_out) is missing");
  p.output_shape = get_ints_of_length(node, "output_shape", {}, 4);
  check_positive("output_shape", p.output_shape);
  p.dilations = get_ints_of_length(node, "dilations", {1, 1}, 2);
  check_positive("dilations", p.dilations);
  p.activation = get_activation(node);
  return p;
}

// The grid and output shape of M; throws ShapeMismatch when M does not fit.
TileGrid output_grid(const Node& node, const OutputParams& p, std::span<const TensorType> in) {
  const TensorType& m = in[0];
  require_f32("input", m);
  require_rank("input", m, 3);
  TileGrid grid;
  grid.batch = p.output_shape[0];
  grid.out_h = p.output_shape[2];
  grid.out_w = p.output_shape[3];
  grid.dilations = p.dilations;
  grid.tiles_h = tiles_along(grid.out_h, p.dilations[0]);
  grid.tiles_w = tiles_along(grid.out_w, p.dilations[1]);
  KILN_CHECK(m.shape[0] == kTileElements && m.shape[1] == p.output_shape[1] && m.shape[2] >= grid.tiles(),
             ErrorKind::ShapeMismatch,
             "input must be [16, " + std::to_string(p.output_shape[1]) + ", at least " +
                 std::to_string(grid.tiles()) + "] (16 transformed values of the tiles of output_shape " +
                 shape_str(p.output_shape) + "), got " + describe("input", m));
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
  const TileGrid grid = output_grid(node, p, types_of(in));
  const std::int64_t channels = in[0].shape()[1], tiles = in[0].shape()[2];
  const bool has_bias = has_input(node, 1);
  Tensor y(DType::f32, {grid.batch, channels, grid.out_h, grid.out_w});
  auto mv = in[0].values<float>();
  auto yv = y.values<float>();
  for (std::int64_t n = 0; n < grid.batch; ++n)
    for (std::int64_t k = 0; k < channels; ++k)
      for (std::int64_t i = 0; i < grid.out_h; ++i)
        for (std::int64_t j = 0; j < grid.out_w; ++j) {
          // Output row i is element e of tile row r (see the file comment).
          const std::int64_t dh = p.dilations[0], dw = p.dilations[1];
          const std::int64_t r = (i / dh / 2) * dh + i % dh, e = (i / dh) % 2;
          const std::int64_t s = (j / dw / 2) * dw + j % dw, f = (j / dw) % 2;
          const std::int64_t t = (n * grid.tiles_h + r) * grid.tiles_w + s;
          double acc = has_bias ? in[1].values<float>()[k] : 0.0;
          for (int xi = 0; xi < 4; ++xi)
            for (int nu = 0; nu < 4; ++nu)
              acc += kAT[e][xi] * mv[((xi * 4 + nu) * channels + k) * tiles + t] * kAT[f][nu];
          yv[((n * channels + k) * grid.out_h + i) * grid.out_w + j] =
              static_cast<float>(apply_activation(p.activation, acc));
        }
  return {y};
}

}  // namespace

void register_winograd_ops(OpTable& table) {
  add_op(table, make_schema("WinogradInput", 1, 1, infer_input, reference_input,
                            "X [N, C, H, W] -> V [16, C, tiles]: B^T d B per 4x4 input tile of a 3x3 stride-1 "
                            "convolution (kiln's, from the winograd pass)"));
  add_op(table, make_schema("WinogradOutput", 1, 2, infer_output, reference_output,
                            "M [16, K, tiles] (+ bias [K]) -> Y [N, K, H, W]: A^T m A per 2x2 output tile, "
                            "activation=\"Relu\" fuses a Relu (kiln's, from the winograd pass)"));
}

}  // namespace kiln::graph::ops

#include "shaders/conv_template.h"

#include "shaders/gemm_template.h"
#include "shaders/template_util.h"
#include "src/base/check.h"

#include <kiln/error.h>

#include <set>
#include <string>
#include <vector>

namespace kiln::shaders {

using detail::add_constant;
using detail::add_scaled;
using detail::ceil_div;
using detail::declare_i32;
using detail::indexed;
using detail::kVector;
using kir::Expr;
using kir::ScalarType;
using kir::Stmt;

namespace {

Expr finish(const ConvProblem& p, Expr acc, Expr channel) {
  if (p.bias) acc = acc + kir::load(*p.bias, channel, ScalarType::f32);
  return p.activation ? p.activation(acc) : acc;
}

// The GEMM of one (image, group): W [Co/g, K] x B [K, out plane], K = Ci/g *
// kH * kW, batched over images and groups. B is X itself for gemm_1x1;
// implicit_gemm gathers it (conv_gather_b).
GemmProblem conv_gemm_problem(const ConvProblem& p) {
  const std::int64_t in_plane = p.in_h * p.in_w, out_plane = p.out_h * p.out_w;
  const std::int64_t cig = p.in_channels_per_group(), cog = p.out_channels_per_group();
  const std::int64_t k = cig * p.kernel_h * p.kernel_w;
  GemmProblem g;
  g.batch = p.batch * p.groups;
  g.m = cog;
  g.n = out_plane;
  g.n_varies = p.spatial_extents_vary;
  g.k = k;
  g.a_row_stride = k;
  g.a_k_stride = 1;
  g.b_k_stride = in_plane;  // gemm_1x1 (in plane = out plane)
  g.b_col_stride = 1;
  g.y_row_stride = out_plane;
  g.y_col_stride = 1;
  g.a = p.w;
  g.b = p.x;
  g.y = p.y;
  g.a_base_multiple = cog * k;       // the bases below: group * cog * k and
  g.b_base_multiple = cig * in_plane;  // image * Ci * in plane + group * cig * in plane
  g.y_base_multiple = cog * out_plane;  // image * Co * out plane + group * cog * out plane
  const std::int64_t groups = p.groups;
  auto group_of = [groups](Expr batch) { return groups == 1 ? kir::i32(0) : batch % kir::i32(groups); };
  g.bases = [&p, in_plane, out_plane, cig, cog, k, groups, group_of](std::vector<Stmt>& body, Expr batch) {
    const Expr image = declare_i32(body, "image", groups == 1 ? batch : batch / kir::i32(groups));
    const Expr group = declare_i32(body, "group", group_of(batch));
    GemmBases bases;
    bases.a = declare_i32(body, "w_base", add_scaled({}, group, cog * k));
    bases.b = declare_i32(body, "x_base",
                          add_scaled(add_scaled({}, image, p.in_channels * in_plane), group, cig * in_plane));
    bases.y = declare_i32(body, "y_base",
                          add_scaled(add_scaled({}, image, p.out_channels * out_plane), group, cog * out_plane));
    return bases;
  };
  g.epilogue = [&p, cog, group_of](Expr acc, Expr row, Expr, Expr batch) {
    return finish(p, acc, add_scaled(row, group_of(batch), cog));
  };
  return g;
}

// Whether an input coordinate origin * stride - pad + tap * dilation, over
// every output position origin < out_extent, can fall below 0 (low) or
// reach `in_extent` (high): only those bounds get checked. Where the
// extents vary, every high bound is.
struct TapBounds {
  bool low, high;
};
TapBounds tap_bounds(std::int64_t out_extent, std::int64_t in_extent, std::int64_t stride, std::int64_t pad,
                     std::int64_t tap, std::int64_t dilation, bool extents_vary) {
  const std::int64_t first = -pad + tap * dilation;
  const std::int64_t last = (out_extent - 1) * stride - pad + tap * dilation;
  return {first < 0, extents_vary || last >= in_extent};
}

// The im2col matrix B [Ci/g * kH * kW, out_h * out_w] of one (image, group),
// read in place: k = ci * taps + (kh * kW + kw), column = oh * out_w + ow is
// X[ci, oh * stride - pad + kh * dilation, ow * stride - pad + kw * dilation],
// zero outside the image. Per column the input origin is computed once; the
// K loop runs over ci with the taps unrolled, so each load is the column's
// origin plus constants, checked against the image only where the tap can
// leave it.
GemmGatherB conv_gather_b(const ConvProblem& p) {
  GemmGatherB gather;
  gather.taps = p.kernel_h * p.kernel_w;
  // The input row (column) of each block column is kept only when some tap
  // must check it; a load at a run-time tap checks every bound some tap needs.
  TapBounds any_row{false, false}, any_col{false, false};
  for (std::int64_t kh = 0; kh < p.kernel_h; ++kh) {
    const TapBounds b = tap_bounds(p.out_h, p.in_h, p.stride_h, p.pad_top, kh, p.dilation_h, p.spatial_extents_vary);
    any_row = {any_row.low || b.low, any_row.high || b.high};
  }
  for (std::int64_t kw = 0; kw < p.kernel_w; ++kw) {
    const TapBounds b = tap_bounds(p.out_w, p.in_w, p.stride_w, p.pad_left, kw, p.dilation_w, p.spatial_extents_vary);
    any_col = {any_col.low || b.low, any_col.high || b.high};
  }
  const bool check_rows = any_row.low || any_row.high, check_cols = any_col.low || any_col.high;
  gather.prepare = [&p, check_rows, check_cols](std::vector<Stmt>& body, Expr col, Expr b_base,
                                                std::uint32_t slot) {
    const bool one_column = p.out_w == 1 && !p.spatial_extents_vary;
    const Expr oh = one_column ? col : col / kir::i32(p.out_w);
    const Expr ow = one_column ? kir::i32(0) : col % kir::i32(p.out_w);
    Expr ih = add_constant(add_scaled({}, oh, p.stride_h), -p.pad_top);
    Expr iw = add_constant(add_scaled({}, ow, p.stride_w), -p.pad_left);
    if (check_rows) ih = declare_i32(body, indexed("ih", slot), ih);
    if (check_cols) iw = declare_i32(body, indexed("iw", slot), iw);
    declare_i32(body, indexed("x_at", slot), add_scaled(add_scaled(b_base, ih, p.in_w), iw, 1));
  };
  gather.load = [&p](std::vector<Stmt>& out, const std::string& name, Expr ci, std::int64_t tap,
                     std::uint32_t slot) {
    const std::int64_t kh = tap / p.kernel_w, kw = tap % p.kernel_w;
    const Expr origin = kir::var(indexed("x_at", slot), ScalarType::i32);
    const Expr at = add_constant(add_scaled(origin, ci, p.in_h * p.in_w),
                                 kh * p.dilation_h * p.in_w + kw * p.dilation_w);
    const TapBounds rows = tap_bounds(p.out_h, p.in_h, p.stride_h, p.pad_top, kh, p.dilation_h, p.spatial_extents_vary);
    const TapBounds cols = tap_bounds(p.out_w, p.in_w, p.stride_w, p.pad_left, kw, p.dilation_w, p.spatial_extents_vary);
    const Expr ih = add_constant(kir::var(indexed("ih", slot), ScalarType::i32), kh * p.dilation_h);
    const Expr iw = add_constant(kir::var(indexed("iw", slot), ScalarType::i32), kw * p.dilation_w);
    Expr inside;
    auto require = [&inside](Expr condition) { inside = inside ? (inside && condition) : condition; };
    if (rows.low) require(ih >= kir::i32(0));
    if (rows.high) require(ih < kir::i32(p.in_h));
    if (cols.low) require(iw >= kir::i32(0));
    if (cols.high) require(iw < kir::i32(p.in_w));
    if (!inside) {
      out.push_back(kir::declare(name, ScalarType::f32, kir::load(p.x, at, ScalarType::f32)));
      return;
    }
    // Outside: read element 0 (always valid), then zero the value. The load
    // stays unconditional so the loop body stays straight-line code.
    out.push_back(
        kir::declare(name, ScalarType::f32, kir::load(p.x, kir::select(inside, at, kir::i32(0)), ScalarType::f32)));
    out.push_back(kir::assign(name, kir::select(inside, kir::var(name, ScalarType::f32), kir::f32(0.0))));
  };
  // k = ci * taps + kh * kW + kw at run time (the shared-memory tiles).
  gather.load_at = [&p, any_row, any_col](std::vector<Stmt>& out, const std::string& name, Expr k,
                                          std::uint32_t slot) {
    const std::int64_t taps = p.kernel_h * p.kernel_w;
    const Expr ci = declare_i32(out, name + "_ci", k / kir::i32(taps));
    const Expr tap = declare_i32(out, name + "_tap", k % kir::i32(taps));
    const Expr kh = p.kernel_w == 1 ? tap : declare_i32(out, name + "_kh", tap / kir::i32(p.kernel_w));
    const Expr kw = p.kernel_w == 1 ? kir::i32(0) : declare_i32(out, name + "_kw", tap % kir::i32(p.kernel_w));
    const Expr origin = kir::var(indexed("x_at", slot), ScalarType::i32);
    const Expr at = declare_i32(
        out, name + "_at",
        add_scaled(add_scaled(add_scaled(origin, ci, p.in_h * p.in_w), kh, p.dilation_h * p.in_w), kw, p.dilation_w));
    Expr inside;
    auto require = [&inside](Expr condition) { inside = inside ? (inside && condition) : condition; };
    if (any_row.low || any_row.high) {
      const Expr ih = add_scaled(kir::var(indexed("ih", slot), ScalarType::i32), kh, p.dilation_h);
      if (any_row.low) require(ih >= kir::i32(0));
      if (any_row.high) require(ih < kir::i32(p.in_h));
    }
    if (any_col.low || any_col.high) {
      const Expr iw = add_scaled(kir::var(indexed("iw", slot), ScalarType::i32), kw, p.dilation_w);
      if (any_col.low) require(iw >= kir::i32(0));
      if (any_col.high) require(iw < kir::i32(p.in_w));
    }
    if (!inside) {
      out.push_back(kir::declare(name, ScalarType::f32, kir::load(p.x, at, ScalarType::f32)));
      return;
    }
    out.push_back(kir::declare(name + "_in", ScalarType::boolean, inside));
    const Expr ok = kir::var(name + "_in", ScalarType::boolean);
    out.push_back(kir::declare(name, ScalarType::f32, kir::load(p.x, kir::select(ok, at, kir::i32(0)), ScalarType::f32)));
    out.push_back(kir::assign(name, kir::select(ok, kir::var(name, ScalarType::f32), kir::f32(0.0))));
  };
  return gather;
}

void build_conv_gemm(kir::Kernel& kernel, const ConvProblem& p, const GemmKnobs& knobs, bool gathered) {
  GemmProblem g = conv_gemm_problem(p);
  if (gathered) g.gather_b = conv_gather_b(p);
  build_gemm(kernel, g, knobs);
}

// OIhw4o (see ConvProblem::packed_weights): output channels per block.
constexpr std::int64_t kPackedBlock = 4;

// Where an invocation's channels start in a packed weight: with a tile of 4
// or 8 channels, the vec4 index of each block's tap 0 (vector_rows);
// otherwise the element index of each channel's tap 0 (scalar_rows, taps 4
// elements apart).
struct PackedWeightRows {
  std::vector<Expr> vector_rows, scalar_rows;
};

PackedWeightRows packed_weight_rows(std::vector<Stmt>& body, const ConvProblem& p, const ConvKnobs& knobs,
                                    Expr channel_block, Expr group, Expr c0) {
  const std::int64_t cig = p.in_channels_per_group(), cog = p.out_channels_per_group();
  const std::int64_t block_taps = cig * p.kernel_h * p.kernel_w;
  const std::int64_t blocks = ceil_div(cog, kPackedBlock);
  const std::int64_t tc = knobs.tile_channels;
  PackedWeightRows rows;
  if (tc % kPackedBlock == 0) {
    // Blocks past the group's last (a tile of 8 over an odd block count)
    // read the last one instead: never stored.
    for (std::int64_t q = 0; q < tc / kPackedBlock; ++q) {
      const Expr block = add_constant(add_scaled({}, channel_block, tc / kPackedBlock), q);
      const bool past_end = q > 0 && blocks % (tc / kPackedBlock) != 0;
      const Expr safe = past_end ? kir::min(block, kir::i32(blocks - 1)) : block;
      rows.vector_rows.push_back(declare_i32(body, indexed("w_vrow", q),
                                             add_scaled(add_scaled({}, group, blocks * block_taps), safe, block_taps)));
    }
    return rows;
  }
  // Channels past the group's last stay inside its last block (its zero
  // padding) or are clamped to its last channel: read, never stored.
  for (std::int64_t i = 0; i < tc; ++i) {
    Expr channel = add_constant(c0, i);
    if (cog % tc != 0 && i > 0) channel = kir::min(channel, kir::i32(cog - 1));
    const Expr block = channel / kir::i32(kPackedBlock), lane = channel % kir::i32(kPackedBlock);
    const Expr row = add_scaled(add_scaled({}, group, blocks * block_taps), block, block_taps);
    rows.scalar_rows.push_back(declare_i32(body, indexed("w_row", i), add_scaled(lane, row, kPackedBlock)));
  }
  return rows;
}

// The positions of the input row segment an invocation reads, relative to
// its first column: column j and kernel column kw read j * stride + kw * dilation.
std::set<std::int64_t> segment_positions(const ConvProblem& p, const ConvKnobs& knobs) {
  std::set<std::int64_t> positions;
  for (std::int64_t j = 0; j < knobs.tile_width; ++j)
    for (std::int64_t kw = 0; kw < p.kernel_w; ++kw) positions.insert(j * p.stride_w + kw * p.dilation_w);
  return positions;
}

void build_conv_direct(kir::Kernel& kernel, const ConvProblem& p, const ConvKnobs& knobs) {
  const std::int64_t cig = p.in_channels_per_group(), cog = p.out_channels_per_group();
  const std::int64_t tc = knobs.tile_channels, tw = knobs.tile_width;
  const std::int64_t c_blocks = ceil_div(cog, tc), w_blocks = ceil_div(p.out_w, tw);
  const std::int64_t plane = p.in_h * p.in_w, window = p.kernel_h * p.kernel_w;
  kernel.global_size = p.batch * p.groups * c_blocks * p.out_h * w_blocks;
  kernel.workgroup_size = knobs.workgroup_size;
  std::vector<Stmt>& body = kernel.body;

  // Column blocks vary fastest: neighbouring invocations read the same
  // weights and neighbouring input columns.
  const std::vector<Expr> at = detail::split_index(
      body, kir::global_index(),
      {{"image", p.batch}, {"group", p.groups}, {"cb", c_blocks}, {"oh", p.out_h}, {"wb", w_blocks}},
      {p.spatial_extents_vary, false, false, p.spatial_extents_vary, p.spatial_extents_vary});
  const Expr image = at[0], group = at[1], oh = at[3];
  const Expr c0 = declare_i32(body, "c0", add_scaled({}, at[2], tc));  // first channel within the group
  const Expr ow0 = declare_i32(body, "ow0", add_scaled({}, at[4], tw));

  // Channels past the group's last read its weights (never stored).
  const bool channel_tail = cog % tc != 0;
  std::vector<Expr> channels, w_rows;
  for (std::int64_t i = 0; i < tc; ++i) {
    const Expr in_group = add_constant(c0, i);
    const Expr safe = channel_tail && i > 0 ? kir::min(in_group, kir::i32(cog - 1)) : in_group;
    channels.push_back(declare_i32(body, indexed("co", i), add_scaled(add_scaled({}, group, cog), in_group, 1)));
    if (!p.packed_weights)
      w_rows.push_back(declare_i32(body, indexed("w_row", i),
                                   add_scaled(add_scaled({}, group, cog * cig * window), safe, cig * window)));
  }
  const PackedWeightRows packed = p.packed_weights ? packed_weight_rows(body, p, knobs, at[2], group, c0) : PackedWeightRows{};
  const Expr x_base = declare_i32(
      body, "x_base", add_scaled(add_scaled({}, image, p.in_channels * plane), group, cig * plane));
  const Expr ih0 = declare_i32(body, "ih0", add_constant(add_scaled({}, oh, p.stride_h), -p.pad_top));
  const Expr iw0 = declare_i32(body, "iw0", add_constant(add_scaled({}, ow0, p.stride_w), -p.pad_left));

  // Per segment position: the clamped column and, when it can leave the
  // row, whether it is inside.
  const std::set<std::int64_t> positions = segment_positions(p, knobs);
  const std::int64_t max_iw0 = (w_blocks - 1) * tw * p.stride_w - p.pad_left;
  std::vector<Expr> columns(static_cast<std::size_t>(*positions.rbegin() + 1));
  std::vector<Expr> column_ok(columns.size());
  for (std::int64_t t : positions) {
    const bool under = t - p.pad_left < 0, over = p.spatial_extents_vary || max_iw0 + t >= p.in_w;
    Expr column = add_constant(iw0, t), safe = column, ok;
    if (under) {
      safe = kir::max(safe, kir::i32(0));
      ok = column >= kir::i32(0);
    }
    if (over) {
      safe = kir::min(safe, kir::i32(p.in_w - 1));
      ok = ok ? (ok && column < kir::i32(p.in_w)) : column < kir::i32(p.in_w);
    }
    const auto u = static_cast<std::size_t>(t);
    columns[u] = declare_i32(body, indexed("seg_col", t), safe);
    if (ok) {
      body.push_back(kir::declare(indexed("seg_ok", t), ScalarType::boolean, ok));
      column_ok[u] = kir::var(indexed("seg_ok", t), ScalarType::boolean);
    }
  }

  for (std::int64_t i = 0; i < tc; ++i)
    for (std::int64_t j = 0; j < tw; ++j) body.push_back(kir::declare(indexed("acc", i, j), ScalarType::f32, kir::f32(0.0)));

  // Per (kernel row, input channel): the segment, then every tap from registers.
  const Expr kh = kir::var("kh", ScalarType::i32);
  const Expr ci = cig == 1 ? kir::i32(0) : kir::var("ci", ScalarType::i32);
  const Expr ih = kir::var("ih", ScalarType::i32);
  std::vector<Stmt> taps;
  const Expr x_row = add_scaled(kir::var("x_row", ScalarType::i32), ci, plane);
  for (std::int64_t t : positions) {
    const auto u = static_cast<std::size_t>(t);
    const std::string name = indexed("xv", t);
    taps.push_back(kir::declare(name, ScalarType::f32, kir::load(p.x, x_row + columns[u], ScalarType::f32)));
    // Zeroed after the load rather than loaded under a select, which a
    // shader compiler may turn into a branch.
    if (column_ok[u])
      taps.push_back(kir::assign(name, kir::select(column_ok[u], kir::var(name, ScalarType::f32), kir::f32(0.0))));
  }
  const Expr w_tap0 = add_scaled(add_scaled({}, ci, window), kh, p.kernel_w);
  auto append_fmas = [&](std::int64_t i, std::int64_t kw) {
    const Expr wv = kir::var(indexed("wv", i, kw), ScalarType::f32);
    for (std::int64_t j = 0; j < tw; ++j) {
      const std::string acc = indexed("acc", i, j);
      const Expr x_value = kir::var(indexed("xv", j * p.stride_w + kw * p.dilation_w), ScalarType::f32);
      taps.push_back(kir::assign(acc, kir::var(acc, ScalarType::f32) + wv * x_value));
    }
  };
  if (p.packed_weights) {
    // Per kernel column: every channel's weight (tc / 4 vec4 loads, or tc
    // scalar ones), then the multiply-adds.
    for (std::int64_t kw = 0; kw < p.kernel_w; ++kw) {
      const Expr tap = add_constant(w_tap0, kw);
      if (!packed.vector_rows.empty()) {
        for (std::size_t q = 0; q < packed.vector_rows.size(); ++q) {
          std::vector<std::string> names;
          for (std::int64_t r = 0; r < kPackedBlock; ++r)
            names.push_back(indexed("wv", static_cast<std::int64_t>(q) * kPackedBlock + r, kw));
          taps.push_back(kir::load_vector(std::move(names), p.w, packed.vector_rows[q] + tap, ScalarType::f32));
        }
      } else {
        for (std::int64_t i = 0; i < tc; ++i)
          taps.push_back(kir::declare(
              indexed("wv", i, kw), ScalarType::f32,
              kir::load(p.w, add_scaled(packed.scalar_rows[static_cast<std::size_t>(i)], tap, kPackedBlock),
                        ScalarType::f32)));
      }
      for (std::int64_t i = 0; i < tc; ++i) append_fmas(i, kw);
    }
  } else {
    for (std::int64_t i = 0; i < tc; ++i)
      for (std::int64_t kw = 0; kw < p.kernel_w; ++kw) {
        taps.push_back(kir::declare(indexed("wv", i, kw), ScalarType::f32,
                                    kir::load(p.w, add_constant(w_rows[static_cast<std::size_t>(i)] + w_tap0, kw),
                                              ScalarType::f32)));
        append_fmas(i, kw);
      }
  }

  std::vector<Stmt> row;
  row.push_back(kir::declare("x_row", ScalarType::i32, add_scaled(x_base, ih, p.in_w)));
  if (cig == 1) {
    for (Stmt& s : taps) row.push_back(std::move(s));
  } else {
    row.push_back(kir::loop("ci", kir::i32(0), kir::i32(cig), std::move(taps)));
  }
  // Rows above or below the input contribute nothing: skip them.
  const bool row_under = p.pad_top > 0;
  const bool row_over = p.spatial_extents_vary || (p.out_h - 1) * p.stride_h - p.pad_top + (p.kernel_h - 1) * p.dilation_h >= p.in_h;
  Expr row_ok;
  if (row_under) row_ok = ih >= kir::i32(0);
  if (row_over) row_ok = row_ok ? (row_ok && ih < kir::i32(p.in_h)) : ih < kir::i32(p.in_h);
  std::vector<Stmt> kh_body;
  kh_body.push_back(kir::declare("ih", ScalarType::i32, add_scaled(ih0, kh, p.dilation_h)));
  if (row_ok) {
    kh_body.push_back(kir::branch(row_ok, std::move(row)));
  } else {
    for (Stmt& s : row) kh_body.push_back(std::move(s));
  }
  body.push_back(kir::loop("kh", kir::i32(0), kir::i32(p.kernel_h), std::move(kh_body)));

  // One plain store of the final value per output element: per channel, a
  // row of tile_width neighbours, as vec4s when rows of Y keep them aligned.
  const std::int64_t out_plane = p.out_h * p.out_w;
  const Expr y_base = declare_i32(
      body, "y_base", add_scaled(add_scaled(add_scaled({}, image, p.out_channels * out_plane), oh, p.out_w), ow0, 1));
  const bool column_tail = p.spatial_extents_vary || p.out_w % tw != 0;
  for (std::int64_t i = 0; i < tc; ++i) {
    const auto ui = static_cast<std::size_t>(i);
    detail::TileRow row;
    for (std::int64_t j = 0; j < tw; ++j)
      row.values.push_back(finish(p, kir::var(indexed("acc", i, j), ScalarType::f32), channels[ui]));
    const Expr row_start = add_scaled(y_base, channels[ui], out_plane);
    row.element = [&](std::size_t j) { return add_constant(row_start, static_cast<std::int64_t>(j)); };
    row.vector = tw % kVector == 0 && !p.spatial_extents_vary && p.out_w % kVector == 0;
    if (column_tail)
      row.column_guard = [&](std::size_t j) { return add_constant(ow0, static_cast<std::int64_t>(j)) < kir::i32(p.out_w); };
    std::vector<Stmt> stores = detail::store_tile_row(kernel, p.y, row, static_cast<std::uint32_t>(i));
    if (channel_tail && i > 0) {
      body.push_back(kir::branch(add_constant(c0, i) < kir::i32(cog), std::move(stores)));
    } else {
      body.insert(body.end(), std::make_move_iterator(stores.begin()), std::make_move_iterator(stores.end()));
    }
  }
}

}  // namespace

bool conv_algorithm_applies(const ConvProblem& p, ConvAlgorithm algorithm) {
  switch (algorithm) {
    case ConvAlgorithm::gemm_1x1:
      return !p.packed_weights && p.kernel_h == 1 && p.kernel_w == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_top == 0 &&
             p.pad_left == 0 && p.out_h == p.in_h && p.out_w == p.in_w;
    case ConvAlgorithm::implicit_gemm: return !p.packed_weights;
    case ConvAlgorithm::direct: return true;
    case ConvAlgorithm::depthwise: return !p.packed_weights && p.in_channels_per_group() == 1;
  }
  return false;
}

std::int64_t conv_invocations(const ConvProblem& p, const ConvPlan& plan) {
  if (plan.algorithm == ConvAlgorithm::gemm_1x1 || plan.algorithm == ConvAlgorithm::implicit_gemm) {
    GemmProblem g;
    g.batch = p.batch * p.groups;
    g.m = p.out_channels_per_group();
    g.n = p.out_h * p.out_w;
    return gemm_invocations(g, plan.gemm);
  }
  return p.batch * p.groups * ceil_div(p.out_channels_per_group(), plan.conv.tile_channels) * p.out_h *
         ceil_div(p.out_w, plan.conv.tile_width);
}

void build_conv(kir::Kernel& kernel, const ConvProblem& p, const ConvPlan& plan) {
  KILN_CHECK(p.batch >= 1 && p.groups >= 1 && p.out_channels >= 1 && p.in_channels % p.groups == 0 &&
                 p.out_channels % p.groups == 0 && p.out_h >= 1 && p.out_w >= 1,
             ErrorKind::Internal, "convolution template for '" + kernel.name + "': invalid problem");
  KILN_CHECK(conv_algorithm_applies(p, plan.algorithm), ErrorKind::Internal,
             "convolution template for '" + kernel.name + "': algorithm " + conv_algorithm_name(plan.algorithm) +
                 " does not apply to this convolution");
  if (plan.algorithm == ConvAlgorithm::gemm_1x1 || plan.algorithm == ConvAlgorithm::implicit_gemm) {
    build_conv_gemm(kernel, p, plan.gemm, plan.algorithm == ConvAlgorithm::implicit_gemm);
    return;
  }
  check_knobs(plan.conv);
  build_conv_direct(kernel, p, plan.conv);
}

}  // namespace kiln::shaders

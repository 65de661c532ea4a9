#include "shaders/gemm_template.h"

#include "shaders/gemm_register.h"
#include "shaders/gemm_shared.h"
#include "shaders/gemm_subgroup.h"
#include "shaders/template_util.h"
#include "src/base/check.h"

#include <kiln/error.h>

#include <algorithm>

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

namespace detail {

void append_vector_load(std::vector<Stmt>& out, kir::Buf buffer, Expr at, std::vector<std::string> names) {
  out.push_back(kir::load_vector(std::move(names), buffer, std::move(at), ScalarType::f32));
}

void append_k_step(std::vector<Stmt>& out, const GemmProblem& p, const GemmKnobs& knobs,
                   const std::vector<Expr>& a_rows, const std::vector<Expr>& b_cols, const VectorBases& vec, Expr kk,
                   std::int64_t offset, const std::string& suffix, bool a_loaded, const GatherStep& gather) {
  const Expr a_k = add_constant(add_scaled({}, kk, p.a_k_stride), offset * p.a_k_stride);
  const Expr b_k = add_constant(add_scaled({}, kk, p.b_k_stride), offset * p.b_k_stride);
  std::vector<Expr> a_values, b_values;
  for (std::uint32_t i = 0; i < knobs.tile_m; ++i) {
    const std::string name = indexed("a" + suffix + "_", i);
    if (!a_loaded) out.push_back(kir::declare(name, ScalarType::f32, kir::load(p.a, a_rows[i] + a_k, ScalarType::f32)));
    a_values.push_back(kir::var(name, ScalarType::f32));
  }
  if (p.gather_b) {
    for (std::uint32_t j = 0; j < knobs.tile_n; ++j) {
      const std::string name = indexed("b" + suffix + "_", j);
      p.gather_b->load(out, name, gather.outer, gather.tap, j);
      b_values.push_back(kir::var(name, ScalarType::f32));
    }
  } else if (vec.b_loaded) {
    for (std::uint32_t j = 0; j < knobs.tile_n; ++j) b_values.push_back(kir::var(indexed("b" + suffix + "_", j), ScalarType::f32));
  } else if (!vec.b_vcols.empty()) {
    const std::int64_t vk_stride = p.b_k_stride / kVector;
    for (std::size_t q = 0; q < vec.b_vcols.size(); ++q) {
      std::vector<std::string> names;
      for (std::int64_t c = 0; c < kVector; ++c)
        names.push_back(indexed("b" + suffix + "_", static_cast<std::uint32_t>(q * kVector + c)));
      append_vector_load(out, p.b, add_constant(add_scaled(vec.b_vcols[q], kk, vk_stride), offset * vk_stride),
                         std::move(names));
    }
    for (std::uint32_t j = 0; j < knobs.tile_n; ++j) b_values.push_back(kir::var(indexed("b" + suffix + "_", j), ScalarType::f32));
  } else {
    for (std::uint32_t j = 0; j < knobs.tile_n; ++j) {
      const std::string name = indexed("b" + suffix + "_", j);
      out.push_back(kir::declare(name, ScalarType::f32, kir::load(p.b, b_cols[j] + b_k, ScalarType::f32)));
      b_values.push_back(kir::var(name, ScalarType::f32));
    }
  }
  for (std::uint32_t i = 0; i < knobs.tile_m; ++i)
    for (std::uint32_t j = 0; j < knobs.tile_n; ++j) {
      const std::string acc = indexed("acc", i, j);
      out.push_back(kir::assign(acc, kir::var(acc, ScalarType::f32) + a_values[i] * b_values[j]));
    }
}

}  // namespace detail

namespace {

using detail::append_k_step;
using detail::append_vector_load;
using detail::GatherStep;
using detail::VectorBases;

// One unrolled iteration of the main loop: A's k_unroll elements per row as
// vec4s (k = kk .. kk + k_unroll - 1, kk a multiple of 4), then each K step.
std::vector<Stmt> unrolled_step(const GemmProblem& p, const GemmKnobs& knobs, const std::vector<Expr>& a_rows,
                                const std::vector<Expr>& b_cols, const VectorBases& vec, Expr kk) {
  std::vector<Stmt> step;
  const bool a_vector = !vec.a_vrows.empty();
  if (a_vector) {
    const Expr kq = declare_i32(step, "kq", kk / kir::i32(kVector));
    for (std::uint32_t i = 0; i < knobs.tile_m; ++i)
      for (std::int64_t g = 0; g < knobs.k_unroll / kVector; ++g) {
        std::vector<std::string> names;
        for (std::int64_t c = 0; c < kVector; ++c)
          names.push_back(indexed("a" + std::to_string(g * kVector + c) + "_", i));
        append_vector_load(step, p.a, add_constant(vec.a_vrows[i] + kq, g), std::move(names));
      }
  }
  for (std::int64_t u = 0; u < knobs.k_unroll; ++u)
    append_k_step(step, p, knobs, a_rows, b_cols, vec, kk, u, std::to_string(u), a_vector,
                  {add_constant(kk, u), 0});
  return step;
}

// One iteration of the K loop over a gathered B's outer index `outer` with
// taps > 1: every tap unrolled, A's elements at k = outer * taps + tap.
std::vector<Stmt> tap_step(const GemmProblem& p, const GemmKnobs& knobs, const std::vector<Expr>& a_rows,
                           const std::vector<Expr>& b_cols, Expr outer) {
  std::vector<Stmt> step;
  const std::int64_t taps = p.gather_b->taps;
  const Expr k0 = declare_i32(step, "k0", add_scaled({}, outer, taps));
  for (std::int64_t t = 0; t < taps; ++t)
    append_k_step(step, p, knobs, a_rows, b_cols, VectorBases{}, k0, t, std::to_string(t), false, {outer, t});
  return step;
}

}  // namespace

namespace detail {

std::vector<Expr> split_blocks(std::vector<Stmt>& body, const Expr& linear, std::int64_t batch, std::int64_t panels,
                               std::int64_t m_blocks, std::int64_t panel) {
  const Expr pc = declare_i32(body, "pc", linear % kir::i32(panel));
  const Expr above_pc = declare_i32(body, "pc_rest", linear / kir::i32(panel));
  const Expr mb = declare_i32(body, "mb", above_pc % kir::i32(m_blocks));
  if (batch == 1) return {kir::i32(0), declare_i32(body, "panel", above_pc / kir::i32(m_blocks)), mb, pc};
  const Expr above_mb = declare_i32(body, "mb_rest", above_pc / kir::i32(m_blocks));
  const Expr pn = declare_i32(body, "panel", above_mb % kir::i32(panels));
  return {declare_i32(body, "bt", above_mb / kir::i32(panels)), pn, mb, pc};
}

}  // namespace detail

namespace {

using detail::append_output_stage;
using detail::OutputTile;
using detail::split_blocks;

// The same products as Y^T = op(B)^T op(A)^T (GemmKnobs::swap_operands):
// A and B trade places and strides, Y's strides trade places, and the
// epilogue still sees Y's own (row, col).
GemmProblem swapped(const GemmProblem& p) {
  GemmProblem q = p;
  q.m = p.n;
  q.n = p.m;
  q.a = p.b;
  q.b = p.a;
  q.a_row_stride = p.b_col_stride;
  q.a_k_stride = p.b_k_stride;
  q.b_k_stride = p.a_k_stride;
  q.b_col_stride = p.a_row_stride;
  q.y_row_stride = p.y_col_stride;
  q.y_col_stride = p.y_row_stride;
  q.a_base_multiple = p.b_base_multiple;
  q.b_base_multiple = p.a_base_multiple;
  if (p.bases)
    q.bases = [bases = p.bases](std::vector<Stmt>& body, Expr batch) {
      const GemmBases given = bases(body, std::move(batch));
      return GemmBases{given.b, given.a, given.y};
    };
  if (p.epilogue)
    q.epilogue = [epilogue = p.epilogue](Expr acc, Expr row, Expr col, Expr batch) {
      return epilogue(std::move(acc), std::move(col), std::move(row), std::move(batch));
    };
  return q;
}

// Whether build_gemm takes the subgroup path (gemm_subgroup.h): subgroup
// broadcast is on and B is not gathered (a gather keeps the register path).
bool subgroup_path(const GemmProblem& p, const GemmKnobs& knobs) {
  return knobs.subgroup_broadcast != 0 && !p.gather_b;
}

// Whether build_gemm takes the shared-memory path (gemm_shared.h): shared
// tiling is on and B is not a gather with taps that loads only at constant
// taps (the register path's unrolled K loop; the shared tiles walk K).
bool shared_path(const GemmProblem& p, const GemmKnobs& knobs) {
  return knobs.shared_k_tile != 0 && !(p.gather_b && p.gather_b->taps > 1 && !p.gather_b->load_at);
}

// The register path's share of `knobs` (a gathered B also drops the
// subgroup and texel knobs).
GemmKnobs register_knobs(GemmKnobs knobs, const GemmProblem& p) {
  knobs.shared_k_tile = 0;
  knobs.split_k = 1;
  knobs.workgroup_n = 0;
  knobs.matrix_m = knobs.matrix_n = knobs.matrix_k = knobs.matrix_lanes = 0;
  knobs.matrix_precision = 0;
  if (p.gather_b) {
    knobs.subgroup_broadcast = 0;
    knobs.texel_loads = false;
  }
  return knobs;
}

}  // namespace

namespace detail {

void append_output_stage(kir::Kernel& kernel, const GemmProblem& p, const GemmKnobs& knobs, const OutputTile& t) {
  const bool vector_store = knobs.vector_width == kVector && knobs.tile_n % kVector == 0 && p.n_multiple_of(kVector) &&
                            p.y_col_stride == 1 && p.y_row_stride % kVector == 0 &&
                            (!p.bases || p.y_base_multiple % kVector == 0);
  const bool row_edges = p.m % knobs.tile_m != 0;
  const bool column_edges = !p.n_multiple_of(knobs.tile_n);
  const Expr& in_panel = t.in_tile;
  std::vector<Stmt> tile;  // the rows under one guard when M has no row edge
  for (std::uint32_t i = 0; i < knobs.tile_m; ++i) {
    detail::TileRow row;
    for (std::uint32_t j = 0; j < knobs.tile_n; ++j) {
      Expr value = kir::var(indexed("acc", i, j), ScalarType::f32);
      row.values.push_back(p.epilogue ? p.epilogue(value, t.rows[i], t.cols[j], t.batch) : value);
    }
    const Expr row_start = add_scaled(t.y_base, t.rows[i], p.y_row_stride);
    row.element = [&](std::size_t j) { return add_scaled(row_start, t.cols[j], p.y_col_stride); };
    row.vector = vector_store;
    if (column_edges) row.column_guard = [&](std::size_t j) { return t.cols[j] < kir::i32(p.n); };
    std::vector<Stmt> stores = detail::store_tile_row(kernel, p.y, row, i);
    if (!row_edges) {
      tile.insert(tile.end(), std::make_move_iterator(stores.begin()), std::make_move_iterator(stores.end()));
      continue;
    }
    const Expr row_in = i > 0 ? in_panel && t.rows[i] < kir::i32(p.m) : in_panel;
    kernel.body.push_back(kir::branch(row_in, std::move(stores)));
  }
  if (!row_edges) kernel.body.push_back(kir::branch(in_panel, std::move(tile)));
}

void use_texel_buffers(kir::Kernel& kernel, const GemmProblem& p, bool a_vector, bool b_vector, bool b_along_k) {
  if (p.a.index == p.b.index) return;
  // A width-4 texel buffer holds whole texels only: every element read must
  // lie in one that the operand holds whole (K, N multiples of 4; along K,
  // columns b_col_stride apart, a multiple of 4).
  auto width = [](bool vector, bool whole_texels) -> std::uint32_t { return vector ? (whole_texels ? 4 : 0) : 1; };
  kernel.buffers[static_cast<std::size_t>(p.a.index)].texel_width = width(a_vector, p.k % kVector == 0);
  kernel.buffers[static_cast<std::size_t>(p.b.index)].texel_width =
      width(b_vector || b_along_k, b_along_k || p.n_multiple_of(kVector));
}

}  // namespace detail

std::int64_t gemm_invocations(const GemmProblem& p, const GemmKnobs& given) {
  if (given.swap_operands && !p.gather_b) {
    GemmKnobs knobs = given;
    knobs.swap_operands = false;
    return gemm_invocations(swapped(p), knobs);
  }
  if (shared_path(p, given)) return detail::shared_gemm_invocations(p, given);
  if (subgroup_path(p, given)) return detail::subgroup_gemm_invocations(p, given);
  const GemmKnobs knobs = register_knobs(given, p);
  const std::int64_t n_blocks = ceil_div(p.n, knobs.tile_n);
  const std::int64_t panel = std::min<std::int64_t>(knobs.panel_width, n_blocks);
  return p.batch * ceil_div(p.m, knobs.tile_m) * ceil_div(n_blocks, panel) * panel;
}

void build_gemm(kir::Kernel& kernel, const GemmProblem& p, const GemmKnobs& given) {
  check_knobs(given);
  KILN_CHECK(p.batch >= 1 && p.m >= 1 && p.n >= 1 && p.k >= 0, ErrorKind::Internal,
             "GEMM template for '" + kernel.name + "': empty problem (batch " + std::to_string(p.batch) + ", M " +
                 std::to_string(p.m) + ", N " + std::to_string(p.n) + ", K " + std::to_string(p.k) + ")");
  KILN_CHECK(p.bases || p.batch == 1, ErrorKind::Internal,
             "GEMM template for '" + kernel.name + "': a batch of " + std::to_string(p.batch) + " needs operand bases");
  KILN_CHECK(!p.gather_b || (p.gather_b->taps >= 1 && p.k % p.gather_b->taps == 0 && p.gather_b->load &&
                             p.gather_b->prepare),
             ErrorKind::Internal,
             "GEMM template for '" + kernel.name + "': a gathered B needs prepare, load and taps dividing K " +
                 std::to_string(p.k));
  KILN_CHECK(!(given.swap_operands && p.gather_b), ErrorKind::Internal,
             "GEMM template for '" + kernel.name + "': a gathered B cannot trade places with A (knobs " +
                 to_string(given) + ")");
  if (given.swap_operands) {
    GemmKnobs knobs = given;
    knobs.swap_operands = false;
    build_gemm(kernel, swapped(p), knobs);
    return;
  }
  if (shared_path(p, given)) {
    detail::build_shared_gemm(kernel, p, given);
    return;
  }
  if (subgroup_path(p, given)) {
    detail::build_subgroup_gemm(kernel, p, given);
    return;
  }
  const GemmKnobs knobs = register_knobs(given, p);
  const std::int64_t m_blocks = ceil_div(p.m, knobs.tile_m);
  const std::int64_t n_blocks = ceil_div(p.n, knobs.tile_n);
  kernel.global_size = gemm_invocations(p, knobs);
  kernel.workgroup_size = knobs.workgroup_size;
  std::vector<Stmt>& body = kernel.body;

  // Invocations walk panels of panel_width column blocks: within a panel
  // column blocks vary fastest (neighbours share A's rows and read
  // neighbouring columns of B), then row blocks, so the panel of B stays in
  // cache. A last partial panel repeats its last column block (not stored).
  //
  // Edges are handled whatever the shape (a partial panel, row and column
  // tails: clamped reads, guarded stores), so GEMMs of different shapes have
  // one structure and, with runtime parameters (src/kernel/parameterise.h),
  // share one compiled kernel. The few integer operations this adds run once
  // per invocation, outside the K loop.
  const std::int64_t panel = std::min<std::int64_t>(knobs.panel_width, n_blocks);
  const std::int64_t panels = ceil_div(n_blocks, panel);
  const std::vector<Expr> block = split_blocks(body, kir::global_index(), p.batch, panels, m_blocks, panel);
  const Expr batch = block[0];
  const Expr nb = declare_i32(body, "nb", block[3] + block[1] * kir::i32(panel));
  const Expr row0 = declare_i32(body, "row0", add_scaled({}, block[2], knobs.tile_m));
  const Expr col0 = declare_i32(body, "col0", add_scaled({}, kir::min(nb, kir::i32(n_blocks - 1)), knobs.tile_n));
  const GemmBases bases = p.bases ? p.bases(body, batch) : GemmBases{kir::i32(0), kir::i32(0), kir::i32(0)};

  // Rows and columns past the edge read the last valid one (never stored).
  std::vector<Expr> rows, cols, a_rows, b_cols;
  for (std::uint32_t i = 0; i < knobs.tile_m; ++i) {
    rows.push_back(add_constant(row0, i));
    const Expr safe = i > 0 ? kir::min(rows.back(), kir::i32(p.m - 1)) : rows.back();
    a_rows.push_back(declare_i32(body, indexed("a_row", i), add_scaled(bases.a, safe, p.a_row_stride)));
  }
  for (std::uint32_t j = 0; j < knobs.tile_n; ++j) {
    cols.push_back(add_constant(col0, j));
    const Expr safe = j > 0 ? kir::min(cols.back(), kir::i32(p.n - 1)) : cols.back();
    if (p.gather_b) {
      p.gather_b->prepare(body, safe, bases.b, j);
    } else {
      b_cols.push_back(declare_i32(body, indexed("b_col", j), add_scaled(bases.b, safe, p.b_col_stride)));
    }
  }
  // With taps > 1 the K loop runs over the gather's outer index instead,
  // with scalar loads of A (its rows advance by taps per iteration).
  const bool tap_loop = p.gather_b && p.gather_b->taps > 1;
  const std::int64_t unroll = tap_loop ? p.gather_b->taps : knobs.k_unroll;
  const std::int64_t k_main = p.k / unroll * unroll;

  // Vector bases (see gemm_template.h for when each operand qualifies).
  // B's column groups past N start at N - 4 instead (read, never stored).
  VectorBases vec;
  const bool vectors = knobs.vector_width == kVector;
  const bool a_vector = vectors && k_main > 0 && !tap_loop && unroll % kVector == 0 && p.a_k_stride == 1 &&
                        p.a_row_stride % kVector == 0 && (!p.bases || p.a_base_multiple % kVector == 0);
  const bool b_vector = vectors && k_main > 0 && !p.gather_b && knobs.tile_n % kVector == 0 && p.n_multiple_of(kVector) &&
                        p.b_col_stride == 1 && p.b_k_stride % kVector == 0 &&
                        (!p.bases || p.b_base_multiple % kVector == 0);
  if (a_vector)
    for (std::uint32_t i = 0; i < knobs.tile_m; ++i)
      vec.a_vrows.push_back(declare_i32(body, indexed("a_vrow", i), a_rows[i] / kir::i32(kVector)));
  if (knobs.texel_loads) detail::use_texel_buffers(kernel, p, a_vector, b_vector);
  if (b_vector)
    for (std::uint32_t q = 0; q < knobs.tile_n / kVector; ++q) {
      const Expr first = add_constant(col0, q * kVector);
      const Expr safe = q > 0 ? kir::min(first, kir::i32(p.n - kVector)) : first;
      vec.b_vcols.push_back(
          declare_i32(body, indexed("b_vcol", q), add_scaled(bases.b, safe, 1) / kir::i32(kVector)));
    }

  for (std::uint32_t i = 0; i < knobs.tile_m; ++i)
    for (std::uint32_t j = 0; j < knobs.tile_n; ++j)
      body.push_back(kir::declare(indexed("acc", i, j), ScalarType::f32, kir::f32(0.0)));

  // Main loop, unrolled k_unroll times, then the remainder one step at a time
  // (scalar loads).
  const Expr kk = kir::var("kk", ScalarType::i32);
  if (tap_loop) {
    const Expr outer = kir::var("ko", ScalarType::i32);
    body.push_back(kir::loop("ko", kir::i32(0), kir::i32(p.k / unroll), tap_step(p, knobs, a_rows, b_cols, outer)));
  } else if (k_main > 0) {
    body.push_back(kir::loop("kk", kir::i32(0), kir::i32(k_main), unrolled_step(p, knobs, a_rows, b_cols, vec, kk),
                             unroll));
  }
  if (k_main < p.k) {
    std::vector<Stmt> step;
    append_k_step(step, p, knobs, a_rows, b_cols, VectorBases{}, kk, 0, "r", false, {kk, 0});
    body.push_back(kir::loop("kk", kir::i32(k_main), kir::i32(p.k), std::move(step)));
  }

  append_output_stage(kernel, p, knobs, {rows, cols, nb < kir::i32(n_blocks), bases.y, batch});
}

}  // namespace kiln::shaders

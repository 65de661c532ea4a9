#include "shaders/gemm_subgroup.h"

#include "shaders/gemm_register.h"
#include "shaders/template_util.h"

#include <algorithm>
#include <string>
#include <vector>

namespace kiln::shaders::detail {

using kir::Expr;
using kir::ScalarType;
using kir::Stmt;

namespace {

struct SubgroupLayout {
  std::int64_t lanes = 0;        // S
  std::int64_t block_n = 0;      // columns per subgroup block: S * tile_n
  std::int64_t m_blocks = 0, n_blocks = 0;
  std::int64_t panel = 0, panels = 0;
  std::int64_t blocks = 0;       // subgroup blocks, partial panels padded
  std::int64_t per_group = 0;    // subgroups per workgroup
};

SubgroupLayout layout_of(const GemmProblem& p, const GemmKnobs& knobs) {
  SubgroupLayout l;
  l.lanes = knobs.subgroup_broadcast;
  l.block_n = l.lanes * knobs.tile_n;
  l.m_blocks = ceil_div(p.m, knobs.tile_m);
  l.n_blocks = ceil_div(p.n, l.block_n);
  l.panel = std::min<std::int64_t>(knobs.panel_width, l.n_blocks);
  l.panels = ceil_div(l.n_blocks, l.panel);
  l.blocks = p.batch * l.m_blocks * l.panels * l.panel;
  l.per_group = knobs.workgroup_size / l.lanes;
  return l;
}

}  // namespace

std::int64_t subgroup_gemm_invocations(const GemmProblem& p, const GemmKnobs& knobs) {
  const SubgroupLayout l = layout_of(p, knobs);
  return ceil_div(l.blocks, l.per_group) * knobs.workgroup_size;
}

void build_subgroup_gemm(kir::Kernel& kernel, const GemmProblem& p, const GemmKnobs& knobs) {
  const SubgroupLayout l = layout_of(p, knobs);
  kernel.global_size = subgroup_gemm_invocations(p, knobs);
  kernel.workgroup_size = knobs.workgroup_size;
  kernel.subgroup_size = knobs.subgroup_broadcast;
  std::vector<Stmt>& body = kernel.body;

  // This subgroup's block; subgroups past the last one compute the last
  // block again (valid reads) and store nothing.
  const Expr linear = declare_i32(body, "sg_linear", add_scaled(kir::subgroup_id(), kir::workgroup_index(), l.per_group));
  const Expr live = linear < kir::i32(l.blocks);
  const Expr sg = declare_i32(body, "sg", kir::min(linear, kir::i32(l.blocks - 1)));
  const Expr lane = declare_i32(body, "lane", kir::subgroup_lane());
  const std::vector<Expr> block = split_blocks(body, sg, p.batch, l.panels, l.m_blocks, l.panel);
  const Expr batch = block[0];
  const Expr nb = declare_i32(body, "nb", block[3] + block[1] * kir::i32(l.panel));
  const Expr row0 = declare_i32(body, "row0", add_scaled({}, block[2], knobs.tile_m));
  const Expr col0 = declare_i32(
      body, "col0", add_scaled(add_scaled({}, kir::min(nb, kir::i32(l.n_blocks - 1)), l.block_n), lane, knobs.tile_n));
  const GemmBases bases = p.bases ? p.bases(body, batch) : GemmBases{kir::i32(0), kir::i32(0), kir::i32(0)};

  // Rows and columns past the edge read the last valid one (never stored);
  // a lane's first column may be past N too.
  std::vector<Expr> rows, cols, a_rows, b_cols;
  for (std::uint32_t i = 0; i < knobs.tile_m; ++i) {
    rows.push_back(add_constant(row0, i));
    const Expr safe = i > 0 ? kir::min(rows.back(), kir::i32(p.m - 1)) : rows.back();
    a_rows.push_back(declare_i32(body, indexed("a_row", i), add_scaled(bases.a, safe, p.a_row_stride)));
  }
  for (std::uint32_t j = 0; j < knobs.tile_n; ++j) {
    cols.push_back(add_constant(col0, j));
    const Expr safe = kir::min(cols.back(), kir::i32(p.n - 1));
    b_cols.push_back(declare_i32(body, indexed("b_col", j), add_scaled(bases.b, safe, p.b_col_stride)));
  }

  const bool vectors = knobs.vector_width == kVector;
  const bool a_vector = vectors && p.a_k_stride == 1 && p.a_row_stride % kVector == 0 &&
                        (!p.bases || p.a_base_multiple % kVector == 0);
  const std::int64_t chunk = a_vector ? kVector * l.lanes : l.lanes;  // K values per chunk
  const std::int64_t k_main = p.k / chunk * chunk;
  const bool b_vector = vectors && k_main > 0 && knobs.tile_n % kVector == 0 && p.n_multiple_of(kVector) &&
                        p.b_col_stride == 1 && p.b_k_stride % kVector == 0 &&
                        (!p.bases || p.b_base_multiple % kVector == 0);
  // Else B as vec4 along K, a vec4 per column every 4 K steps, where each
  // column's K run is contiguous and aligned (a swapped problem's B is the
  // original A: a weight [N, K] row-major).
  const bool b_along_k = vectors && !b_vector && k_main > 0 && chunk % kVector == 0 && p.b_k_stride == 1 &&
                         p.b_col_stride % kVector == 0 && (!p.bases || p.b_base_multiple % kVector == 0);
  if (knobs.texel_loads) use_texel_buffers(kernel, p, a_vector && k_main > 0, b_vector, b_along_k);

  VectorBases vec;
  if (b_vector)
    for (std::uint32_t q = 0; q < knobs.tile_n / kVector; ++q) {
      const Expr safe = kir::min(add_constant(col0, q * kVector), kir::i32(p.n - kVector));
      vec.b_vcols.push_back(
          declare_i32(body, indexed("b_vcol", q), add_scaled(bases.b, safe, 1) / kir::i32(kVector)));
    }
  std::vector<Expr> b_kvcols;  // b_along_k: column j's vec4 index at K = 0
  if (b_along_k)
    for (std::uint32_t j = 0; j < knobs.tile_n; ++j)
      b_kvcols.push_back(declare_i32(body, indexed("b_kvcol", j), b_cols[j] / kir::i32(kVector)));
  std::vector<Expr> a_vrows;
  if (a_vector && k_main > 0)
    for (std::uint32_t i = 0; i < knobs.tile_m; ++i)
      a_vrows.push_back(declare_i32(body, indexed("a_vrow", i), a_rows[i] / kir::i32(kVector) + lane));

  for (std::uint32_t i = 0; i < knobs.tile_m; ++i)
    for (std::uint32_t j = 0; j < knobs.tile_n; ++j)
      body.push_back(kir::declare(indexed("acc", i, j), ScalarType::f32, kir::f32(0.0)));

  // Whole chunks: each lane reads its stretch of every row of A, then each
  // K step broadcasts A's values from the lane that read them.
  if (k_main > 0) {
    const Expr kc = kir::var("kc", ScalarType::i32);
    std::vector<Stmt> step;
    const Expr kq = b_along_k ? declare_i32(step, "kq", kc / kir::i32(kVector)) : Expr();
    VectorBases chunk_vec = vec;
    chunk_vec.b_loaded = b_along_k;
    for (std::uint32_t i = 0; i < knobs.tile_m; ++i) {
      if (a_vector) {
        const Expr at = declare_i32(step, indexed("a_at", i), a_vrows[i] + kc / kir::i32(kVector));
        std::vector<std::string> names;
        for (std::int64_t c = 0; c < kVector; ++c) names.push_back(indexed("a_lane", i, c));
        append_vector_load(step, p.a, at, std::move(names));
      } else {
        const Expr at = a_rows[i] + add_scaled(kc, lane, 1) * kir::i32(p.a_k_stride);
        step.push_back(kir::declare(indexed("a_lane", i, 0), ScalarType::f32, kir::load(p.a, at, ScalarType::f32)));
      }
    }
    for (std::int64_t u = 0; u < chunk; ++u) {
      const std::string suffix = std::to_string(u);
      const std::int64_t component = a_vector ? u % kVector : 0;
      const std::int64_t source = a_vector ? u / kVector : u;
      if (b_along_k && u % kVector == 0)
        for (std::uint32_t j = 0; j < knobs.tile_n; ++j) {
          std::vector<std::string> names;
          for (std::int64_t c = 0; c < kVector; ++c) names.push_back(indexed("b" + std::to_string(u + c) + "_", j));
          append_vector_load(step, p.b, add_constant(b_kvcols[j] + kq, u / kVector), std::move(names));
        }
      for (std::uint32_t i = 0; i < knobs.tile_m; ++i)
        step.push_back(kir::declare(
            indexed("a" + suffix + "_", i), ScalarType::f32,
            kir::subgroup_broadcast(kir::var(indexed("a_lane", i, component), ScalarType::f32), source)));
      append_k_step(step, p, knobs, a_rows, b_cols, chunk_vec, kc, u, suffix, true);
    }
    body.push_back(kir::loop("kc", kir::i32(0), kir::i32(k_main), std::move(step), chunk));
  }
  if (k_main < p.k) {
    std::vector<Stmt> step;
    append_k_step(step, p, knobs, a_rows, b_cols, VectorBases{}, kir::var("kr", ScalarType::i32), 0, "r", false);
    body.push_back(kir::loop("kr", kir::i32(k_main), kir::i32(p.k), std::move(step)));
  }

  // Stored only by live subgroups, within a full panel, from a lane whose
  // first column is inside N.
  Expr in_tile = live && nb < kir::i32(l.n_blocks);
  if (!p.n_multiple_of(l.block_n)) in_tile = in_tile && col0 < kir::i32(p.n);
  append_output_stage(kernel, p, knobs, {rows, cols, in_tile, bases.y, batch});
}

}  // namespace kiln::shaders::detail

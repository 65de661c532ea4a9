#include "shaders/attention_template.h"

#include "shaders/template_util.h"
#include "src/base/check.h"

#include <kiln/error.h>

#include <algorithm>
#include <cmath>

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

Expr f32_var(const std::string& name) { return kir::var(name, ScalarType::f32); }

// Declares names[c] = buffer[first + c] for c < names.size(), as vec4 loads
// (vector index `vector_first` onwards) when `vector_first` is set.
void append_row_load(std::vector<Stmt>& out, kir::Buf buffer, const std::vector<std::string>& names,
                     const std::function<Expr(std::int64_t)>& scalar_at, const Expr& vector_first) {
  if (vector_first) {
    for (std::size_t g = 0; g * kVector < names.size(); ++g)
      out.push_back(kir::load_vector(std::vector<std::string>(names.begin() + g * kVector, names.begin() + (g + 1) * kVector),
                                     buffer, add_constant(vector_first, static_cast<std::int64_t>(g)), ScalarType::f32));
    return;
  }
  for (std::size_t c = 0; c < names.size(); ++c)
    out.push_back(kir::declare(names[c], ScalarType::f32,
                               kir::load(buffer, scalar_at(static_cast<std::int64_t>(c)), ScalarType::f32)));
}

// What every key step reads, computed once per invocation.
struct Invocation {
  Expr head;
  Expr k_base, v_base;          // first element of this head's K and V
  Expr k_vbase, v_vcol;         // vec4 indices (unset: scalar loads)
  std::vector<Expr> mask_rows;  // per row: mask offset of key 0 (empty: no mask)
  std::vector<Expr> v_cols;     // per column: clamped column index
  std::int64_t columns = 0;
};

// Keys kk .. kk + count - 1: scores, the online-softmax update and the
// weighted V rows. `tag` keeps the names of the main and remainder loops apart.
std::vector<Stmt> key_step(const AttentionProblem& p, const AttentionKnobs& knobs, const Invocation& inv, Expr kk,
                           std::int64_t count, const std::string& tag) {
  std::vector<Stmt> out;
  const std::int64_t rows = knobs.rows;
  std::vector<Expr> keys;
  for (std::int64_t u = 0; u < count; ++u) keys.push_back(u == 0 ? kk : declare_i32(out, indexed("key" + tag, u), add_constant(kk, u)));

  // Scores s[r][u] = q_r . k_u (+ mask): q was scaled when loaded.
  for (std::int64_t u = 0; u < count; ++u) {
    std::vector<std::string> k_names;
    for (std::int64_t c = 0; c < p.d; ++c) k_names.push_back(indexed("k" + tag, u, c));
    const Expr k_row = p.k_transposed ? Expr{} : add_scaled(inv.k_base, keys[u], p.d);
    const Expr k_vector = inv.k_vbase ? add_scaled(inv.k_vbase, keys[u], p.d / kVector) : Expr{};
    append_row_load(
        out, p.k, k_names,
        [&](std::int64_t c) {
          return p.k_transposed ? add_scaled(add_constant(inv.k_base, c * p.lk), keys[u], 1) : add_constant(k_row, c);
        },
        k_vector);
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::string s = indexed("s" + tag, r, u);
      out.push_back(kir::declare(s, ScalarType::f32, f32_var(indexed("q", r, 0)) * f32_var(k_names[0])));
      for (std::int64_t c = 1; c < p.d; ++c)
        out.push_back(kir::assign(s, f32_var(s) + f32_var(indexed("q", r, c)) * f32_var(k_names[c])));
      if (!inv.mask_rows.empty())
        out.push_back(kir::assign(
            s, f32_var(s) + kir::load(p.mask, add_scaled(inv.mask_rows[r], keys[u], p.mask_key_stride), ScalarType::f32)));
    }
  }

  // Online softmax: raise the max, rescale what was summed so far, add this block's exps.
  for (std::int64_t r = 0; r < rows; ++r) {
    Expr block_max = f32_var(indexed("m", r));
    for (std::int64_t u = 0; u < count; ++u) block_max = kir::max(block_max, f32_var(indexed("s" + tag, r, u)));
    const std::string m_new = indexed("mn" + tag, r);
    out.push_back(kir::declare(m_new, ScalarType::f32, block_max));
    const std::string alpha = indexed("alpha" + tag, r);
    out.push_back(kir::declare(alpha, ScalarType::f32, kir::exp(f32_var(indexed("m", r)) - f32_var(m_new))));
    Expr sum = f32_var(indexed("l", r)) * f32_var(alpha);
    for (std::int64_t u = 0; u < count; ++u) {
      const std::string e = indexed("p" + tag, r, u);
      out.push_back(kir::declare(e, ScalarType::f32, kir::exp(f32_var(indexed("s" + tag, r, u)) - f32_var(m_new))));
      sum = sum + f32_var(e);
    }
    out.push_back(kir::assign(indexed("l", r), sum));
    out.push_back(kir::assign(indexed("m", r), f32_var(m_new)));
    for (std::int64_t c = 0; c < inv.columns; ++c) {
      const std::string acc = indexed("acc", r, c);
      out.push_back(kir::assign(acc, f32_var(acc) * f32_var(alpha)));
    }
  }

  // acc[r][c] += p[r][u] * v[key u][column c].
  for (std::int64_t u = 0; u < count; ++u) {
    std::vector<std::string> v_names;
    for (std::int64_t c = 0; c < inv.columns; ++c) v_names.push_back(indexed("v" + tag, u, c));
    const Expr v_row = add_scaled(inv.v_base, keys[u], p.dv);
    const Expr v_vector = inv.v_vcol ? add_scaled(inv.v_vcol, keys[u], p.dv / kVector) : Expr{};
    append_row_load(out, p.v, v_names, [&](std::int64_t c) { return v_row + inv.v_cols[c]; }, v_vector);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < inv.columns; ++c) {
        const std::string acc = indexed("acc", r, c);
        out.push_back(kir::assign(acc, f32_var(acc) + f32_var(indexed("p" + tag, r, u)) * f32_var(v_names[c])));
      }
  }
  return out;
}

void check(const kir::Kernel& kernel, const AttentionProblem& p, const AttentionKnobs& knobs) {
  const std::string where = "attention template for '" + kernel.name + "': ";
  KILN_CHECK(p.heads >= 1 && p.lq >= 1 && p.lk >= 1 && p.d >= 1 && p.dv >= 1, ErrorKind::Internal,
             where + "empty problem (heads " + std::to_string(p.heads) + ", Lq " + std::to_string(p.lq) + ", Lk " +
                 std::to_string(p.lk) + ", D " + std::to_string(p.d) + ", Dv " + std::to_string(p.dv) + ")");
  KILN_CHECK(p.d <= kMaxAttentionHeadDim, ErrorKind::Internal,
             where + "head dimension " + std::to_string(p.d) + " exceeds " + std::to_string(kMaxAttentionHeadDim));
  KILN_CHECK(knobs.rows >= 1 && knobs.rows <= 8 && knobs.columns >= 1 && knobs.columns <= 128 &&
                 knobs.key_block >= 1 && knobs.key_block <= 16 &&
                 (knobs.vector_width == 1 || knobs.vector_width == kVector) && knobs.workgroup_size >= 1,
             ErrorKind::Internal, where + "invalid knobs " + to_string(knobs));
  KILN_CHECK(p.mask.index < 0 || p.mask_base, ErrorKind::Internal, where + "a mask needs mask_base");
}

}  // namespace

std::string to_string(const AttentionKnobs& knobs) {
  return "r" + std::to_string(knobs.rows) + "c" + std::to_string(knobs.columns) + "k" +
         std::to_string(knobs.key_block) + "v" + std::to_string(knobs.vector_width) +
         (knobs.workgroup_size != kDefaultAttentionWorkgroup ? "wg" + std::to_string(knobs.workgroup_size) : "");
}

AttentionKnobs choose_attention_knobs(const AttentionProblem& p, bool cpu_device) {
  AttentionKnobs knobs;
  // All of Dv in one invocation up to 64 columns (each extra column block
  // recomputes the scores); wider heads split into equal blocks.
  const std::int64_t blocks = ceil_div(p.dv, 64);
  std::int64_t columns = ceil_div(p.dv, blocks);
  if (p.dv % kVector == 0) columns = ceil_div(columns, kVector) * kVector;
  knobs.columns = static_cast<std::uint32_t>(columns);
  // More rows share each K and V load; registers bound them (q and acc per row).
  const std::int64_t per_row = p.d + columns;
  knobs.rows = static_cast<std::uint32_t>(std::clamp<std::int64_t>(256 / per_row, 1, 4));
  knobs.rows = static_cast<std::uint32_t>(std::min<std::int64_t>(knobs.rows, p.lq));
  knobs.key_block = 4;
  // A CPU device runs a workgroup on one thread: few invocations (a decode
  // step's heads) are spread over kCpuAttentionWorkgroups.
  if (cpu_device)
    while (knobs.workgroup_size > 1 && attention_invocations(p, knobs) < kCpuAttentionWorkgroups * knobs.workgroup_size)
      knobs.workgroup_size /= 2;
  return knobs;
}

std::int64_t attention_invocations(const AttentionProblem& p, const AttentionKnobs& knobs) {
  return p.heads * ceil_div(p.dv, knobs.columns) * ceil_div(p.lq, knobs.rows);
}

void build_attention(kir::Kernel& kernel, const AttentionProblem& p, const AttentionKnobs& knobs) {
  check(kernel, p, knobs);
  const std::int64_t rows = knobs.rows;
  const std::int64_t column_blocks = ceil_div(p.dv, knobs.columns);
  kernel.global_size = attention_invocations(p, knobs);
  kernel.workgroup_size = knobs.workgroup_size;
  std::vector<Stmt>& body = kernel.body;

  // Row blocks vary fastest: neighbouring invocations read the same head's K and V.
  const std::vector<Expr> block = detail::split_index(
      body, kir::global_index(),
      {{"head", p.heads}, {"cb", column_blocks}, {"rb", ceil_div(p.lq, rows)}});
  Invocation inv;
  inv.head = block[0];
  inv.columns = std::min<std::int64_t>(knobs.columns, p.dv);
  const Expr col0 = declare_i32(body, "col0", add_scaled({}, block[1], knobs.columns));
  const Expr row0 = declare_i32(body, "row0", add_scaled({}, block[2], rows));
  const bool row_tail = p.lq % rows != 0;
  const bool col_tail = column_blocks * inv.columns != p.dv;
  std::vector<Expr> row_at, safe_rows;
  for (std::int64_t r = 0; r < rows; ++r) {
    row_at.push_back(add_constant(row0, r));
    safe_rows.push_back(row_tail && r > 0 ? declare_i32(body, indexed("row", r), kir::min(row_at.back(), kir::i32(p.lq - 1)))
                                          : row_at.back());
  }
  std::vector<Expr> col_at;
  for (std::int64_t c = 0; c < inv.columns; ++c) {
    col_at.push_back(add_constant(col0, c));
    inv.v_cols.push_back(col_tail && c > 0 ? kir::min(col_at.back(), kir::i32(p.dv - 1)) : col_at.back());
  }
  const bool vectors = knobs.vector_width == kVector;
  const Expr q_base = declare_i32(body, "q_base", add_scaled({}, inv.head, p.lq * p.d));
  inv.k_base = declare_i32(body, "k_base", add_scaled({}, inv.head, p.lk * p.d));
  inv.v_base = declare_i32(body, "v_base", add_scaled({}, inv.head, p.lk * p.dv));
  const bool qk_vector = vectors && p.d % kVector == 0;
  if (qk_vector && !p.k_transposed) inv.k_vbase = declare_i32(body, "k_vbase", add_scaled({}, inv.head, p.lk * p.d / kVector));
  // V as vec4 along the columns only when no block runs past Dv.
  if (vectors && p.dv % kVector == 0 && inv.columns % kVector == 0 && !col_tail)
    inv.v_vcol = declare_i32(body, "v_vcol",
                             add_scaled(add_scaled({}, inv.head, p.lk * p.dv / kVector), col0 / kir::i32(kVector), 1));

  // This invocation's query rows, pre-scaled.
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<std::string> names;
    for (std::int64_t c = 0; c < p.d; ++c) names.push_back(indexed("qraw", r, c));
    const Expr row_start = add_scaled(q_base, safe_rows[r], p.d);
    const Expr vector_first =
        qk_vector ? add_scaled(add_scaled({}, inv.head, p.lq * p.d / kVector), safe_rows[r], p.d / kVector) : Expr{};
    append_row_load(body, p.q, names, [&](std::int64_t c) { return add_constant(row_start, c); }, vector_first);
    for (std::int64_t c = 0; c < p.d; ++c)
      body.push_back(kir::declare(indexed("q", r, c), ScalarType::f32, f32_var(names[c]) * kir::f32(p.scale)));
  }
  if (p.mask.index >= 0) {
    const Expr mask_base = p.mask_base(body, inv.head);
    for (std::int64_t r = 0; r < rows; ++r)
      inv.mask_rows.push_back(declare_i32(body, indexed("mask_row", r), add_scaled(mask_base, safe_rows[r], p.mask_row_stride)));
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    body.push_back(kir::declare(indexed("m", r), ScalarType::f32, kir::f32(-INFINITY)));
    body.push_back(kir::declare(indexed("l", r), ScalarType::f32, kir::f32(0.0)));
    for (std::int64_t c = 0; c < inv.columns; ++c)
      body.push_back(kir::declare(indexed("acc", r, c), ScalarType::f32, kir::f32(0.0)));
  }

  // Full key blocks, then the remaining keys one at a time.
  const std::int64_t key_block = knobs.key_block;
  const std::int64_t k_main = p.lk / key_block * key_block;
  const Expr kk = kir::var("kk", ScalarType::i32);
  if (k_main > 0)
    body.push_back(kir::loop("kk", kir::i32(0), kir::i32(k_main), key_step(p, knobs, inv, kk, key_block, "b"), key_block));
  if (k_main < p.lk)
    body.push_back(kir::loop("kk", kir::i32(k_main), kir::i32(p.lk), key_step(p, knobs, inv, kk, 1, "t")));

  // One plain store of the final value per output element.
  const Expr y_base = add_scaled({}, inv.head, p.lq * p.dv);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::string inv_sum = indexed("inv_l", r);
    body.push_back(kir::declare(inv_sum, ScalarType::f32, kir::f32(1.0) / f32_var(indexed("l", r))));
    for (std::int64_t c = 0; c < inv.columns; ++c) {
      const Expr at = add_scaled(add_scaled(y_base, row_at[r], p.dv), col_at[c], 1);
      Expr in_bounds;
      if (row_tail && r > 0) in_bounds = row_at[r] < kir::i32(p.lq);
      if (col_tail && c > 0) in_bounds = in_bounds ? (in_bounds && col_at[c] < kir::i32(p.dv)) : col_at[c] < kir::i32(p.dv);
      Stmt store = kir::store(p.y, at, f32_var(indexed("acc", r, c)) * f32_var(inv_sum));
      body.push_back(in_bounds ? kir::branch(in_bounds, {std::move(store)}) : std::move(store));
    }
  }
}

}  // namespace kiln::shaders

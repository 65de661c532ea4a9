#include "shaders/gemm_shared.h"

#include "shaders/template_util.h"
#include "src/base/check.h"

#include <kiln/error.h>

#include <algorithm>
#include <bit>
#include <string>
#include <vector>

namespace kiln::shaders::detail {

using kir::Expr;
using kir::ScalarType;
using kir::Stmt;

SharedGemmLayout shared_gemm_layout(const GemmKnobs& knobs) {
  check_knobs(knobs);
  KILN_CHECK(knobs.shared_k_tile > 0, ErrorKind::Internal,
             "shared GEMM layout asked for knobs without shared tiling (" + to_string(knobs) + ")");
  SharedGemmLayout l;
  l.k_step = std::int64_t{knobs.shared_k_tile} * knobs.split_k;
  if (knobs.matrix_m != 0) {
    const auto subgroups = knobs.workgroup_size / knobs.matrix_lanes;
    l.slice = knobs.workgroup_size;
    l.subgroups_n = std::uint32_t{1} << (std::bit_width(subgroups) / 2);
    l.subgroups_m = subgroups / l.subgroups_n;
    l.block_m = l.subgroups_m * knobs.tile_m * knobs.matrix_m;
    l.block_n = l.subgroups_n * knobs.tile_n * knobs.matrix_n;
    l.a_elements = l.block_m * l.k_step;
    l.b_elements = l.k_step * l.block_n;
    l.stage_elements = l.a_elements + l.b_elements;
    l.output_elements = l.block_m * l.block_n;
    l.shared_elements = std::max(l.stage_elements * knobs.shared_stages, l.output_elements);
    return l;
  }
  l.slice = knobs.workgroup_size / knobs.split_k;
  // The squarest power-of-two arrangement, wider along N (its loads are the
  // contiguous ones in the common row-major case).
  const auto slice = static_cast<std::uint32_t>(l.slice);
  l.threads_n = knobs.workgroup_n != 0 ? knobs.workgroup_n : std::uint32_t{1} << (std::bit_width(slice) / 2);
  l.threads_m = l.slice / l.threads_n;
  l.block_m = l.threads_m * knobs.tile_m;
  l.block_n = l.threads_n * knobs.tile_n;
  l.a_elements = l.block_m * l.k_step;
  l.b_elements = l.k_step * l.block_n;
  l.stage_elements = l.a_elements + l.b_elements;
  l.reduce_elements = (knobs.split_k - 1) * l.slice * knobs.tile_m * knobs.tile_n;
  l.shared_elements = std::max(l.stage_elements * knobs.shared_stages, l.reduce_elements);
  return l;
}

std::uint64_t shared_gemm_bytes(const GemmKnobs& knobs) {
  return static_cast<std::uint64_t>(shared_gemm_layout(knobs).shared_elements) * sizeof(float);
}

std::int64_t shared_gemm_invocations(const GemmProblem& p, const GemmKnobs& knobs) {
  const SharedGemmLayout l = shared_gemm_layout(knobs);
  return p.batch * ceil_div(p.m, l.block_m) * ceil_div(p.n, l.block_n) * knobs.workgroup_size;
}

namespace {

// One invocation's share of loading a tile of `count` units (elements or
// vectors): units local + r * workgroup_size for r < loads.
struct TileShare {
  std::int64_t loads = 0;     // per invocation
  bool ragged = false;        // the last load exists only for some invocations
};

TileShare tile_share(std::int64_t count, std::int64_t workgroup) {
  return {ceil_div(count, workgroup), count % workgroup != 0};
}

// Matrix units: each subgroup's fragments (a_i for i < tile_m, b_j for
// j < tile_n, zeroed accumulators acc_i_j) and its place in the block.
struct SubgroupFragments {
  std::vector<kir::Frag> a, b, acc;  // acc[i * tile_n + j]
  Expr row0, col0;                   // the subgroup's first element in the block
};

SubgroupFragments declare_subgroup_fragments(kir::Kernel& kernel, const GemmKnobs& knobs, const SharedGemmLayout& l) {
  const kir::FragmentShape shape{knobs.matrix_m, knobs.matrix_n, knobs.matrix_k};
  const auto precision = static_cast<kir::MatrixPrecision>(knobs.matrix_precision);
  kernel.subgroup_size = knobs.matrix_lanes;
  SubgroupFragments f;
  for (std::uint32_t i = 0; i < knobs.tile_m; ++i)
    f.a.push_back(kernel.add_fragment(indexed("fa", i), kir::FragmentRole::a, shape, precision));
  for (std::uint32_t j = 0; j < knobs.tile_n; ++j)
    f.b.push_back(kernel.add_fragment(indexed("fb", j), kir::FragmentRole::b, shape, precision));
  std::vector<Stmt>& body = kernel.body;
  for (std::uint32_t i = 0; i < knobs.tile_m; ++i)
    for (std::uint32_t j = 0; j < knobs.tile_n; ++j) {
      f.acc.push_back(kernel.add_fragment(indexed("facc", i, j), kir::FragmentRole::accumulator, shape));
      body.push_back(kir::fragment_fill(f.acc.back(), kir::f32(0.0)));
    }
  const Expr subgroup = declare_i32(body, "sg", kir::local_index() / kir::i32(knobs.matrix_lanes));
  const Expr sg_m = l.subgroups_n == 1 ? subgroup : declare_i32(body, "sg_m", subgroup / kir::i32(l.subgroups_n));
  const Expr sg_n = l.subgroups_n == 1 ? kir::i32(0) : declare_i32(body, "sg_n", subgroup % kir::i32(l.subgroups_n));
  f.row0 = declare_i32(body, "sg_row0", add_scaled({}, sg_m, std::int64_t{knobs.tile_m} * knobs.matrix_m));
  f.col0 = declare_i32(body, "sg_col0", add_scaled({}, sg_n, std::int64_t{knobs.tile_n} * knobs.matrix_n));
  return f;
}

// Step 3 with matrix units: for each matrix_k slab of the shared tiles in
// the set at `set_at` (empty: the first; A stored K-major: column-major
// rows; B K-major: row-major), load the subgroup's fragments and
// multiply-accumulate.
void multiply_matrix_tiles(std::vector<Stmt>& step, const GemmKnobs& knobs, const SharedGemmLayout& l,
                           kir::Shared tiles, const SubgroupFragments& f, const Expr& set_at) {
  auto in_set = [&](const Expr& at) { return set_at ? at + set_at : at; };
  const Expr m = kir::i32(knobs.matrix_m), n = kir::i32(knobs.matrix_n), k = kir::i32(knobs.matrix_k);
  for (std::int64_t kk = 0; kk < knobs.shared_k_tile; kk += knobs.matrix_k) {
    for (std::uint32_t i = 0; i < knobs.tile_m; ++i)
      step.push_back(kir::fragment_load(f.a[i], tiles,
                                        in_set(add_constant(f.row0, kk * l.block_m + std::int64_t{i} * knobs.matrix_m)),
                                        kir::i32(l.block_m), m, k, /*column_major=*/true));
    for (std::uint32_t j = 0; j < knobs.tile_n; ++j)
      step.push_back(kir::fragment_load(f.b[j], tiles,
                                        in_set(add_constant(f.col0, l.a_elements + kk * l.block_n +
                                                                        std::int64_t{j} * knobs.matrix_n)),
                                        kir::i32(l.block_n), k, n));
    for (std::uint32_t i = 0; i < knobs.tile_m; ++i)
      for (std::uint32_t j = 0; j < knobs.tile_n; ++j) {
        const kir::Frag& acc = f.acc[i * knobs.tile_n + j];
        step.push_back(kir::fragment_mma(acc, f.a[i], f.b[j], acc));
      }
  }
}

// After the K loop with matrix units: the accumulators to shared memory
// (block_m x block_n, row-major), a barrier, then each invocation's share of
// the block through the epilogue to Y, one plain store per element.
void store_matrix_block(kir::Kernel& kernel, const GemmProblem& p, const GemmKnobs& knobs, const SharedGemmLayout& l,
                        kir::Shared tiles, const SubgroupFragments& f, const Expr& local, const Expr& block_row0,
                        const Expr& block_col0, const Expr& y_base, const Expr& batch) {
  std::vector<Stmt>& body = kernel.body;
  for (std::uint32_t i = 0; i < knobs.tile_m; ++i)
    for (std::uint32_t j = 0; j < knobs.tile_n; ++j) {
      const Expr at = add_constant(add_scaled(f.col0, f.row0, l.block_n),
                                   std::int64_t{i} * knobs.matrix_m * l.block_n + std::int64_t{j} * knobs.matrix_n);
      body.push_back(kir::fragment_store(f.acc[i * knobs.tile_n + j], tiles, at,
                                         kir::i32(l.block_n), kir::i32(knobs.matrix_m), kir::i32(knobs.matrix_n)));
    }
  body.push_back(kir::barrier());
  const std::int64_t wg = knobs.workgroup_size;
  for (std::int64_t r = 0; r < ceil_div(l.output_elements, wg); ++r) {
    const Expr e = declare_i32(body, indexed("out_e", r), add_constant(local, r * wg));
    const Expr row = declare_i32(body, indexed("out_row", r), block_row0 + e / kir::i32(l.block_n));
    const Expr col = declare_i32(body, indexed("out_col", r), block_col0 + e % kir::i32(l.block_n));
    Expr value = kir::load(tiles, e, ScalarType::f32);
    if (p.epilogue) value = p.epilogue(value, row, col, batch);
    const Expr at = add_scaled(add_scaled(y_base, row, p.y_row_stride), col, p.y_col_stride);
    Expr inside = row < kir::i32(p.m) && col < kir::i32(p.n);
    if (l.output_elements % wg != 0 && r == ceil_div(l.output_elements, wg) - 1)
      inside = e < kir::i32(l.output_elements) && inside;
    body.push_back(kir::branch(inside, {kir::store(p.y, at, value)}));
  }
}

}  // namespace

void build_shared_gemm(kir::Kernel& kernel, const GemmProblem& p, const GemmKnobs& knobs) {
  const SharedGemmLayout l = shared_gemm_layout(knobs);
  const std::int64_t wg = knobs.workgroup_size;
  const std::int64_t m_blocks = ceil_div(p.m, l.block_m);
  const std::int64_t n_blocks = ceil_div(p.n, l.block_n);
  kernel.global_size = shared_gemm_invocations(p, knobs);
  kernel.workgroup_size = knobs.workgroup_size;
  const kir::Shared tiles = kernel.add_shared("tiles", ScalarType::f32, l.shared_elements);
  std::vector<Stmt>& body = kernel.body;

  // Block coordinates: column blocks vary fastest, then row blocks, then the batch.
  const Expr local = declare_i32(body, "local_id", kir::local_index());
  const Expr group = declare_i32(body, "wg_index", kir::workgroup_index());
  const Expr nb = declare_i32(body, "nb", group % kir::i32(n_blocks));
  const Expr above_nb = declare_i32(body, "nb_rest", group / kir::i32(n_blocks));
  Expr batch = kir::i32(0), mb = above_nb;
  if (p.batch > 1) {
    mb = declare_i32(body, "mb", above_nb % kir::i32(m_blocks));
    batch = declare_i32(body, "bt", above_nb / kir::i32(m_blocks));
  }
  const Expr block_row0 = declare_i32(body, "block_row0", add_scaled({}, mb, l.block_m));
  const Expr block_col0 = declare_i32(body, "block_col0", add_scaled({}, nb, l.block_n));
  const GemmBases bases = p.bases ? p.bases(body, batch) : GemmBases{kir::i32(0), kir::i32(0), kir::i32(0)};

  // This invocation's K slice and register block.
  Expr slice = kir::i32(0), in_slice = local;
  if (knobs.split_k > 1) {
    slice = declare_i32(body, "slice", local / kir::i32(l.slice));
    in_slice = declare_i32(body, "in_slice", local % kir::i32(l.slice));
  }
  const bool fragments = knobs.matrix_m != 0;
  Expr tm, tn, row0, col0;
  if (!fragments) {
    tm = l.threads_n == l.slice ? kir::i32(0) : declare_i32(body, "tm", in_slice / kir::i32(l.threads_n));
    tn = l.threads_n == 1 ? kir::i32(0) : declare_i32(body, "tn", in_slice % kir::i32(l.threads_n));
    row0 = declare_i32(body, "row0", add_scaled(block_row0, tm, knobs.tile_m));
    col0 = declare_i32(body, "col0", add_scaled(block_col0, tn, knobs.tile_n));
  }

  // Each invocation's share of the tile loads, fixed for the whole K loop:
  // the operand address without K, the tile row along K, the shared slot.
  // A is read along K when K is contiguous, else along M; B along N when N
  // is contiguous (and always when gathered, whose columns are prepared
  // once), else along K. Tiles are stored K-major: A[kk][row], B[kk][col].
  // With vector_width 4 a contiguous dimension is read as vec4 (4 K values
  // of A, or 4 columns of B) when extents, strides and bases are multiples
  // of 4: then a vector is wholly inside or wholly past the edge, so the
  // clamps and zeroing work per vector.
  const bool a_along_k = p.a_k_stride == 1;
  const bool b_along_k = !p.gather_b && p.b_col_stride != 1 && p.b_k_stride == 1;
  const bool vectors = knobs.vector_width == kVector && p.k > 0;
  const std::int64_t a_width = vectors && a_along_k && l.k_step % kVector == 0 && p.k % kVector == 0 &&
                                       p.a_row_stride % kVector == 0 && (!p.bases || p.a_base_multiple % kVector == 0)
                                   ? kVector
                                   : 1;
  const std::int64_t b_width = vectors && !p.gather_b && p.b_col_stride == 1 && l.block_n % kVector == 0 &&
                                       p.n_multiple_of(kVector) && p.b_k_stride % kVector == 0 &&
                                       (!p.bases || p.b_base_multiple % kVector == 0)
                                   ? kVector
                                   : 1;
  const TileShare a_share = tile_share(l.a_elements / a_width, wg);
  const TileShare b_share = tile_share(l.b_elements / b_width, wg);
  std::vector<Expr> a_addr, a_kk, a_slot, b_addr, b_kk, b_slot;
  for (std::int64_t r = 0; r < a_share.loads; ++r) {
    const Expr e = declare_i32(body, indexed("a_e", r), add_constant(local, r * wg));
    const std::int64_t per_row = l.k_step / a_width;
    const Expr row = a_along_k ? e / kir::i32(per_row) : e % kir::i32(l.block_m);
    const Expr kk = declare_i32(body, indexed("a_kk", r),
                                a_along_k ? add_scaled({}, e % kir::i32(per_row), a_width) : e / kir::i32(l.block_m));
    const Expr safe_row = kir::min(block_row0 + row, kir::i32(p.m - 1));
    Expr at = add_scaled(bases.a, safe_row, p.a_row_stride);
    if (a_width > 1) at = at / kir::i32(a_width);  // the row's first vector
    a_addr.push_back(declare_i32(body, indexed("a_at", r), at));
    a_kk.push_back(kk);
    a_slot.push_back(declare_i32(body, indexed("a_slot", r), add_scaled(row, kk, l.block_m)));
  }
  for (std::int64_t r = 0; r < b_share.loads; ++r) {
    const Expr e = declare_i32(body, indexed("b_e", r), add_constant(local, r * wg));
    const std::int64_t per_k = l.block_n / b_width;
    const Expr col = b_along_k ? e / kir::i32(l.k_step) : add_scaled({}, e % kir::i32(per_k), b_width);
    const Expr kk = declare_i32(body, indexed("b_kk", r), b_along_k ? e % kir::i32(l.k_step) : e / kir::i32(per_k));
    const Expr safe_col = kir::min(block_col0 + col, kir::i32(p.n - b_width));
    if (p.gather_b) {
      p.gather_b->prepare(body, safe_col, bases.b, static_cast<std::uint32_t>(r));
    } else {
      Expr at = add_scaled(bases.b, safe_col, p.b_col_stride);
      if (b_width > 1) at = at / kir::i32(b_width);
      b_addr.push_back(declare_i32(body, indexed("b_at", r), at));
    }
    b_kk.push_back(kk);
    b_slot.push_back(declare_i32(body, indexed("b_slot", r), add_constant(add_scaled(col, kk, l.block_n), l.a_elements)));
  }

  SubgroupFragments subgroup;
  if (fragments) {
    subgroup = declare_subgroup_fragments(kernel, knobs, l);
  } else {
    for (std::uint32_t i = 0; i < knobs.tile_m; ++i)
      for (std::uint32_t j = 0; j < knobs.tile_n; ++j)
        body.push_back(kir::declare(indexed("acc", i, j), ScalarType::f32, kir::f32(0.0)));
  }

  // The K loop: load the tiles, barrier, multiply this slice's rows, barrier
  // (double-buffered: load the next step's tiles into the other set,
  // multiply out of this step's, barrier).
  const Expr k0 = kir::var("k0", ScalarType::i32);
  const std::int64_t k_end = ceil_div(p.k, l.k_step) * l.k_step;
  // Zeroes the loaded `names` past K and stores them `stride` apart from `slot`.
  auto store_zeroed = [&](std::vector<Stmt>& out, const std::vector<std::string>& names, const Expr& k,
                          const Expr& slot, std::int64_t stride) {
    for (std::size_t c = 0; c < names.size(); ++c) {
      const Expr v = kir::var(names[c], ScalarType::f32);
      out.push_back(kir::assign(names[c], kir::select(k < kir::i32(p.k), v, kir::f32(0.0))));
      out.push_back(kir::store(tiles, add_constant(slot, static_cast<std::int64_t>(c) * stride), v));
    }
  };
  // Appends to `out` this invocation's loads of the tiles at K offset
  // `k_base` into the set starting at `set_at` (empty: the first), its
  // variables' names starting with `prefix`.
  auto load_tiles = [&](std::vector<Stmt>& out, const Expr& k_base, const Expr& set_at, const std::string& prefix) {
    auto guarded = [&](const TileShare& share, std::int64_t r, std::int64_t count, std::vector<Stmt> stmts) {
      if (share.ragged && r == share.loads - 1)
        out.push_back(kir::branch(add_constant(local, r * wg) < kir::i32(count), std::move(stmts)));
      else
        out.insert(out.end(), stmts.begin(), stmts.end());
    };
    auto vector_names = [&](const std::string& name, std::int64_t r) {
      std::vector<std::string> names;
      for (std::int64_t c = 0; c < kVector; ++c) names.push_back(indexed(indexed(prefix + name, r) + "_", c));
      return names;
    };
    auto in_set = [&](const Expr& slot) { return set_at ? slot + set_at : slot; };
    for (std::int64_t r = 0; r < a_share.loads; ++r) {
      std::vector<Stmt> load;
      const Expr k = declare_i32(load, indexed(prefix + "a_k", r), k_base + a_kk[r]);
      if (a_width > 1) {
        const Expr safe_k = kir::min(k, kir::i32(p.k - kVector));
        const std::vector<std::string> names = vector_names("a_v", r);
        load.push_back(kir::load_vector(names, p.a, a_addr[r] + safe_k / kir::i32(kVector), ScalarType::f32));
        store_zeroed(load, names, k, in_set(a_slot[r]), l.block_m);
      } else {
        const Expr safe_k = kir::min(k, kir::i32(std::max<std::int64_t>(p.k - 1, 0)));
        const std::string name = indexed(prefix + "a_v", r);
        load.push_back(kir::declare(name, ScalarType::f32,
                                    kir::load(p.a, add_scaled(a_addr[r], safe_k, p.a_k_stride), ScalarType::f32)));
        store_zeroed(load, {name}, k, in_set(a_slot[r]), 0);
      }
      guarded(a_share, r, l.a_elements / a_width, std::move(load));
    }
    for (std::int64_t r = 0; r < b_share.loads; ++r) {
      std::vector<Stmt> load;
      const Expr k = declare_i32(load, indexed(prefix + "b_k", r), k_base + b_kk[r]);
      const Expr safe_k = kir::min(k, kir::i32(std::max<std::int64_t>(p.k - 1, 0)));
      if (b_width > 1) {
        const std::vector<std::string> names = vector_names("b_v", r);
        load.push_back(kir::load_vector(names, p.b, add_scaled(b_addr[r], safe_k, p.b_k_stride / kVector),
                                        ScalarType::f32));
        store_zeroed(load, names, k, in_set(b_slot[r]), 1);
      } else {
        const std::string name = indexed(prefix + "b_v", r);
        if (p.gather_b && p.gather_b->taps > 1)
          p.gather_b->load_at(load, name, safe_k, static_cast<std::uint32_t>(r));
        else if (p.gather_b)
          p.gather_b->load(load, name, safe_k, 0, static_cast<std::uint32_t>(r));
        else
          load.push_back(kir::declare(name, ScalarType::f32,
                                      kir::load(p.b, add_scaled(b_addr[r], safe_k, p.b_k_stride), ScalarType::f32)));
        store_zeroed(load, {name}, k, in_set(b_slot[r]), 0);
      }
      guarded(b_share, r, l.b_elements / b_width, std::move(load));
    }
  };
  std::vector<Stmt> step;
  Expr set_at;  // the set of tiles this step multiplies out of (empty: the only one)
  if (knobs.shared_stages == 2 && p.k > 0) {
    load_tiles(body, kir::i32(0), {}, "first_");
    body.push_back(kir::barrier());
    // The set alternates: a variable flipped at the end of each step (no division in the K loop).
    body.push_back(kir::declare("set_at", ScalarType::i32, kir::i32(0)));
    set_at = kir::var("set_at", ScalarType::i32);
    std::vector<Stmt> next;
    load_tiles(next, k0 + kir::i32(l.k_step), kir::i32(l.stage_elements) - set_at, "");
    step.push_back(kir::branch(k0 + kir::i32(l.k_step) < kir::i32(k_end), std::move(next)));
  } else {
    load_tiles(step, k0, {}, "");
    step.push_back(kir::barrier());
  }
  // Ends a step: the barrier after every read of its set, and the next step's set.
  auto end_step = [&] {
    step.push_back(kir::barrier());
    if (set_at) step.push_back(kir::assign("set_at", kir::i32(l.stage_elements) - set_at));
  };
  if (fragments) {
    multiply_matrix_tiles(step, knobs, l, tiles, subgroup, set_at);
    end_step();
    body.push_back(kir::loop("k0", kir::i32(0), kir::i32(k_end), std::move(step), l.k_step));
    store_matrix_block(kernel, p, knobs, l, tiles, subgroup, local, block_row0, block_col0, bases.y, batch);
    return;
  }
  const Expr a_base = declare_i32(step, "a_sh", add_scaled(add_scaled(set_at, slice, knobs.shared_k_tile * l.block_m),
                                                           tm, knobs.tile_m));
  const Expr b_base = declare_i32(
      step, "b_sh",
      add_constant(add_scaled(add_scaled(set_at, slice, knobs.shared_k_tile * l.block_n), tn, knobs.tile_n),
                   l.a_elements));
  for (std::int64_t kk = 0; kk < knobs.shared_k_tile; ++kk) {
    std::vector<Expr> a_values, b_values;
    for (std::uint32_t i = 0; i < knobs.tile_m; ++i) {
      const std::string name = indexed("a" + std::to_string(kk) + "_", i);
      step.push_back(kir::declare(name, ScalarType::f32,
                                  kir::load(tiles, add_constant(a_base, kk * l.block_m + i), ScalarType::f32)));
      a_values.push_back(kir::var(name, ScalarType::f32));
    }
    for (std::uint32_t j = 0; j < knobs.tile_n; ++j) {
      const std::string name = indexed("b" + std::to_string(kk) + "_", j);
      step.push_back(kir::declare(name, ScalarType::f32,
                                  kir::load(tiles, add_constant(b_base, kk * l.block_n + j), ScalarType::f32)));
      b_values.push_back(kir::var(name, ScalarType::f32));
    }
    for (std::uint32_t i = 0; i < knobs.tile_m; ++i)
      for (std::uint32_t j = 0; j < knobs.tile_n; ++j) {
        const std::string acc = indexed("acc", i, j);
        step.push_back(kir::assign(acc, kir::var(acc, ScalarType::f32) + a_values[i] * b_values[j]));
      }
  }
  end_step();
  body.push_back(kir::loop("k0", kir::i32(0), kir::i32(k_end), std::move(step), l.k_step));

  // Slice 0 adds the other slices' partial blocks, laid out so that
  // consecutive invocations touch consecutive elements.
  const std::int64_t block_elements = std::int64_t{knobs.tile_m} * knobs.tile_n;
  std::vector<Stmt> finish;
  if (knobs.split_k > 1) {
    std::vector<Stmt> publish;
    const Expr at = declare_i32(publish, "partial_at",
                                add_scaled(in_slice, slice - kir::i32(1), block_elements * l.slice));
    for (std::int64_t e = 0; e < block_elements; ++e) {
      const std::string acc = indexed("acc", e / knobs.tile_n, e % knobs.tile_n);
      publish.push_back(kir::store(tiles, add_constant(at, e * l.slice), kir::var(acc, ScalarType::f32)));
    }
    body.push_back(kir::branch(slice > kir::i32(0), std::move(publish)));
    body.push_back(kir::barrier());
    for (std::int64_t s = 1; s < knobs.split_k; ++s)
      for (std::int64_t e = 0; e < block_elements; ++e) {
        const std::string acc = indexed("acc", e / knobs.tile_n, e % knobs.tile_n);
        const Expr partial =
            kir::load(tiles, add_constant(in_slice, ((s - 1) * block_elements + e) * l.slice), ScalarType::f32);
        finish.push_back(kir::assign(acc, kir::var(acc, ScalarType::f32) + partial));
      }
  }

  // One plain store of the final value per output element.
  for (std::uint32_t i = 0; i < knobs.tile_m; ++i) {
    for (std::uint32_t j = 0; j < knobs.tile_n; ++j) {
      const Expr row = add_constant(row0, i);
      const Expr col = add_constant(col0, j);
      Expr value = kir::var(indexed("acc", i, j), ScalarType::f32);
      if (p.epilogue) value = p.epilogue(value, row, col, batch);
      const Expr at = add_scaled(add_scaled(bases.y, row, p.y_row_stride), col, p.y_col_stride);
      finish.push_back(kir::branch(row < kir::i32(p.m) && col < kir::i32(p.n), {kir::store(p.y, at, value)}));
    }
  }
  if (knobs.split_k > 1)
    body.push_back(kir::branch(kir::eq(slice, kir::i32(0)), std::move(finish)));
  else
    body.insert(body.end(), finish.begin(), finish.end());
}

}  // namespace kiln::shaders::detail

#include "shaders/heuristic.h"

#include "shaders/gemm_shared.h"
#include "shaders/template_util.h"

#include <algorithm>
#include <array>
#include <bit>

namespace kiln::shaders {

using detail::ceil_div;

namespace {

// Register blocks the heuristic uses, largest first. GEMM blocks go to 8 x 8:
// where a driver scalarises buffer loads, loads per multiply-add decide the
// speed, and 64 accumulators fit a GPU's register file
// (docs/benchmarks/template-thresholds.md has the figures).
constexpr std::array<std::uint32_t, 4> kGemmTiles = {8, 4, 2, 1};
// On CPU devices a GEMM block may span 16 columns: 8x16 with vec4 loads is the
// fastest block there.
constexpr std::array<std::uint32_t, 5> kCpuGemmColumnTiles = {16, 8, 4, 2, 1};
// Direct convolutions block up to 8 output channels x 8 output columns: the
// largest block is the fastest on ResNet-50's 3x3 convolutions.
constexpr std::array<std::uint32_t, 4> kTiles = {8, 4, 2, 1};
constexpr std::array<std::uint32_t, 4> kDepthwiseWidths = {8, 4, 2, 1};
constexpr std::uint32_t kKUnroll = 4;
constexpr std::uint32_t kVectorWidth = 4;
constexpr std::uint32_t kWorkgroupSize = 64;
// Products with at most this many rows are matrix-vector products (a batch
// of decode steps): bandwidth-bound, each weight read once.
constexpr std::int64_t kMatrixVectorRows = 2;

// Enough invocations to fill the device: a few dozen subgroups. Below this,
// smaller register blocks (more invocations) win over reuse.
std::int64_t min_invocations(const lower::LowerTarget& target) {
  return std::int64_t{std::max<std::uint32_t>(target.subgroup_size, 1)} * 32;
}

// The widest panel: a subgroup's invocations span one panel of B (a power
// of two up to 64).
std::uint32_t max_panel_width(const lower::LowerTarget& target) {
  std::uint32_t panel = 1;
  while (panel * 2 <= std::min<std::uint32_t>(target.subgroup_size, 64)) panel *= 2;
  return panel;
}

// The panel of B that consecutive invocations keep in cache (K x panel
// columns) stays within this many bytes: about a CPU core's L2, and well
// within a GPU's.
constexpr std::int64_t kPanelBytes = 512 * 1024;

std::uint32_t workgroup_size(const lower::LowerTarget& target) {
  return std::clamp<std::uint32_t>(target.max_workgroup_invocations, 1, kWorkgroupSize);
}

// The largest candidate tile not longer than `extent` whose padding past
// the edge wastes at most 1 / waste_fraction of the work; else the one
// wasting least.
template <std::size_t N>
std::uint32_t fit_tile(std::int64_t extent, const std::array<std::uint32_t, N>& candidates,
                       std::int64_t waste_fraction = 8) {
  std::uint32_t best = candidates.back();
  std::int64_t best_waste = extent;
  for (std::uint32_t tile : candidates) {
    if (tile > extent) continue;
    const std::int64_t waste = ceil_div(extent, tile) * tile - extent;
    if (waste * waste_fraction <= extent) return tile;
    if (waste < best_waste) {
      best = tile;
      best_waste = waste;
    }
  }
  return best;
}

// The direct convolution's tile width: the widest whose padding past the
// row's end is at most a quarter of the row. Its row segments make wide
// tiles cheap, so 8 columns on a 7- or 14-wide output (one or two wasted)
// still beat 1 or 2 (docs/benchmarks/template-thresholds.md).
std::uint32_t fit_conv_width(std::int64_t out_w) {
  for (std::uint32_t tile : kTiles)
    if ((ceil_div(out_w, tile) * tile - out_w) * 4 <= out_w) return tile;
  return 1;
}

// Halves the larger of two tiles.
void shrink(std::uint32_t& a, std::uint32_t& b) {
  if (a >= b && a > 1) a /= 2;
  else if (b > 1) b /= 2;
}

// Shared-memory tiling on GPUs: 256 invocations with 4x4 register blocks
// make a 64x64 block of C; each K step stages k_tile rows of A and B in
// shared memory (16 for the square block without split-K, else 8). Thin
// products use one line of 1x1 blocks instead: a column (N below
// kThinExtent: a 256 x 1 block) or a row (M below it: 1 x 256). Every
// configuration needs at most 14.3 KiB of shared memory, within Vulkan's
// guaranteed 16 KiB.
constexpr std::uint32_t kSharedWorkgroupSize = 256;
constexpr std::uint32_t kSharedKTile = 16;
constexpr std::uint32_t kThinSharedKTile = 8;
constexpr std::int64_t kThinExtent = 16;
// Split-K while the product has fewer workgroups than this (a guess at
// "fills a GPU": a few per multiprocessor of a mid-sized GPU) and each
// slice keeps at least kMinSliceK values of K.
constexpr std::int64_t kFillWorkgroups = 64;
constexpr std::int64_t kMinSliceK = 256;
constexpr std::uint32_t kMaxSplitK = 8;

enum class SharedShape : std::uint8_t { square, column, row };

GemmKnobs shared_knobs(SharedShape shape, std::uint32_t split_k) {
  GemmKnobs knobs;
  knobs.workgroup_size = kSharedWorkgroupSize;
  knobs.k_unroll = 1;     // not used by the shared path
  knobs.panel_width = 1;  // not used by the shared path
  knobs.vector_width = kVectorWidth;  // vec4 tile loads where the operand allows
  knobs.shared_k_tile = shape == SharedShape::square && split_k == 1 ? kSharedKTile : kThinSharedKTile;
  knobs.split_k = split_k;
  const std::uint32_t slice = kSharedWorkgroupSize / split_k;
  switch (shape) {
    case SharedShape::square: knobs.tile_m = knobs.tile_n = 4; break;
    case SharedShape::column:
      knobs.tile_m = knobs.tile_n = 1;
      knobs.workgroup_n = 1;
      break;
    case SharedShape::row:
      knobs.tile_m = knobs.tile_n = 1;
      knobs.workgroup_n = slice;
      break;
  }
  return knobs;
}

// Whether the target takes the shared path at all: a GPU with room for
// 256-invocation workgroups and the largest tiles the heuristic uses.
bool shared_tiling_fits(const lower::LowerTarget& target) {
  if (target.cpu_device() || target.max_workgroup_invocations < kSharedWorkgroupSize) return false;
  for (SharedShape shape : {SharedShape::square, SharedShape::column, SharedShape::row})
    for (std::uint32_t split = 1; split <= kMaxSplitK; split *= 2)
      if (detail::shared_gemm_bytes(shared_knobs(shape, split)) > target.max_shared_memory_bytes) return false;
  return true;
}

// Subgroup-broadcast blocks per lane (gemm_subgroup.h), for targets that
// broadcast within subgroups: lavapipe's fastest hand-written SGEMMs keep
// 8 x 32 or 8 x 64 per lane with A and B read through texel buffers; in
// kiln's template 8 x 16 was faster still on 2048^3
// (docs/benchmarks/gemm-ceiling.md); narrower blocks for smaller products.
constexpr std::array<std::array<std::uint32_t, 2>, 5> kSubgroupTiles = {
    {{8, 64}, {8, 32}, {8, 16}, {4, 16}, {2, 8}}};
constexpr std::uint32_t kMaxSubgroupLanes = 64;

// The subgroup configurations of the space: none unless the target
// broadcasts within subgroups of a power of two up to 64 lanes that divide
// a workgroup it allows; with texel loads where it has texel buffers.
std::vector<GemmKnobs> subgroup_knobs(const lower::LowerTarget& target) {
  const std::uint32_t lanes = target.subgroup_size;
  const std::uint32_t group = std::max(workgroup_size(target), lanes);
  if (!target.subgroup_broadcast || !std::has_single_bit(lanes) || lanes > kMaxSubgroupLanes ||
      group > target.max_workgroup_invocations || group % lanes != 0)
    return {};
  std::vector<GemmKnobs> out;
  for (const auto& [tile_m, tile_n] : kSubgroupTiles) {
    GemmKnobs knobs;
    knobs.tile_m = tile_m;
    knobs.tile_n = tile_n;
    knobs.k_unroll = 1;  // the K chunk is the unroll
    knobs.workgroup_size = group;
    knobs.panel_width = 1;
    knobs.vector_width = kVectorWidth;
    knobs.subgroup_broadcast = lanes;
    knobs.texel_loads = target.max_texel_buffer_elements != 0;
    out.push_back(knobs);
  }
  return out;
}

// Discrete GPUs' blocks for large products: 256 invocations with 8 x 8
// register blocks make a 128 x 128 block of C (four times the reuse of a
// loaded element of the 64 x 64 block), K tiles of 8, double-buffered:
// 16 KiB of shared memory. Taken where the product still has this many
// blocks: two per multiprocessor of a large GPU.
constexpr std::uint32_t kLargeTile = 8;
constexpr std::uint32_t kLargeKTile = 8;
constexpr std::int64_t kLargeBlockWorkgroups = 256;
constexpr std::uint32_t kDeepKTile = 32;

GemmKnobs large_shared_knobs() {
  GemmKnobs knobs = shared_knobs(SharedShape::square, 1);
  knobs.tile_m = knobs.tile_n = kLargeTile;
  knobs.shared_k_tile = kLargeKTile;
  knobs.shared_stages = 2;
  return knobs;
}

// `knobs` with their tiles double-buffered.
GemmKnobs double_buffered(GemmKnobs knobs) {
  knobs.shared_stages = 2;
  return knobs;
}

bool fits(const GemmKnobs& knobs, const lower::LowerTarget& target) {
  return detail::shared_gemm_bytes(knobs) <= target.max_shared_memory_bytes;
}

// A shared tiling as the target's class takes it: a discrete GPU hides its
// loads' latency behind the multiplies with two sets of tiles, where they fit.
GemmKnobs for_class(const GemmKnobs& knobs, const lower::LowerTarget& target) {
  const bool discrete = target.device_class == lower::DeviceClass::discrete_gpu;
  return discrete && fits(double_buffered(knobs), target) ? double_buffered(knobs) : knobs;
}

GemmKnobs choose_shared_gemm_knobs(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                                   const lower::LowerTarget& target) {
  if (target.device_class == lower::DeviceClass::discrete_gpu && n >= kThinExtent && m >= kThinExtent) {
    const GemmKnobs large = large_shared_knobs();
    const detail::SharedGemmLayout l = detail::shared_gemm_layout(large);
    if (batch * ceil_div(m, l.block_m) * ceil_div(n, l.block_n) >= kLargeBlockWorkgroups && fits(large, target))
      return large;
  }
  const SharedShape shape = n < kThinExtent   ? SharedShape::column
                            : m < kThinExtent ? SharedShape::row
                                              : SharedShape::square;
  std::uint32_t split = 1;
  auto workgroups = [&](std::uint32_t s) {
    const detail::SharedGemmLayout l = detail::shared_gemm_layout(shared_knobs(shape, s));
    return batch * ceil_div(m, l.block_m) * ceil_div(n, l.block_n);
  };
  while (split < kMaxSplitK && workgroups(split) < kFillWorkgroups && k >= kMinSliceK * split * 2) split *= 2;
  return for_class(shared_knobs(shape, split), target);
}

// Matrix units: four subgroups (2 x 2) of the instruction's lanes, each
// taking as many instruction tiles (up to 4 x 4) as make a block of about
// 64 x 64, with K tiles of 32 staged in shared memory.
constexpr std::uint32_t kMatrixSubgroups = 4;
constexpr std::uint32_t kMatrixBlock = 64;
constexpr std::uint32_t kMatrixKTile = 32;

GemmKnobs matrix_knobs(const lower::MatrixUnit& unit) {
  GemmKnobs knobs;
  knobs.workgroup_size = kMatrixSubgroups * unit.lanes;
  knobs.k_unroll = 1;
  knobs.panel_width = 1;
  knobs.vector_width = kVectorWidth;
  knobs.shared_k_tile = kMatrixKTile;
  knobs.tile_m = std::clamp(kMatrixBlock / (2 * unit.m), 1u, 4u);
  knobs.tile_n = std::clamp(kMatrixBlock / (2 * unit.n), 1u, 4u);
  knobs.matrix_m = unit.m;
  knobs.matrix_n = unit.n;
  knobs.matrix_k = unit.k;
  knobs.matrix_lanes = unit.lanes;
  knobs.matrix_precision = static_cast<std::uint8_t>(kir::matrix_precision_of(unit.inputs).value());
  return knobs;
}

// The input type of the matrix instructions the node being lowered may use:
// its 16-bit storage type (rounding such operands to it is exact), or for an
// f32 node the narrower type the precision settings allow; "" for none.
std::string matrix_inputs_for(const lower::LowerTarget& target) {
  if (target.storage16 == "f16" || target.storage16 == "bf16") return target.storage16;
  if (target.storage16.empty()) return target.f32_products;
  return "";
}

// The matrix-unit knobs the target offers for the node being lowered: its
// instructions of matrix_inputs_for's type, whose shapes fit the workgroup,
// the tile and the shared memory.
std::vector<GemmKnobs> matrix_knob_choices(const lower::LowerTarget& target) {
  std::vector<GemmKnobs> out;
  const std::string inputs = matrix_inputs_for(target);
  if (inputs.empty()) return out;
  for (const lower::MatrixUnit& unit : target.matrix_units) {
    if (unit.inputs != inputs || unit.lanes * kMatrixSubgroups > target.max_workgroup_invocations ||
        kMatrixKTile % unit.k != 0 || unit.m > kMatrixBlock || unit.n > kMatrixBlock)
      continue;
    const GemmKnobs knobs = matrix_knobs(unit);
    if (fits(knobs, target)) out.push_back(knobs);
  }
  return out;
}

}  // namespace

GemmKnobs choose_gemm_knobs(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                            const lower::LowerTarget& target) {
  // A product with at least one instruction tile each way and two K steps.
  for (const GemmKnobs& knobs : matrix_knob_choices(target))
    if (m >= knobs.matrix_m && n >= knobs.matrix_n && k >= 2 * std::int64_t{knobs.matrix_k})
      return for_class(knobs, target);
  if (shared_tiling_fits(target)) return choose_shared_gemm_knobs(batch, m, n, k, target);
  GemmKnobs knobs;
  // On a CPU device a tile may waste up to a quarter of the rows or columns:
  // loads per multiply fall with the tile's size faster than the waste grows
  // (docs/benchmarks/template-thresholds.md).
  knobs.tile_m = target.cpu_device() ? fit_tile(m, kGemmTiles, 4) : fit_tile(m, kGemmTiles);
  knobs.tile_n = target.cpu_device() ? fit_tile(n, kCpuGemmColumnTiles, 4) : fit_tile(n, kGemmTiles);
  // Matrix-vector products (a decode step's projections) on a CPU device
  // with texel buffers read both operands through them, which the driver
  // keeps vectorised where it scalarises storage-buffer loads
  // (docs/benchmarks/generation.md), in blocks
  // not shrunk for invocations: the rows are few, the bytes per column are
  // what counts. 16-bit operands need 16-bit texel views.
  const bool matrix_vector =
      target.cpu_device() && target.max_texel_buffer_elements != 0 &&
      (target.storage16.empty() || target.texel_16bit) && m <= kMatrixVectorRows &&
      std::max(batch * m * k, batch * k * n) <= static_cast<std::int64_t>(target.max_texel_buffer_elements);
  while (!matrix_vector && (knobs.tile_m > 1 || knobs.tile_n > 1) &&
         batch * ceil_div(m, knobs.tile_m) * ceil_div(n, knobs.tile_n) < min_invocations(target))
    shrink(knobs.tile_m, knobs.tile_n);
  knobs.k_unroll = k >= 2 * kKUnroll ? kKUnroll : 1;
  // vec4 loads wherever the shape allows (build_gemm falls back per operand):
  // faster on lavapipe's 8x8 tiles (docs/benchmarks/template-thresholds.md).
  knobs.vector_width = kVectorWidth;
  knobs.workgroup_size = workgroup_size(target);
  if (matrix_vector) {
    knobs.panel_width = 1;
    knobs.texel_loads = true;
    return knobs;
  }
  // Panels no wider than the product and small enough to stay in cache.
  knobs.panel_width = max_panel_width(target);
  const std::int64_t n_blocks = ceil_div(n, knobs.tile_n);
  while (knobs.panel_width > 1 && (knobs.panel_width > n_blocks ||
                                   k * knobs.tile_n * knobs.panel_width * std::int64_t{sizeof(float)} > kPanelBytes))
    knobs.panel_width /= 2;
  return knobs;
}

std::int64_t gemm_column_multiple(const lower::LowerTarget& /*target*/) {
  // The CPU register path's widest tile, for every class until GPUs are measured (see the header).
  return kCpuGemmColumnTiles.front();
}

ConvPlan choose_conv_plan(const ConvProblem& p, const lower::LowerTarget& target) {
  const bool pointwise = conv_algorithm_applies(p, ConvAlgorithm::gemm_1x1);
  if (pointwise || (conv_algorithm_applies(p, ConvAlgorithm::implicit_gemm) && prefers_implicit_gemm(p)))
    return choose_conv_plan(p, pointwise ? ConvAlgorithm::gemm_1x1 : ConvAlgorithm::implicit_gemm, target);
  // Where the node may use matrix units and its GEMM fills their
  // instructions (3x3 and strided convolutions, grouped ones with enough
  // channels per group), the implicit GEMM multiplies on them: the shared
  // tiles gather B at run-time taps.
  if (conv_algorithm_applies(p, ConvAlgorithm::implicit_gemm) && !matrix_knob_choices(target).empty()) {
    const ConvPlan implicit = choose_conv_plan(p, ConvAlgorithm::implicit_gemm, target);
    if (implicit.gemm.matrix_m != 0) return implicit;
  }
  if (conv_algorithm_applies(p, ConvAlgorithm::depthwise)) return choose_conv_plan(p, ConvAlgorithm::depthwise, target);
  return choose_conv_plan(p, ConvAlgorithm::direct, target);
}

ConvPlan choose_conv_plan(const ConvProblem& p, ConvAlgorithm algorithm, const lower::LowerTarget& target) {
  ConvPlan plan;
  plan.algorithm = algorithm;
  if (algorithm == ConvAlgorithm::gemm_1x1 || algorithm == ConvAlgorithm::implicit_gemm) {
    plan.gemm = choose_gemm_knobs(p.batch * p.groups, p.out_channels_per_group(), p.out_h * p.out_w,
                                  p.in_channels_per_group() * p.kernel_h * p.kernel_w, target);
    return plan;
  }
  plan.conv.workgroup_size = workgroup_size(target);
  if (algorithm == ConvAlgorithm::depthwise) {
    plan.conv.tile_channels = 1;
    plan.conv.tile_width = fit_tile(p.out_w, kDepthwiseWidths);
    while (plan.conv.tile_width > 1 && conv_invocations(p, plan) < min_invocations(target)) plan.conv.tile_width /= 2;
    return plan;
  }
  plan.conv.tile_channels = fit_tile(p.out_channels_per_group(), kTiles);
  plan.conv.tile_width = fit_conv_width(p.out_w);
  while ((plan.conv.tile_channels > 1 || plan.conv.tile_width > 1) &&
         conv_invocations(p, plan) < min_invocations(target))
    shrink(plan.conv.tile_channels, plan.conv.tile_width);
  return plan;
}

std::optional<std::string> matrix_knobs_unfit(const GemmKnobs& knobs, const lower::LowerTarget& target) {
  if (knobs.matrix_m == 0) return std::nullopt;
  const char* precision = kir::matrix_precision_name(static_cast<kir::MatrixPrecision>(knobs.matrix_precision));
  if (precision != matrix_inputs_for(target))
    return std::string("matrix units with ") + precision + " inputs for a node of " +
           (target.storage16.empty() ? std::string("f32") : target.storage16) + " tensors" +
           (target.storage16.empty() && !target.f32_products.empty() ? " with " + target.f32_products + " products"
                                                                      : std::string()) +
           " (f16 and bf16 nodes use their own type's instruction; f32 nodes TF32 or bf16 where the precision "
           "settings allow it)";
  for (const lower::MatrixUnit& unit : target.matrix_units)
    if (unit.inputs == precision && unit.m == knobs.matrix_m && unit.n == knobs.matrix_n &&
        unit.k == knobs.matrix_k && unit.lanes == knobs.matrix_lanes)
      return std::nullopt;
  return "the target has no " + std::string(precision) + " " + std::to_string(knobs.matrix_m) + "x" +
         std::to_string(knobs.matrix_n) + "x" + std::to_string(knobs.matrix_k) + " instruction in " +
         std::to_string(knobs.matrix_lanes) + " lanes";
}

std::vector<GemmKnobs> gemm_knob_space(const lower::LowerTarget& target) {
  std::vector<std::uint32_t> panels;
  for (std::uint32_t panel = max_panel_width(target); panel >= 1; panel /= 2) panels.push_back(panel);
  std::vector<GemmKnobs> space;
  std::vector<std::uint32_t> column_tiles(kGemmTiles.begin(), kGemmTiles.end());
  if (target.cpu_device()) column_tiles.insert(column_tiles.begin(), kCpuGemmColumnTiles.front());
  for (std::uint32_t tile_m : kGemmTiles)
    for (std::uint32_t tile_n : column_tiles)
      for (std::uint32_t k_unroll : {kKUnroll, 1u})
        for (std::uint32_t panel : panels)
          space.push_back({tile_m, tile_n, k_unroll, workgroup_size(target), panel, kVectorWidth});
  if (shared_tiling_fits(target)) {
    // Every GPU class's blocks: double-buffered ones and the discrete
    // class's large ones too, where the device's shared memory holds them.
    std::vector<GemmKnobs> shared;
    for (SharedShape shape : {SharedShape::square, SharedShape::column, SharedShape::row})
      for (std::uint32_t split = 1; split <= kMaxSplitK; split *= 2) shared.push_back(shared_knobs(shape, split));
    GemmKnobs large_single = large_shared_knobs();
    large_single.shared_stages = 1;
    shared.push_back(large_single);
    for (const GemmKnobs& knobs : shared) {
      space.push_back(knobs);
      if (fits(double_buffered(knobs), target)) space.push_back(double_buffered(knobs));
    }
    // The large block with deep K tiles (64 KiB: past CUDA's static 48 KiB,
    // for GPUs that give a block more).
    GemmKnobs deep = large_shared_knobs();
    deep.shared_k_tile = kDeepKTile;
    if (fits(deep, target)) space.push_back(deep);
  }
  for (const GemmKnobs& knobs : matrix_knob_choices(target)) {
    space.push_back(knobs);
    if (fits(double_buffered(knobs), target)) space.push_back(double_buffered(knobs));
  }
  for (const GemmKnobs& knobs : subgroup_knobs(target)) space.push_back(knobs);
  // Matrix-vector blocks read through texel buffers (CPU devices that have them).
  if (target.cpu_device() && target.max_texel_buffer_elements != 0)
    for (std::uint32_t tile_m : kGemmTiles)
      for (std::uint32_t tile_n : kCpuGemmColumnTiles)
        for (std::uint32_t k_unroll : {kKUnroll, 1u})
          if (tile_m <= kMatrixVectorRows) {
            GemmKnobs knobs{tile_m, tile_n, k_unroll, workgroup_size(target), 1, kVectorWidth};
            knobs.texel_loads = true;
            space.push_back(knobs);
          }
  // The subgroup path's lanes span N: with the operands swapped they span M,
  // for products with many rows and few columns.
  for (GemmKnobs knobs : subgroup_knobs(target)) {
    knobs.swap_operands = true;
    space.push_back(knobs);
  }
  return space;
}

std::vector<GemmKnobs> gemm_knob_space(const lower::LowerTarget& target, std::int64_t batch, std::int64_t m,
                                       std::int64_t n, std::int64_t k) {
  // Texel views hold a whole operand (at most one texel per element).
  const std::int64_t largest = std::max(batch * m * k, batch * k * n);
  std::vector<GemmKnobs> space;
  for (const GemmKnobs& knobs : gemm_knob_space(target))
    if (!knobs.texel_loads || largest <= static_cast<std::int64_t>(target.max_texel_buffer_elements))
      space.push_back(knobs);
  return space;
}

bool prefers_implicit_gemm(const ConvProblem& p) {
  const bool plain_gemm = p.kernel_h == 1 && p.kernel_w == 1 && p.stride_h == 1 && p.stride_w == 1 &&
                          p.pad_top == 0 && p.pad_left == 0 && p.out_h == p.in_h && p.out_w == p.in_w;
  return p.in_channels_per_group() > 1 && p.kernel_h == 1 && p.kernel_w == 1 && !plain_gemm &&
         p.out_h * p.out_w >= kMinImplicitGemmColumns;
}

std::vector<ConvPlan> conv_plan_space(const lower::LowerTarget& target) {
  std::vector<ConvPlan> space;
  for (const GemmKnobs& gemm : gemm_knob_space(target)) space.push_back({ConvAlgorithm::gemm_1x1, gemm, {}});
  // A gathered B keeps the register path, which the subgroup knobs' wide
  // lane blocks would only slow down, and cannot trade places with A.
  for (const GemmKnobs& gemm : gemm_knob_space(target))
    if (gemm.subgroup_broadcast == 0 && !gemm.swap_operands)
      space.push_back({ConvAlgorithm::implicit_gemm, gemm, {}});
  for (std::uint32_t channels : kTiles)
    for (std::uint32_t width : kTiles)
      space.push_back({ConvAlgorithm::direct, {}, {channels, width, workgroup_size(target)}});
  for (std::uint32_t width : kDepthwiseWidths)
    space.push_back({ConvAlgorithm::depthwise, {}, {1, width, workgroup_size(target)}});
  return space;
}

}  // namespace kiln::shaders

#define BOOST_TEST_MODULE templates
#include <boost/test/unit_test.hpp>

// The GEMM and convolution kernel templates (shaders/): every knob
// configuration the heuristic can emit runs on Vulkan (lavapipe here) against
// a plain host reference, on shapes with edges (sizes that are not multiples
// of the tiles, padding, stride, dilation, groups, depthwise, batch > 1, bias
// and activation); every configuration also compiles for the offline CUDA and
// HIP targets; the heuristic's choices are checked; and a GEMM measures the
// template's throughput (KILN_GEMM_BENCH_SIZE=2048 for the 2048^3 figure).

#include "backends/registry.h"
#include "graph/ir.h"
#include "shaders/conv_template.h"
#include "shaders/gemm_shared.h"
#include "shaders/gemm_template.h"
#include "shaders/heuristic.h"
#include "src/kernel/interpreter.h"
#include "src/kernel/ir.h"
#include "src/lower/lower.h"
#include "src/lower/target_policy.h"
#include "src/render/cstyle.h"
#include "src/runtime/internal_access.h"
#include "offline_targets.h"

#include <kiln/builder.h>
#include <kiln/error.h>
#include <kiln/kiln.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::shaders {
// Lets Boost.Test print algorithms in failed comparisons (found by ADL).
std::ostream& boost_test_print_type(std::ostream& out, ConvAlgorithm algorithm) {
  return out << conv_algorithm_name(algorithm);
}
}  // namespace kiln::shaders

namespace kb = kiln::backend;
namespace kir = kiln::kir;
namespace sh = kiln::shaders;
using kiln::lower::LowerTarget;

namespace {

// Fixed-seed values in [-1, 1).
std::vector<float> random_values(std::size_t count, std::uint64_t seed) {
  std::vector<float> values(count);
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& v : values) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = static_cast<float>(static_cast<double>(state >> 40) / double(1ull << 24) * 2.0 - 1.0);
  }
  return values;
}

// A device kernels here run on: Vulkan (the suite needs one), or the cpu
// backend (matrix units emulated by one lane, which lavapipe compiles too
// slowly to test).
struct DeviceRunner {
  const kb::Backend& backend;
  std::shared_ptr<kb::Device> device;

  explicit DeviceRunner(const char* name) : backend(kb::get_backend(name)) {
    const auto reason = backend.unavailable_reason();
    BOOST_TEST_REQUIRE(!reason.has_value(), name << " is unavailable: " << reason.value_or(""));
    device = backend.create_device(0);
  }

  // Runs `kernel` with `buffers` (one per kernel buffer, in order); returns
  // them after the run. With `repeats` > 1 the dispatch is submitted that
  // many times and `best_ms` receives the fastest (device time where measured).
  std::vector<std::vector<float>> run(const kir::Kernel& kernel, std::vector<std::vector<float>> buffers,
                                      int repeats = 1, double* best_ms = nullptr) {
    const kb::KernelSource source = kiln::render::make_kernel_source(kernel, backend.language());
    auto loaded = device->load_kernel(source, backend.compiler().compile(source, device->target()));
    std::vector<std::shared_ptr<kb::Buffer>> storage;
    std::vector<kb::BufferBinding> bindings;
    for (const std::vector<float>& values : buffers) {
      const std::uint64_t bytes = std::max<std::size_t>(values.size(), 1) * sizeof(float);
      storage.push_back(device->allocate(bytes));
      if (!values.empty()) device->upload(*storage.back(), 0, std::as_bytes(std::span(values)));
      bindings.push_back({storage.back().get(), 0, bytes});
    }
    auto list = device->create_command_list();
    list->dispatch(*loaded, kir::dispatch_grid(kernel, device->target().max_workgroup_count[0]), bindings);
    list->finish();
    for (int r = 0; r < repeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      list->submit();
      const double host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      const double ms = list->last_device_ms().value_or(host_ms);
      if (best_ms && (r == 0 || ms < *best_ms)) *best_ms = ms;
    }
    for (std::size_t i = 0; i < buffers.size(); ++i)
      if (!buffers[i].empty()) device->download(*storage[i], 0, std::as_writable_bytes(std::span(buffers[i])));
    return buffers;
  }
};

DeviceRunner& vulkan() {
  static DeviceRunner runner("vulkan");
  return runner;
}

DeviceRunner& cpu() {
  static DeviceRunner runner("cpu");
  return runner;
}

void check_close(const std::vector<float>& got, const std::vector<double>& want, const std::string& what,
                 double tolerance = 1e-5) {
  BOOST_TEST_REQUIRE(got.size() == want.size());
  double worst = 0;
  std::size_t worst_at = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double error = std::fabs(got[i] - want[i]) / std::max(1.0, std::fabs(want[i]));
    if (!(error <= worst)) {
      worst = error;
      worst_at = i;
    }
  }
  BOOST_TEST(worst <= tolerance, what << ": element " << worst_at << " is " << got[worst_at] << ", expected "
                                  << want[worst_at] << " (relative error " << worst << ")");
}

// ---- GEMM ----------------------------------------------------------------

// A batch of products with A [batch, M, K] (or transposed), B [K, N] shared
// by every batch entry (or transposed), Y [batch, M, N] = relu(A B + bias[row]).
struct GemmCase {
  std::int64_t batch, m, n, k;
  bool trans_a, trans_b, bias_and_relu;
};

std::string describe(const GemmCase& c) {
  return "batch " + std::to_string(c.batch) + " M " + std::to_string(c.m) + " N " + std::to_string(c.n) + " K " +
         std::to_string(c.k) + (c.trans_a ? " transA" : "") + (c.trans_b ? " transB" : "") +
         (c.bias_and_relu ? " bias+relu" : "");
}

// Where a kernel runs: on Vulkan (lavapipe), the cpu backend or the kernel IR's interpreter.
enum class RunOn : std::uint8_t { vulkan, cpu, interpreter };

std::vector<float> run_last_output(const kir::Kernel& kernel, std::vector<std::vector<float>> buffers, RunOn where) {
  if (where == RunOn::vulkan) return vulkan().run(kernel, std::move(buffers)).back();
  if (where == RunOn::cpu) return cpu().run(kernel, std::move(buffers)).back();
  std::vector<std::span<std::byte>> views;
  for (std::vector<float>& b : buffers) views.push_back(std::as_writable_bytes(std::span(b)));
  kir::interpret(kernel, views);
  return buffers.back();
}

// With matrix units the products' inputs are rounded (values in [-1, 1]):
// each product is off by at most about 2 units of the precision's rounding.
double gemm_tolerance(const GemmCase& c, const sh::GemmKnobs& knobs) {
  if (knobs.matrix_m == 0) return 1e-5;
  const bool bf16 = knobs.matrix_precision == static_cast<std::uint8_t>(kir::MatrixPrecision::bf16);
  return static_cast<double>(std::max<std::int64_t>(c.k, 1)) * (bf16 ? 0x1p-8 : 0x1p-11) * 2 + 1e-5;
}

void check_gemm(const GemmCase& c, const sh::GemmKnobs& knobs, RunOn where = RunOn::vulkan) {
  kir::Kernel kernel("gemm_test");
  sh::GemmProblem p;
  p.batch = c.batch;
  p.m = c.m;
  p.n = c.n;
  p.k = c.k;
  p.a_row_stride = c.trans_a ? 1 : c.k;
  p.a_k_stride = c.trans_a ? c.m : 1;
  p.b_k_stride = c.trans_b ? 1 : c.n;
  p.b_col_stride = c.trans_b ? c.k : 1;
  p.y_row_stride = c.n;
  p.a = kernel.add_buffer("a", kir::ScalarType::f32, kir::Access::read);
  p.b = kernel.add_buffer("b", kir::ScalarType::f32, kir::Access::read);
  const kir::Buf bias = kernel.add_buffer("bias", kir::ScalarType::f32, kir::Access::read);
  p.y = kernel.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
  const std::int64_t a_size = c.m * c.k, y_size = c.m * c.n;
  if (c.batch > 1) {
    p.bases = [&](std::vector<kir::Stmt>&, kir::Expr batch) {
      return sh::GemmBases{batch * kir::i32(a_size), kir::i32(0), batch * kir::i32(y_size)};
    };
    p.a_base_multiple = a_size;
    p.y_base_multiple = y_size;
  }
  if (c.bias_and_relu)
    p.epilogue = [&](kir::Expr acc, kir::Expr row, kir::Expr, kir::Expr) {
      return kir::max(acc + kir::load(bias, row, kir::ScalarType::f32), kir::f32(0.0));
    };
  sh::build_gemm(kernel, p, knobs);
  BOOST_TEST(kernel.global_size == sh::gemm_invocations(p, knobs));

  const std::vector<float> a = random_values(static_cast<std::size_t>(c.batch * a_size), 1);
  const std::vector<float> b = random_values(static_cast<std::size_t>(c.k * c.n), 2);
  const std::vector<float> bias_values = random_values(static_cast<std::size_t>(c.m), 3);
  std::vector<double> want(static_cast<std::size_t>(c.batch * y_size));
  for (std::int64_t t = 0; t < c.batch; ++t)
    for (std::int64_t i = 0; i < c.m; ++i)
      for (std::int64_t j = 0; j < c.n; ++j) {
        double sum = 0;
        for (std::int64_t q = 0; q < c.k; ++q)
          sum += double(a[t * a_size + (c.trans_a ? q * c.m + i : i * c.k + q)]) *
                 b[c.trans_b ? j * c.k + q : q * c.n + j];
        if (c.bias_and_relu) sum = std::max(sum + bias_values[i], 0.0);
        want[t * y_size + i * c.n + j] = sum;
      }
  const auto out = run_last_output(kernel, {a, b, bias_values, std::vector<float>(want.size(), NAN)}, where);
  check_close(out, want,
              std::string(where == RunOn::vulkan ? "" : where == RunOn::cpu ? "cpu " : "interpreted ") + "gemm " +
                  sh::to_string(knobs) + " " +
                  describe(c),
              gemm_tolerance(c, knobs));
}

const GemmCase kGemmCases[] = {
    {1, 9, 11, 13, false, false, false},  // nothing a multiple of any tile
    {2, 13, 70, 9, false, false, true},   // batched, a partial last panel
    {1, 8, 8, 16, true, false, true},     // exact tiles, transposed A
    {3, 5, 6, 7, false, true, true},      // batched, transposed B
    {1, 1, 17, 3, false, false, false},   // a row vector, K below the unroll
    // vec4 loads of A and B (K and N multiples of 4) with a row tail, a
    // column tail (N = 20 with 8-wide tiles) and batched bases; vec4 loads
    // of B only, with a K remainder past the unrolled loop
    {2, 13, 20, 24, false, false, true},
    {1, 5, 16, 22, false, false, false},
};

// lavapipe: a CPU device with subgroups of 8 that broadcast, and texel buffers.
LowerTarget lavapipe() { return {"vulkan", 8, 1024, 32768, kiln::lower::DeviceClass::emulated_gpu, true, std::uint64_t{1} << 27}; }
LowerTarget small_device() { return {"vulkan", 16, 32, 16384}; }
// A GPU with Vulkan's minimum shared memory (every shared configuration fits).
LowerTarget minimal_gpu() { return {"vulkan", 32, 256, 16384}; }
// A GPU whose workgroups are too small for the shared path: register blocking.
LowerTarget register_gpu() { return {"vulkan", 32, 128, 32768}; }

// The shared-memory configurations of the GPU knob space.
std::vector<sh::GemmKnobs> shared_configurations(const LowerTarget& target) {
  std::vector<sh::GemmKnobs> out;
  for (const sh::GemmKnobs& knobs : sh::gemm_knob_space(target))
    if (knobs.shared_k_tile != 0) out.push_back(knobs);
  return out;
}

// Every configuration the heuristic can emit for a generic GPU or lavapipe.
template <typename T>
std::vector<T> union_of(std::vector<T> a, const std::vector<T>& b) {
  for (const T& value : b)
    if (std::find(a.begin(), a.end(), value) == a.end()) a.push_back(value);
  return a;
}

// Cases for the subgroup path (subgroups of 8; every lane block is tile_n
// wide): scalar A and B with a K chunk of 8 and a remainder, batched (N = 70:
// lanes wholly past N); vec4 A and B with a chunk of 32 and a remainder, row
// tails; both operands transposed (scalar, R32 texels) with K below a vec4
// chunk; B transposed with aligned columns (vec4 loads along K, as a
// swapped problem's B) after vec4 A and a remainder. Each with or without a
// bias and ReLU epilogue.
const GemmCase kSubgroupGemmCases[] = {
    {2, 13, 70, 45, false, false, true},
    {1, 9, 36, 72, false, false, true},
    {3, 5, 20, 30, true, true, false},
    {2, 13, 24, 40, false, true, true},
};

BOOST_AUTO_TEST_CASE(every_gemm_configuration_matches_the_reference, *boost::unit_test::label("exhaustive") * boost::unit_test::label("gemm_space")) {
  for (const sh::GemmKnobs& knobs : union_of(sh::gemm_knob_space(LowerTarget{}), sh::gemm_knob_space(lavapipe()))) {
    // The subgroup path has its own cases. Its wide lane blocks take
    // lavapipe 2-25 s of CPU each to compile (4 x 16 to 8 x 64 per lane):
    // those run the batched case with scalar loads and lanes wholly past N;
    // the narrowest block, which shares every line of the path, runs them all
    // (and subgroup_gemm_agrees_with_the_interpreter runs them on the IR's
    // definition).
    if (knobs.subgroup_broadcast != 0) {
      const std::span<const GemmCase> cases(kSubgroupGemmCases);
      // Swapped, a block builds the kernel its unswapped knobs build for the
      // swapped problem: the narrowest runs every case, which checks the swap.
      if (knobs.swap_operands) {
        if (knobs.tile_m * knobs.tile_n <= 16)
          for (const GemmCase& c : cases) check_gemm(c, knobs);
        continue;
      }
      for (const GemmCase& c : knobs.tile_m * knobs.tile_n >= 64 ? cases.first(1) : cases) check_gemm(c, knobs);
      continue;
    }
    // Double-buffered tiles differ from their single-buffered twins only in
    // the K loop's staging: shared_memory_gemm_matches_the_reference runs
    // them (on Vulkan and on the interpreter, which checks for races).
    if (knobs.shared_stages > 1) continue;
    for (const GemmCase& c : kGemmCases) check_gemm(c, knobs);
  }
}

BOOST_AUTO_TEST_CASE(swapped_operands_compute_the_same_product) {
  // The register path with A and B trading places: vec4 loads fall back
  // where the swapped strides deny them, the per-row bias becomes per-column,
  // batch bases trade places.
  sh::GemmKnobs knobs = sh::parse_gemm_knobs("4x8_k4_p2_wg64_v4_swap");
  BOOST_TEST(knobs.swap_operands);
  BOOST_TEST(sh::to_string(knobs).ends_with("_swap"));
  BOOST_TEST((sh::parse_gemm_knobs(sh::to_string(knobs)) == knobs));
  for (const GemmCase& c : kGemmCases) check_gemm(c, knobs);
  // A 1x1 convolution's shape swapped onto the subgroup path: the weight,
  // now B with each column's K run contiguous, is read as vec4 along K
  // (RGBA texels); X, now A with K strided, with scalar loads (R texels).
  kir::Kernel kernel("swapped_conv");
  sh::GemmProblem p;
  p.m = 64, p.n = 10, p.k = 32;
  p.a_row_stride = p.k, p.a_k_stride = 1, p.b_k_stride = p.n, p.b_col_stride = 1, p.y_row_stride = p.n;
  p.a = kernel.add_buffer("w", kir::ScalarType::f32, kir::Access::read);
  p.b = kernel.add_buffer("x", kir::ScalarType::f32, kir::Access::read);
  p.y = kernel.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
  sh::build_gemm(kernel, p, sh::parse_gemm_knobs("8x16_k1_p1_wg64_v4_sg8_tex_swap"));
  BOOST_TEST(kernel.buffers[static_cast<std::size_t>(p.a.index)].texel_width == 4u);
  BOOST_TEST(kernel.buffers[static_cast<std::size_t>(p.b.index)].texel_width == 1u);
  check_gemm({1, 64, 10, 32, false, false, true}, sh::parse_gemm_knobs("2x8_k1_p1_wg64_v4_sg8_tex_swap"));
  // Offered to the tuner on the subgroup path, whose lanes then span M; never for an implicit GEMM's gathered B.
  int swapped = 0;
  for (const sh::GemmKnobs& offered : sh::gemm_knob_space(lavapipe())) swapped += offered.swap_operands;
  BOOST_TEST(swapped >= 2);
  for (const sh::ConvPlan& plan : sh::conv_plan_space(lavapipe()))
    if (plan.gemm.swap_operands) BOOST_TEST(plan.algorithm == sh::ConvAlgorithm::gemm_1x1);
}

BOOST_AUTO_TEST_CASE(subgroup_gemm_configurations_are_offered_where_the_target_broadcasts) {
  std::vector<sh::GemmKnobs> subgroup;
  for (const sh::GemmKnobs& knobs : sh::gemm_knob_space(lavapipe()))
    if (knobs.subgroup_broadcast != 0) subgroup.push_back(knobs);
  BOOST_TEST_REQUIRE(subgroup.size() >= 2u);
  bool wide = false;
  for (const sh::GemmKnobs& knobs : subgroup) {
    BOOST_TEST(knobs.subgroup_broadcast == 8u);
    BOOST_TEST(knobs.texel_loads);
    BOOST_TEST(knobs.workgroup_size % 8 == 0u);
    BOOST_CHECK_NO_THROW(sh::check_knobs(knobs));
    wide = wide || (knobs.tile_m == 8 && knobs.tile_n >= 32);
  }
  BOOST_TEST(wide, "the space has lavapipe's fastest shape: 8 rows x 32+ columns per lane");
  // Not where the target cannot broadcast, has subgroups too wide, or lacks texel buffers.
  LowerTarget no_broadcast = lavapipe();
  no_broadcast.subgroup_broadcast = false;
  LowerTarget wide_subgroups = lavapipe();
  wide_subgroups.subgroup_size = 128;
  for (const LowerTarget& target : {LowerTarget{}, no_broadcast, wide_subgroups})
    for (const sh::GemmKnobs& knobs : sh::gemm_knob_space(target)) BOOST_TEST(knobs.subgroup_broadcast == 0u);
  LowerTarget no_texels = lavapipe();
  no_texels.max_texel_buffer_elements = 0;
  for (const sh::GemmKnobs& knobs : sh::gemm_knob_space(no_texels)) BOOST_TEST(!knobs.texel_loads);
  // A problem's space drops texel loads where an operand exceeds the largest texel buffer.
  LowerTarget small_texels = lavapipe();
  small_texels.max_texel_buffer_elements = 1 << 20;
  auto texel_configurations = [](const std::vector<sh::GemmKnobs>& space) {
    return std::count_if(space.begin(), space.end(), [](const sh::GemmKnobs& k) { return k.texel_loads; });
  };
  BOOST_TEST(texel_configurations(sh::gemm_knob_space(small_texels, 1, 512, 512, 4096)) == 0);
  BOOST_TEST(texel_configurations(sh::gemm_knob_space(small_texels, 1, 512, 512, 512)) ==
             texel_configurations(sh::gemm_knob_space(small_texels)));
  // Convolutions offer it for 1x1 GEMMs only (an implicit GEMM's gathered B keeps the register path).
  for (const sh::ConvPlan& plan : sh::conv_plan_space(lavapipe()))
    if (plan.gemm.subgroup_broadcast != 0) BOOST_TEST(plan.algorithm == sh::ConvAlgorithm::gemm_1x1);
}

BOOST_AUTO_TEST_CASE(subgroup_gemm_shares_a_row_of_a_by_broadcast) {
  // The vec4 path: each lane reads a vec4 of each row per 32 K steps, and
  // every K step broadcasts A's value from the lane that read it; A and B
  // are RGBA32 texel buffers, the bias a storage buffer.
  kir::Kernel kernel("gemm_sg");
  sh::GemmProblem p;
  p.m = 9, p.n = 36, p.k = 72;
  p.a_row_stride = p.k, p.a_k_stride = 1, p.b_k_stride = p.n, p.b_col_stride = 1, p.y_row_stride = p.n;
  p.a = kernel.add_buffer("a", kir::ScalarType::f32, kir::Access::read);
  p.b = kernel.add_buffer("b", kir::ScalarType::f32, kir::Access::read);
  p.y = kernel.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
  sh::GemmKnobs knobs;
  knobs.tile_m = 2, knobs.tile_n = 4, knobs.k_unroll = 1, knobs.panel_width = 1;
  knobs.subgroup_broadcast = 8;
  knobs.texel_loads = true;
  sh::build_gemm(kernel, p, knobs);
  BOOST_TEST(kernel.subgroup_size == 8u);
  BOOST_TEST(kernel.global_size % kernel.workgroup_size == 0);
  BOOST_TEST(kernel.buffers[0].texel_width == 4u);
  BOOST_TEST(kernel.buffers[1].texel_width == 4u);
  BOOST_TEST(kernel.buffers[2].texel_width == 0u);
  const std::string text = kir::print(kernel);
  BOOST_TEST(text.find("subgroup_broadcast(a_lane1_3, lane 7)") != std::string::npos);
  BOOST_TEST(text.find("kc += 32") != std::string::npos);
  // 2 rows x 2 vec4 loads of A per 32-step chunk; the rest are B's vec4s.
  std::size_t vector_loads = 0;
  for (std::size_t at = text.find("a.vec4["); at != std::string::npos; at = text.find("a.vec4[", at + 1)) ++vector_loads;
  BOOST_TEST(vector_loads == 2u);
  // Without texel_loads every operand is a storage buffer; scalar A (K not a
  // multiple of 4 per row) gives a chunk of 8 and an R32 texel A.
  knobs.texel_loads = false;
  kir::Kernel plain("gemm_sg_plain");
  p.a = plain.add_buffer("a", kir::ScalarType::f32, kir::Access::read);
  p.b = plain.add_buffer("b", kir::ScalarType::f32, kir::Access::read);
  p.y = plain.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
  sh::build_gemm(plain, p, knobs);
  for (const kir::BufferParam& b : plain.buffers) BOOST_TEST(b.texel_width == 0u);
  knobs.texel_loads = true;
  p.k = 70, p.a_row_stride = 70;
  kir::Kernel scalar("gemm_sg_scalar");
  p.a = scalar.add_buffer("a", kir::ScalarType::f32, kir::Access::read);
  p.b = scalar.add_buffer("b", kir::ScalarType::f32, kir::Access::read);
  p.y = scalar.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
  sh::build_gemm(scalar, p, knobs);
  BOOST_TEST(scalar.buffers[0].texel_width == 1u);
  BOOST_TEST(kir::print(scalar).find("kc += 8") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(subgroup_gemm_agrees_with_the_interpreter) {
  sh::GemmKnobs knobs;
  knobs.tile_m = 2, knobs.tile_n = 4, knobs.k_unroll = 1, knobs.panel_width = 2;
  knobs.subgroup_broadcast = 8;
  knobs.texel_loads = true;
  for (const GemmCase& c : kSubgroupGemmCases) check_gemm(c, knobs, RunOn::interpreter);
  knobs.texel_loads = false;
  knobs.workgroup_size = 16;
  check_gemm(kSubgroupGemmCases[1], knobs, RunOn::interpreter);
  check_gemm(kSubgroupGemmCases[1], knobs);
}

BOOST_AUTO_TEST_CASE(gemm_uses_vector_loads_only_where_they_fit) {
  auto vector_loads = [](const GemmCase& c, std::uint32_t vector_width) {
    kir::Kernel kernel("gemm_vec");
    sh::GemmProblem p;
    p.m = c.m, p.n = c.n, p.k = c.k;
    p.a_row_stride = c.trans_a ? 1 : c.k;
    p.a_k_stride = c.trans_a ? c.m : 1;
    p.b_k_stride = c.trans_b ? 1 : c.n;
    p.b_col_stride = c.trans_b ? c.k : 1;
    p.y_row_stride = c.n;
    p.a = kernel.add_buffer("a", kir::ScalarType::f32, kir::Access::read);
    p.b = kernel.add_buffer("b", kir::ScalarType::f32, kir::Access::read);
    p.y = kernel.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
    sh::build_gemm(kernel, p, sh::GemmKnobs{8, 8, 4, 64, 8, vector_width});
    const std::string text = kir::print(kernel);
    return std::make_pair(text.find("a.vec4[") != std::string::npos, text.find("b.vec4[") != std::string::npos);
  };
  BOOST_TEST((vector_loads({1, 16, 16, 32, false, false, false}, 4) == std::make_pair(true, true)));
  BOOST_TEST((vector_loads({1, 16, 16, 32, false, false, false}, 1) == std::make_pair(false, false)));
  BOOST_TEST((vector_loads({1, 16, 16, 32, true, false, false}, 4) == std::make_pair(false, true)));   // A along M
  BOOST_TEST((vector_loads({1, 16, 16, 32, false, true, false}, 4) == std::make_pair(true, false)));   // B along K
  BOOST_TEST((vector_loads({1, 16, 18, 32, false, false, false}, 4) == std::make_pair(true, false)));  // N % 4 != 0
  BOOST_TEST((vector_loads({1, 16, 16, 30, false, false, false}, 4) == std::make_pair(false, true)));  // K % 4 != 0
  // Scalar loads still give the right answer on shapes vec4 would fit.
  for (const GemmCase& c : kGemmCases) check_gemm(c, sh::GemmKnobs{8, 8, 4, 64, 8, 1});
}

BOOST_AUTO_TEST_CASE(gemm_stores_rows_as_vec4s_and_reads_a_row_bias_once) {
  // y stores per 8x16 tile, and bias loads, in the printed kernel.
  auto stores = [](std::int64_t m, std::int64_t n, std::int64_t y_col_stride) {
    kir::Kernel kernel("gemm_store");
    sh::GemmProblem p;
    p.m = m, p.n = n, p.k = 8;
    p.a_row_stride = 8;
    p.a_k_stride = 1;
    p.b_k_stride = n;
    p.b_col_stride = 1;
    p.y_row_stride = y_col_stride == 1 ? n : 1;
    p.y_col_stride = y_col_stride;
    p.a = kernel.add_buffer("a", kir::ScalarType::f32, kir::Access::read);
    p.b = kernel.add_buffer("b", kir::ScalarType::f32, kir::Access::read);
    const kir::Buf bias = kernel.add_buffer("bias", kir::ScalarType::f32, kir::Access::read);
    p.y = kernel.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
    p.epilogue = [&](kir::Expr acc, kir::Expr row, kir::Expr, kir::Expr) {
      return acc + kir::load(bias, row, kir::ScalarType::f32);
    };
    sh::build_gemm(kernel, p, sh::GemmKnobs{8, 16, 4, 64, 8, 4});
    const std::string text = kir::print(kernel);
    auto count = [&](const std::string& part) {
      int found = 0;
      for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++found;
      return found;
    };
    return std::array<int, 4>{count("y.vec4["), count("\n  y[") + count("\n    y[") + count("\n      y["),
                              count("bias["), count("if (")};
  };
  // N a multiple of 4: 4 vec4 stores per row, one bias load per row; whole
  // tiles need one guard (the panel), edges a guard per row and column group.
  BOOST_TEST((stores(16, 32, 1) == std::array<int, 4>{32, 0, 8, 1}), boost::test_tools::per_element());
  BOOST_TEST((stores(13, 20, 1) == std::array<int, 4>{32, 0, 8, 8 + 8 * 3}), boost::test_tools::per_element());
  // N = 18 or a strided Y: scalar stores, still one bias load per row.
  BOOST_TEST((stores(16, 18, 1) == std::array<int, 4>{0, 128, 8, 1 + 8 * 15}), boost::test_tools::per_element());
  BOOST_TEST((stores(16, 32, 16) == std::array<int, 4>{0, 128, 8, 1}), boost::test_tools::per_element());
}

// Shapes for the shared-memory path: the kGemmCases plus K spanning several
// K steps with a tail, and a block edge in M and N at once.
const GemmCase kSharedGemmCases[] = {
    {1, 67, 70, 300, false, false, true},  // M, N past one 64x64 block, K = 4.7 steps of 64
    {2, 33, 5, 129, true, true, false},    // batched, both transposed, N thin
    {1, 37, 68, 44, false, false, true},   // vec4 tile loads of A and B, with edges past M and N
};

// Knob sets beyond the heuristic's: ragged cooperative loads (tiles not a
// multiple of the workgroup), odd register blocks and K tiles, a 64-wide
// workgroup with split-K.
const sh::GemmKnobs kOddSharedKnobs[] = {
    {3, 5, 1, 64, 1, 1, 3, 2, 0},   // 8x8 slices of 3x5 blocks, k_step 6
    {2, 1, 1, 64, 1, 1, 5, 4, 2},   // 4 slices of 8x2 invocations, k_step 20
    {1, 4, 1, 128, 1, 1, 7, 1, 0},  // one slice, 8x16 invocations
};

BOOST_AUTO_TEST_CASE(shared_memory_gemm_matches_the_reference) {
  // Every shared configuration the heuristic can emit, on Vulkan (validation
  // on) and on the interpreter (which also checks for shared-memory races).
  std::vector<sh::GemmKnobs> configurations = shared_configurations(LowerTarget{});
  BOOST_TEST_REQUIRE(configurations.size() == 26u);
  configurations.insert(configurations.end(), std::begin(kOddSharedKnobs), std::end(kOddSharedKnobs));
  for (const sh::GemmKnobs& knobs : configurations) {
    for (const GemmCase& c : kSharedGemmCases) check_gemm(c, knobs);
    for (const GemmCase& c : kGemmCases) check_gemm(c, knobs, RunOn::interpreter);
    check_gemm(kSharedGemmCases[0], knobs, RunOn::interpreter);
  }
  // The 64 KiB configuration of GPUs with more shared memory than lavapipe's 32 KiB: on the interpreter.
  const sh::GemmKnobs deep = sh::parse_gemm_knobs("8x8_k1_p1_wg256_v4_s32_st2");
  for (const GemmCase& c : kSharedGemmCases) check_gemm(c, deep, RunOn::interpreter);
}

// Matrix units in the shared GEMM: one-lane subgroups (the emulation any
// target runs; on the cpu backend and the interpreter)
// and the warps and wavefronts of NVIDIA's and AMD's instructions (on the
// interpreter, whose subgroups hold the fragments together), with TF32, f16
// and bf16 inputs, edges past M, N and K, transposes, batches and the
// epilogue. Two multiplies must differ where the inputs round differently.
BOOST_AUTO_TEST_CASE(matrix_unit_gemm_matches_the_reference) {
  const std::string emulated[] = {"1x1_k1_p1_wg4_v4_s8_mma16x8x8tf32l1", "2x1_k1_p1_wg2_v1_s16_mma16x16x16f16l1",
                                  "1x2_k1_p1_wg8_v4_s8_st2_mma16x16x4bf16l1"};
  // The cpu backend compiles each kernel with cc (seconds apiece): one
  // shared case per knob set there, every case on the interpreter.
  for (std::size_t i = 0; i < std::size(emulated); ++i) {
    const sh::GemmKnobs knobs = sh::parse_gemm_knobs(emulated[i]);
    BOOST_TEST(sh::to_string(knobs) == emulated[i]);
    check_gemm(kSharedGemmCases[i % std::size(kSharedGemmCases)], knobs, RunOn::cpu);
    for (const GemmCase& c : kGemmCases) check_gemm(c, knobs, RunOn::interpreter);
  }
  const std::string lanes[] = {"2x1_k1_p1_wg64_v4_s16_mma16x8x8tf32l32", "1x1_k1_p1_wg128_v1_s16_mma16x8x16bf16l32",
                               "1x1_k1_p1_wg64_v4_s16_mma16x16x16f16l64", "2x2_k1_p1_wg128_v4_s32_st2_mma16x8x8tf32l32"};
  for (const std::string& text : lanes) {
    const sh::GemmKnobs knobs = sh::parse_gemm_knobs(text);
    check_gemm(kSharedGemmCases[1], knobs, RunOn::interpreter);
    check_gemm(kGemmCases[1], knobs, RunOn::interpreter);
  }
}

BOOST_AUTO_TEST_CASE(matrix_knobs_are_named_and_checked) {
  const sh::GemmKnobs knobs = sh::parse_gemm_knobs("2x2_k1_p1_wg128_v4_s16_mma16x8x16f16l32");
  BOOST_TEST(knobs.matrix_m == 16u);
  BOOST_TEST(knobs.matrix_n == 8u);
  BOOST_TEST(knobs.matrix_k == 16u);
  BOOST_TEST(knobs.matrix_lanes == 32u);
  BOOST_TEST(knobs.matrix_precision == static_cast<std::uint8_t>(kir::MatrixPrecision::f16));
  for (const char* bad : {"2x2_k1_p1_wg128_v4_mma16x8x16f16l32",       // no shared tiling
                          "2x2_k1_p1_wg128_v4_s8_mma16x8x16f16l32",    // K tile not a multiple of matrix_k
                          "2x2_k1_p1_wg128_v4_s16_mma16x8x16f16l48",   // lanes not a power of two
                          "2x2_k1_p1_wg128_v4_s16_mma16x8x16f8l32",    // unknown precision
                          "2x2_k1_p1_wg128_v4_s16_mma16x8f16l32",      // no K
                          "8x2_k1_p1_wg128_v4_s16_mma16x8x16f16l32",   // 8 instructions along M
                          "2x2_k1_p1_wg128_v4_s16_sk2_mma16x8x16f16l32"}) {  // split-K
    BOOST_TEST_CONTEXT(bad) {
      BOOST_CHECK_THROW(sh::parse_gemm_knobs(bad), kiln::Error);
    }
  }
}

BOOST_AUTO_TEST_CASE(shared_memory_gemm_shape) {
  kir::Kernel kernel("gemm_shared");
  sh::GemmProblem p;
  p.m = 100, p.n = 70, p.k = 50;
  p.a_row_stride = 50, p.a_k_stride = 1, p.b_k_stride = 70, p.b_col_stride = 1, p.y_row_stride = 70;
  p.a = kernel.add_buffer("a", kir::ScalarType::f32, kir::Access::read);
  p.b = kernel.add_buffer("b", kir::ScalarType::f32, kir::Access::read);
  p.y = kernel.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
  const sh::GemmKnobs knobs = sh::choose_gemm_knobs(1, 100, 70, 50, LowerTarget{});
  BOOST_TEST(sh::to_string(knobs) == "4x4_k1_p1_wg256_v4_s16");
  sh::build_gemm(kernel, p, knobs);
  // K = 50 and N = 70 are not multiples of 4: scalar tile loads.
  BOOST_TEST(kir::print(kernel).find(".vec4[") == std::string::npos);
  // 2 x 2 blocks of 64 x 64, one workgroup each; (64 + 64) x 16 floats of tiles.
  BOOST_TEST(kernel.workgroup_size == 256u);
  BOOST_TEST(kernel.global_size == 4 * 256);
  BOOST_TEST(kir::shared_memory_bytes(kernel) == 8192u);
  BOOST_TEST(kir::has_barrier(kernel));
  BOOST_CHECK_NO_THROW(kir::verify(kernel, minimal_gpu().max_shared_memory_bytes));
  // Every configuration fits Vulkan's minimum of 16 KiB.
  for (const sh::GemmKnobs& k : shared_configurations(minimal_gpu())) {
    kir::Kernel each("gemm_shared");
    sh::GemmProblem q = p;
    q.a = each.add_buffer("a", kir::ScalarType::f32, kir::Access::read);
    q.b = each.add_buffer("b", kir::ScalarType::f32, kir::Access::read);
    q.y = each.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
    sh::build_gemm(each, q, k);
    BOOST_CHECK_NO_THROW(kir::verify(each, 16384));
  }
  // Row-major A with K % 4 == 0 and B with N % 4 == 0: vec4 tile loads of both.
  kir::Kernel vec("gemm_shared_vec4");
  sh::GemmProblem v = p;
  v.m = 64, v.n = 64, v.k = 64;
  v.a_row_stride = 64, v.b_k_stride = 64, v.y_row_stride = 64;
  v.a = vec.add_buffer("a", kir::ScalarType::f32, kir::Access::read);
  v.b = vec.add_buffer("b", kir::ScalarType::f32, kir::Access::read);
  v.y = vec.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
  sh::build_gemm(vec, v, knobs);
  const std::string text = kir::print(vec);
  BOOST_TEST(text.find(" = a.vec4[") != std::string::npos);
  BOOST_TEST(text.find(" = b.vec4[") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(subgroup_and_texel_knobs_are_named_and_checked) {
  sh::GemmKnobs knobs;
  knobs.tile_m = 8, knobs.tile_n = 64, knobs.k_unroll = 1, knobs.panel_width = 1;
  knobs.subgroup_broadcast = 8;
  knobs.texel_loads = true;
  BOOST_TEST(sh::to_string(knobs) == "8x64_k1_p1_wg64_v4_sg8_tex");
  BOOST_CHECK_NO_THROW(sh::check_knobs(knobs));
  auto refusal = [](const sh::GemmKnobs& bad) {
    try {
      sh::check_knobs(bad);
    } catch (const kiln::Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  sh::GemmKnobs bad = knobs;
  bad.subgroup_broadcast = 0;  // 64 columns need the subgroup path
  BOOST_TEST(refusal(bad).find("tile_n = 64 is outside [1, 16]") != std::string::npos, refusal(bad));
  bad = knobs;
  bad.subgroup_broadcast = 6;
  BOOST_TEST(refusal(bad).find("subgroup_broadcast = 6") != std::string::npos, refusal(bad));
  bad.subgroup_broadcast = 128;
  BOOST_TEST(refusal(bad).find("subgroup_broadcast = 128") != std::string::npos, refusal(bad));
  bad = knobs;
  bad.tile_n = 4, bad.shared_k_tile = 8, bad.subgroup_broadcast = 0;
  BOOST_TEST(refusal(bad).find("texel_loads needs the register or subgroup path") != std::string::npos, refusal(bad));
}

BOOST_AUTO_TEST_CASE(shared_knobs_are_named_only_when_on) {
  BOOST_TEST(sh::to_string(sh::GemmKnobs{8, 8, 4, 64, 8, 4}) == "8x8_k4_p8_wg64_v4");
  BOOST_TEST(sh::to_string(sh::GemmKnobs{4, 4, 1, 256, 1, 4, 8, 4, 0}) == "4x4_k1_p1_wg256_v4_s8_sk4");
  BOOST_TEST(sh::to_string(sh::GemmKnobs{1, 1, 1, 256, 1, 1, 8, 2, 1}) == "1x1_k1_p1_wg256_v1_s8_sk2_wn1");
  auto names = [](const std::string& text) {
    return [text](const kiln::Error& e) {
      return e.kind() == kiln::ErrorKind::Internal && std::string(e.what()).find(text) != std::string::npos;
    };
  };
  BOOST_CHECK_EXCEPTION(sh::check_knobs(sh::GemmKnobs{4, 4, 1, 256, 1, 1, 0, 2, 0}), kiln::Error,
                        names("need shared tiling"));
  BOOST_CHECK_EXCEPTION(sh::check_knobs(sh::GemmKnobs{4, 4, 1, 256, 1, 1, 8, 3, 0}), kiln::Error,
                        names("split_k = 3 must be a power of two"));
  BOOST_CHECK_EXCEPTION(sh::check_knobs(sh::GemmKnobs{4, 4, 1, 96, 1, 1, 8, 1, 0}), kiln::Error,
                        names("split_k = 1 must be a power of two splitting the workgroup"));
  BOOST_CHECK_EXCEPTION(sh::check_knobs(sh::GemmKnobs{4, 4, 1, 256, 1, 1, 8, 2, 256}), kiln::Error,
                        names("workgroup_n = 256"));
  BOOST_CHECK_EXCEPTION(sh::check_knobs(sh::GemmKnobs{4, 4, 1, 256, 1, 1, 33, 1, 0}), kiln::Error,
                        names("shared_k_tile = 33"));
  // Double-buffered tiles: "_st2", read back; only with shared tiling, at most two sets.
  sh::GemmKnobs two_sets{8, 8, 1, 256, 1, 4, 8, 1, 0};
  two_sets.shared_stages = 2;
  BOOST_TEST(sh::to_string(two_sets) == "8x8_k1_p1_wg256_v4_s8_st2");
  BOOST_TEST(sh::to_string(sh::parse_gemm_knobs("8x8_k1_p1_wg256_v4_s8_st2")) == sh::to_string(two_sets));
  BOOST_TEST((sh::parse_gemm_knobs("8x8_k1_p1_wg256_v4_s8_st2") == two_sets));
  BOOST_TEST(sh::parse_gemm_knobs("8x8_k1_p1_wg256_v4_s8").shared_stages == 1u);
  auto refused = [](const std::string& text) {
    return [text](const kiln::Error& e) {
      return e.kind() == kiln::ErrorKind::InvalidArgument && std::string(e.what()).find(text) != std::string::npos;
    };
  };
  BOOST_CHECK_EXCEPTION(sh::parse_gemm_knobs("8x8_k1_p1_wg256_v4_st2"), kiln::Error, refused("need shared tiling"));
  BOOST_CHECK_EXCEPTION(sh::parse_gemm_knobs("8x8_k1_p1_wg256_v4_s8_st3"), kiln::Error, refused("shared_stages = 3"));
  // Two sets take twice the tiles' memory: 128 x 128 blocks, K tiles of 8.
  sh::GemmKnobs one_set = two_sets;
  one_set.shared_stages = 1;
  BOOST_TEST(sh::detail::shared_gemm_bytes(one_set) == 8192u);
  BOOST_TEST(sh::detail::shared_gemm_bytes(two_sets) == 16384u);
}

// ---- Convolution ---------------------------------------------------------

struct ConvCase {
  std::int64_t batch, in_channels, out_channels, groups, in_h, in_w, kernel_h, kernel_w, stride, dilation;
  std::int64_t pad_top, pad_left, pad_bottom, pad_right;
  bool bias_and_relu;
};

std::string describe(const ConvCase& c) {
  return "N" + std::to_string(c.batch) + " C" + std::to_string(c.in_channels) + "->" +
         std::to_string(c.out_channels) + " g" + std::to_string(c.groups) + " " + std::to_string(c.in_h) + "x" +
         std::to_string(c.in_w) + " k" + std::to_string(c.kernel_h) + "x" + std::to_string(c.kernel_w) + " s" +
         std::to_string(c.stride) + " d" + std::to_string(c.dilation) + " pads " + std::to_string(c.pad_top) +
         "," + std::to_string(c.pad_left) + "," + std::to_string(c.pad_bottom) + "," + std::to_string(c.pad_right) +
         (c.bias_and_relu ? " bias+relu" : "");
}

sh::ConvProblem conv_problem(const ConvCase& c) {
  sh::ConvProblem p;
  p.batch = c.batch;
  p.in_channels = c.in_channels;
  p.out_channels = c.out_channels;
  p.groups = c.groups;
  p.in_h = c.in_h;
  p.in_w = c.in_w;
  p.kernel_h = c.kernel_h;
  p.kernel_w = c.kernel_w;
  p.stride_h = p.stride_w = c.stride;
  p.dilation_h = p.dilation_w = c.dilation;
  p.pad_top = c.pad_top;
  p.pad_left = c.pad_left;
  p.out_h = (c.in_h + c.pad_top + c.pad_bottom - c.dilation * (c.kernel_h - 1) - 1) / c.stride + 1;
  p.out_w = (c.in_w + c.pad_left + c.pad_right - c.dilation * (c.kernel_w - 1) - 1) / c.stride + 1;
  return p;
}

std::vector<double> reference_conv(const sh::ConvProblem& p, const std::vector<float>& x, const std::vector<float>& w,
                                   const std::vector<float>* bias) {
  const std::int64_t cig = p.in_channels_per_group(), cog = p.out_channels_per_group();
  std::vector<double> y(static_cast<std::size_t>(p.batch * p.out_channels * p.out_h * p.out_w));
  std::size_t at = 0;
  for (std::int64_t n = 0; n < p.batch; ++n)
    for (std::int64_t co = 0; co < p.out_channels; ++co)
      for (std::int64_t oh = 0; oh < p.out_h; ++oh)
        for (std::int64_t ow = 0; ow < p.out_w; ++ow) {
          double sum = 0;
          const std::int64_t g = co / cog;
          for (std::int64_t ci = 0; ci < cig; ++ci)
            for (std::int64_t kh = 0; kh < p.kernel_h; ++kh)
              for (std::int64_t kw = 0; kw < p.kernel_w; ++kw) {
                const std::int64_t ih = oh * p.stride_h - p.pad_top + kh * p.dilation_h;
                const std::int64_t iw = ow * p.stride_w - p.pad_left + kw * p.dilation_w;
                if (ih < 0 || ih >= p.in_h || iw < 0 || iw >= p.in_w) continue;
                sum += double(x[((n * p.in_channels + g * cig + ci) * p.in_h + ih) * p.in_w + iw]) *
                       w[((co * cig + ci) * p.kernel_h + kh) * p.kernel_w + kw];
              }
          if (bias) sum = std::max(sum + (*bias)[co], 0.0);
          y[at++] = sum;
        }
  return y;
}

// OIHW -> OIhw4o (per group, blocks of 4 output channels, channel
// innermost, zero padded), written independently of the pack_weights pass.
std::vector<float> pack_oihw4o(const sh::ConvProblem& p, const std::vector<float>& w) {
  const std::int64_t cog = p.out_channels_per_group(), blocks = (cog + 3) / 4;
  const std::int64_t taps = p.in_channels_per_group() * p.kernel_h * p.kernel_w;
  std::vector<float> packed(static_cast<std::size_t>(p.groups * blocks * taps * 4), 0.0f);
  for (std::int64_t co = 0; co < p.out_channels; ++co)
    for (std::int64_t t = 0; t < taps; ++t) {
      const std::int64_t block = co / cog * blocks + co % cog / 4;
      packed[static_cast<std::size_t>((block * taps + t) * 4 + co % cog % 4)] = w[static_cast<std::size_t>(co * taps + t)];
    }
  return packed;
}

bool uses_gemm_knobs(const sh::ConvPlan& plan) {
  return plan.algorithm == sh::ConvAlgorithm::gemm_1x1 || plan.algorithm == sh::ConvAlgorithm::implicit_gemm;
}

void check_conv(const ConvCase& c, const sh::ConvPlan& plan, bool packed_weights = false) {
  kir::Kernel kernel("conv_test");
  sh::ConvProblem p = conv_problem(c);
  p.packed_weights = packed_weights;
  p.x = kernel.add_buffer("x", kir::ScalarType::f32, kir::Access::read);
  p.w = kernel.add_buffer("w", kir::ScalarType::f32, kir::Access::read);
  if (c.bias_and_relu) {
    p.bias = kernel.add_buffer("bias", kir::ScalarType::f32, kir::Access::read);
    p.activation = [](kir::Expr v) { return kir::max(v, kir::f32(0.0)); };
  }
  p.y = kernel.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
  sh::build_conv(kernel, p, plan);
  BOOST_TEST(kernel.global_size == sh::conv_invocations(p, plan));

  const auto x = random_values(static_cast<std::size_t>(c.batch * c.in_channels * c.in_h * c.in_w), 4);
  const auto w = random_values(
      static_cast<std::size_t>(c.out_channels * p.in_channels_per_group() * c.kernel_h * c.kernel_w), 5);
  const auto bias = random_values(static_cast<std::size_t>(c.out_channels), 6);
  const std::vector<double> want = reference_conv(p, x, w, c.bias_and_relu ? &bias : nullptr);
  std::vector<std::vector<float>> buffers = {x, packed_weights ? pack_oihw4o(p, w) : w};
  if (c.bias_and_relu) buffers.push_back(bias);
  buffers.emplace_back(want.size(), NAN);
  const auto out = vulkan().run(kernel, buffers);
  const std::string plan_text = std::string(sh::conv_algorithm_name(plan.algorithm)) + " " +
                                (uses_gemm_knobs(plan) ? sh::to_string(plan.gemm) : sh::to_string(plan.conv));
  check_close(out.back(), want, "conv " + plan_text + (packed_weights ? " packed " : " ") + describe(c));
}

// Cases per algorithm; each runs with every configuration of that algorithm.
const ConvCase kConv1x1Cases[] = {
    {2, 6, 10, 1, 5, 7, 1, 1, 1, 1, 0, 0, 0, 0, true},   // batch 2, 35 pixels
    {1, 8, 6, 2, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, false},   // grouped
};
const ConvCase kDirectCases[] = {
    {1, 3, 10, 1, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1, true},  // 3x3 pad 1, channel and column tails
    {2, 4, 8, 1, 13, 12, 7, 7, 2, 1, 3, 3, 3, 3, false}, // ResNet stem shape, batch 2
    {1, 6, 6, 2, 10, 10, 3, 3, 2, 2, 2, 1, 0, 2, true},  // grouped, dilated, strided, asymmetric pads
    {1, 5, 7, 1, 6, 9, 1, 1, 2, 1, 0, 0, 0, 0, true},    // 1x1 stride 2 (a downsample)
    {1, 2, 3, 1, 5, 5, 2, 4, 1, 1, 0, 2, 1, 1, false},   // rectangular kernel
    {2, 3, 10, 1, 10, 12, 3, 3, 1, 1, 1, 1, 1, 1, true}, // out_w 12: vec4 row stores, 8-wide tiles with a tail
};
// The implicit GEMM computes every convolution; K = Ci/g * kH * kW is split
// as input channel x taps.
const ConvCase kImplicitGemmCases[] = {
    {1, 3, 10, 1, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1, true},  // 3x3 pad 1, row and column tails
    {2, 4, 8, 1, 13, 12, 3, 3, 2, 1, 1, 1, 1, 1, false}, // strided, batch 2
    {1, 6, 6, 2, 10, 10, 3, 3, 2, 2, 2, 1, 0, 2, true},  // grouped, dilated, strided, asymmetric pads
    {1, 5, 7, 1, 6, 9, 1, 1, 2, 1, 0, 0, 0, 0, true},    // 1x1 stride 2, K = 5: a K remainder
    {1, 8, 12, 1, 7, 7, 1, 1, 2, 1, 0, 0, 0, 0, true},   // 1x1 stride 2, K = 8: vec4 loads of W
    {1, 4, 5, 1, 6, 6, 1, 1, 1, 1, 1, 1, 1, 1, true},    // 1x1 padded: every tap can leave the image
    {1, 2, 3, 1, 5, 5, 2, 4, 1, 1, 0, 2, 1, 1, false},   // rectangular kernel
};
const ConvCase kDepthwiseCases[] = {
    {1, 5, 5, 5, 9, 13, 3, 3, 1, 1, 1, 1, 1, 1, true},   // 3x3 stride 1
    {2, 4, 4, 4, 11, 10, 5, 5, 2, 1, 2, 2, 2, 2, false}, // 5x5 stride 2, batch 2
    {1, 3, 6, 3, 7, 7, 3, 3, 2, 1, 1, 1, 1, 1, true},    // channel multiplier 2
    {1, 4, 4, 4, 8, 8, 3, 3, 1, 2, 2, 2, 2, 2, false},   // dilated
};

BOOST_AUTO_TEST_CASE(every_conv_configuration_matches_the_reference, *boost::unit_test::label("exhaustive") * boost::unit_test::label("conv_space")) {
  int runs = 0;
  for (const sh::ConvPlan& plan : union_of(sh::conv_plan_space(LowerTarget{}), sh::conv_plan_space(lavapipe()))) {
    std::span<const ConvCase> cases = kDirectCases;
    if (plan.algorithm == sh::ConvAlgorithm::gemm_1x1) cases = kConv1x1Cases;
    // The GEMM test runs the wide subgroup blocks (slow to compile); the
    // convolution adds nothing to them but its bases, which the narrowest checks.
    if (plan.gemm.subgroup_broadcast != 0 && plan.gemm.tile_m * plan.gemm.tile_n >= 64) continue;
    if (plan.algorithm == sh::ConvAlgorithm::depthwise) cases = kDepthwiseCases;
    if (plan.algorithm == sh::ConvAlgorithm::implicit_gemm) {
      // Blocks of 8 or 1 rows on every case, the others on the first three;
      // other panels on the tail-heaviest case, and no K unrolling on a 1x1
      // strided one (K is unrolled only without taps).
      cases = kImplicitGemmCases;
      if (plan.gemm.k_unroll != 4) cases = cases.subspan(3, 1);
      else if (plan.gemm.panel_width != 8) cases = cases.subspan(2, 1);
      else if (plan.gemm.tile_m != 8 && plan.gemm.tile_m != 1) cases = cases.subspan(0, 3);
    }
    for (const ConvCase& c : cases) {
      BOOST_TEST_REQUIRE(sh::conv_algorithm_applies(conv_problem(c), plan.algorithm), describe(c));
      check_conv(c, plan);
      ++runs;
    }
  }
  BOOST_TEST(runs >= 40);
}

BOOST_AUTO_TEST_CASE(every_direct_configuration_reads_packed_weights) {
  // Channel tails inside a block (10, 6 per group), groups, stride 2,
  // dilation, bias and activation, with tiles that load the weights as vec4
  // (4, 8 channels) and as scalars (1, 2).
  const ConvCase grouped_tail = {1, 8, 12, 2, 9, 10, 3, 3, 2, 1, 1, 1, 1, 1, true};
  const ConvCase dilated_wide = {1, 3, 20, 1, 8, 9, 3, 3, 1, 2, 2, 2, 2, 2, true};
  int runs = 0;
  for (std::uint32_t channels : {8u, 4u, 2u, 1u})
    for (std::uint32_t width : {8u, 4u, 1u}) {
      const sh::ConvPlan plan{sh::ConvAlgorithm::direct, {}, {channels, width, 64}};
      for (const ConvCase& c : kDirectCases) check_conv(c, plan, true);
      check_conv(grouped_tail, plan, true);
      check_conv(dilated_wide, plan, true);
      runs += 7;
    }
  BOOST_TEST(runs == 84);
}

BOOST_AUTO_TEST_CASE(direct_convolution_stores_rows_as_vec4s_where_they_fit) {
  // (vec4 stores, scalar stores, bias loads) of a direct convolution with bias.
  auto stores = [](const ConvCase& c, std::uint32_t width) {
    kir::Kernel kernel("conv_store");
    sh::ConvProblem p = conv_problem(c);
    p.x = kernel.add_buffer("x", kir::ScalarType::f32, kir::Access::read);
    p.w = kernel.add_buffer("w", kir::ScalarType::f32, kir::Access::read);
    p.bias = kernel.add_buffer("bias", kir::ScalarType::f32, kir::Access::read);
    p.y = kernel.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
    sh::build_conv(kernel, p, {sh::ConvAlgorithm::direct, {}, {8, width, 64}});
    const std::string text = kir::print(kernel);
    auto count = [&](const std::string& part) {
      int found = 0;
      for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++found;
      return found;
    };
    return std::array<int, 3>{count("y.vec4["), count("y["), count("bias[")};
  };
  const ConvCase& aligned = kDirectCases[5];  // out_w 12
  BOOST_TEST((stores(aligned, 8) == std::array<int, 3>{16, 0, 8}), boost::test_tools::per_element());
  BOOST_TEST((stores(aligned, 4) == std::array<int, 3>{8, 0, 8}), boost::test_tools::per_element());
  // out_w 11: rows of Y are not 4-aligned, so scalar stores; one bias load per channel all the same.
  BOOST_TEST((stores(kDirectCases[0], 8) == std::array<int, 3>{0, 64, 8}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(packed_weights_load_as_vec4_with_four_channel_blocks) {
  auto weight_vectors = [](std::uint32_t channels, bool packed) {
    kir::Kernel kernel("conv_vec");
    sh::ConvProblem p = conv_problem(kDirectCases[0]);
    p.packed_weights = packed;
    p.x = kernel.add_buffer("x", kir::ScalarType::f32, kir::Access::read);
    p.w = kernel.add_buffer("w", kir::ScalarType::f32, kir::Access::read);
    p.y = kernel.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
    sh::build_conv(kernel, p, {sh::ConvAlgorithm::direct, {}, {channels, 4, 64}});
    return kir::print(kernel).find("w.vec4[") != std::string::npos;
  };
  BOOST_TEST(weight_vectors(4, true));
  BOOST_TEST(weight_vectors(8, true));
  BOOST_TEST(!weight_vectors(2, true));
  BOOST_TEST(!weight_vectors(4, false));  // OIHW (eager): scalar loads, as before
  // Packed weights exist only for the direct template.
  sh::ConvProblem pointwise = conv_problem(kConv1x1Cases[0]);
  pointwise.packed_weights = true;
  BOOST_TEST(!sh::conv_algorithm_applies(pointwise, sh::ConvAlgorithm::gemm_1x1));
  BOOST_TEST(sh::choose_conv_plan(pointwise, lavapipe()).algorithm == sh::ConvAlgorithm::direct);
  sh::ConvProblem depthwise = conv_problem(kDepthwiseCases[0]);
  depthwise.packed_weights = true;
  BOOST_TEST(!sh::conv_algorithm_applies(depthwise, sh::ConvAlgorithm::depthwise));
}

BOOST_AUTO_TEST_CASE(direct_convolution_computes_depthwise_and_1x1_too) {
  // The direct kernel applies to every convolution, including those the
  // heuristic sends elsewhere.
  const sh::ConvPlan direct{sh::ConvAlgorithm::direct, {}, {2, 4, 64}};
  check_conv(kConv1x1Cases[0], direct);
  check_conv(kDepthwiseCases[2], direct);
}

// Runs `plan` on `c` (no bias) in the kernel IR's interpreter, its executable
// definition, and checks it against the reference (with matrix units, within
// their inputs' rounding: gemm_tolerance's bound for K = Ci/g * kH * kW).
void check_interpreted_conv(const ConvCase& c, const sh::ConvPlan& plan) {
  kir::Kernel kernel("conv_interpreted");
  sh::ConvProblem p = conv_problem(c);
  p.x = kernel.add_buffer("x", kir::ScalarType::f32, kir::Access::read);
  p.w = kernel.add_buffer("w", kir::ScalarType::f32, kir::Access::read);
  p.y = kernel.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
  sh::build_conv(kernel, p, plan);
  auto x = random_values(static_cast<std::size_t>(c.batch * c.in_channels * c.in_h * c.in_w), 7);
  auto w = random_values(
      static_cast<std::size_t>(c.out_channels * p.in_channels_per_group() * c.kernel_h * c.kernel_w), 8);
  const std::vector<double> want = reference_conv(p, x, w, nullptr);
  std::vector<float> y(want.size(), NAN);
  std::vector<std::span<std::byte>> buffers = {std::as_writable_bytes(std::span(x)),
                                               std::as_writable_bytes(std::span(w)),
                                               std::as_writable_bytes(std::span(y))};
  kir::interpret(kernel, buffers);
  const GemmCase as_gemm{1, 1, 1, p.in_channels_per_group() * c.kernel_h * c.kernel_w, false, false, false};
  check_close(y, want,
              std::string("interpreted ") + sh::conv_algorithm_name(plan.algorithm) + " " +
                  (uses_gemm_knobs(plan) ? sh::to_string(plan.gemm) : sh::to_string(plan.conv)) + " " + describe(c),
              gemm_tolerance(as_gemm, plan.gemm));
}

// Implicit GEMM with taps on the shared-memory tiles and matrix units: B is
// gathered at run-time K indices (input channel, kernel row and column),
// through every edge the cases have (padding, stride, dilation, groups,
// rectangular kernels), with one lane emulating an instruction and with the
// instructions' own lane layouts.
BOOST_AUTO_TEST_CASE(implicit_gemm_with_taps_runs_on_matrix_units) {
  for (const char* knobs : {"1x1_k1_p1_wg4_v4_s8_mma16x8x8tf32l1", "2x2_k1_p1_wg128_v4_s32_mma16x8x16f16l32",
                            "1x1_k1_p1_wg256_v4_s16_mma16x16x4tf32l64"})
    for (const ConvCase& c : kImplicitGemmCases)
      check_interpreted_conv(c, {sh::ConvAlgorithm::implicit_gemm, sh::parse_gemm_knobs(knobs), {}});
}

BOOST_AUTO_TEST_CASE(templates_agree_with_the_interpreter) {
  // The interpreter is the kernel IR's definition: tail-heavy cases must give
  // the Vulkan result there too.
  check_interpreted_conv(kDirectCases[2], {sh::ConvAlgorithm::direct, {}, {4, 4, 64}});
  for (const ConvCase& c : kImplicitGemmCases)
    check_interpreted_conv(c, {sh::ConvAlgorithm::implicit_gemm, sh::GemmKnobs{8, 16, 4, 64, 2, 4}, {}});
  // Shared-memory tiling with split-K: a gathered B (1x1 taps) and a strided one.
  const sh::GemmKnobs shared{2, 2, 1, 64, 1, 1, 4, 2, 0};
  for (const ConvCase& c : kImplicitGemmCases)
    check_interpreted_conv(c, {sh::ConvAlgorithm::implicit_gemm, shared, {}});
  for (const ConvCase& c : kConv1x1Cases) check_interpreted_conv(c, {sh::ConvAlgorithm::gemm_1x1, shared, {}});
}

BOOST_AUTO_TEST_CASE(implicit_gemm_has_no_index_division_in_its_k_loop) {
  // Per column the input origin is computed once; the K loop over input
  // channels unrolls the taps, so it only adds constants and checks bounds.
  auto k_loop_text = [](const ConvCase& c) {
    kir::Kernel kernel("conv_k_loop");
    sh::ConvProblem p = conv_problem(c);
    p.x = kernel.add_buffer("x", kir::ScalarType::f32, kir::Access::read);
    p.w = kernel.add_buffer("w", kir::ScalarType::f32, kir::Access::read);
    p.y = kernel.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
    sh::build_conv(kernel, p, {sh::ConvAlgorithm::implicit_gemm, sh::GemmKnobs{4, 8, 4, 64, 8, 4}, {}});
    std::string loops;
    for (const kir::Stmt& s : kernel.body)
      if (s.kind == kir::StmtKind::loop) {
        kir::Kernel loop_only(kernel.name);
        loop_only.buffers = kernel.buffers;
        loop_only.body = s.body;
        loops += kir::print(loop_only);
      }
    return loops;
  };
  for (const ConvCase& c : {kImplicitGemmCases[2], kImplicitGemmCases[6]}) {
    const std::string text = k_loop_text(c);
    BOOST_TEST(!text.empty(), describe(c));
    BOOST_TEST(text.find(" / ") == std::string::npos, describe(c) << ":\n" << text);
    BOOST_TEST(text.find(" % ") == std::string::npos, describe(c) << ":\n" << text);
  }
}

BOOST_AUTO_TEST_CASE(template_errors_name_the_problem) {
  kir::Kernel kernel("bad");
  sh::ConvProblem p = conv_problem(kDirectCases[0]);
  p.x = kernel.add_buffer("x", kir::ScalarType::f32, kir::Access::read);
  p.w = kernel.add_buffer("w", kir::ScalarType::f32, kir::Access::read);
  p.y = kernel.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
  auto names = [](const std::string& text) {
    return [text](const kiln::Error& e) {
      return e.kind() == kiln::ErrorKind::Internal && std::string(e.what()).find(text) != std::string::npos;
    };
  };
  BOOST_CHECK_EXCEPTION(sh::build_conv(kernel, p, {sh::ConvAlgorithm::gemm_1x1, {}, {}}), kiln::Error,
                        names("gemm_1x1 does not apply"));
  BOOST_CHECK_EXCEPTION(sh::build_conv(kernel, p, {sh::ConvAlgorithm::direct, {}, {9, 4, 64}}), kiln::Error,
                        names("tile_channels = 9"));
  BOOST_CHECK_EXCEPTION(sh::check_knobs(sh::GemmKnobs{4, 4, 0, 64, 8}), kiln::Error, names("k_unroll = 0"));
}

// ---- The heuristic -------------------------------------------------------

template <typename T>
bool contains(const std::vector<T>& space, const T& value) {
  return std::find(space.begin(), space.end(), value) != space.end();
}

BOOST_AUTO_TEST_CASE(gemm_knobs_follow_the_shape) {
  const sh::GemmKnobs big = sh::choose_gemm_knobs(1, 2048, 2048, 2048, lavapipe());
  BOOST_TEST(big.tile_m == 8u);
  BOOST_TEST(big.tile_n == 16u);  // CPU devices: 16 columns (fewer loads per multiply-add)
  const sh::GemmKnobs gpu = sh::choose_gemm_knobs(1, 2048, 2048, 2048, register_gpu());
  BOOST_TEST(gpu.tile_m == 8u);
  BOOST_TEST(gpu.tile_n == 8u);  // GPUs: 64 accumulators fit the register file
  BOOST_TEST(big.vector_width == 4u);  // vec4 loads: 1.5x less CPU time than scalar on lavapipe
  BOOST_TEST(big.k_unroll == 4u);
  // A matrix-vector product blocks only along N.
  const sh::GemmKnobs row = sh::choose_gemm_knobs(1, 1, 4096, 512, lavapipe());
  BOOST_TEST(row.tile_m == 1u);
  BOOST_TEST(row.tile_n == 16u);
  // On a CPU device with texel buffers, read through them (1.9-3.5x the
  // bandwidth on lavapipe), and not shrunk for invocations; not where an
  // operand outgrows the largest texel buffer, nor on a GPU.
  BOOST_TEST(row.texel_loads);
  BOOST_TEST(sh::choose_gemm_knobs(1, 1, 768, 768, lavapipe()).tile_n == 16u);
  BOOST_TEST(sh::choose_gemm_knobs(1, 2, 768, 768, lavapipe()).texel_loads);
  BOOST_TEST(!sh::choose_gemm_knobs(1, 8, 768, 768, lavapipe()).texel_loads);
  BOOST_TEST(!sh::choose_gemm_knobs(1, 1, 1 << 20, 256, lavapipe()).texel_loads);
  BOOST_TEST(!sh::choose_gemm_knobs(1, 1, 4096, 512, register_gpu()).texel_loads);
  // 16-bit operands only where the device has 16-bit texel views.
  LowerTarget bf16_operands = lavapipe();
  bf16_operands.storage16 = "bf16";
  BOOST_TEST(!sh::choose_gemm_knobs(1, 1, 4096, 512, bf16_operands).texel_loads);
  bf16_operands.texel_16bit = true;
  BOOST_TEST(sh::choose_gemm_knobs(1, 1, 4096, 512, bf16_operands).texel_loads);
  BOOST_TEST(!sh::choose_gemm_knobs(1, 1, 4096, 512, LowerTarget{}).texel_loads);
  // Short K is not unrolled; a tail of more than an eighth picks a smaller tile.
  BOOST_TEST(sh::choose_gemm_knobs(1, 64, 64, 3, lavapipe()).k_unroll == 1u);
  BOOST_TEST(sh::choose_gemm_knobs(1, 6, 1024, 64, lavapipe()).tile_m == 2u);
  // Too few invocations to fill the device: smaller blocks.
  const sh::GemmKnobs tiny = sh::choose_gemm_knobs(1, 16, 16, 64, register_gpu());
  BOOST_TEST(tiny.tile_m * tiny.tile_n < 64u);
  BOOST_TEST(tiny.panel_width <= 16u / tiny.tile_n);  // no wider than the product
  // The panel of B stays within the cache budget: 2048 x 16 columns x 4 blocks is 512 KiB.
  BOOST_TEST(big.panel_width == 4u);
  BOOST_TEST(sh::choose_gemm_knobs(1, 2048, 2048, 2048, register_gpu()).panel_width == 8u);
  BOOST_TEST(sh::choose_gemm_knobs(1, 2048, 2048, 256, register_gpu()).panel_width == 32u);
  // The device's workgroup limit is respected.
  BOOST_TEST(sh::choose_gemm_knobs(1, 512, 512, 512, small_device()).workgroup_size == 32u);
}

BOOST_AUTO_TEST_CASE(gpu_gemm_knobs_use_shared_memory_and_split_k) {
  auto choose = [](std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k) {
    return sh::to_string(sh::choose_gemm_knobs(batch, m, n, k, LowerTarget{}));
  };
  // Large products: 64x64 blocks of 256 invocations, 16 K values per step.
  BOOST_TEST(choose(1, 2048, 2048, 2048) == "4x4_k1_p1_wg256_v4_s16");
  BOOST_TEST(choose(1, 197, 3072, 768) == "4x4_k1_p1_wg256_v4_s16");  // ViT-B MLP at batch 1: 192 blocks
  // Few blocks and a long K: split K among the workgroup's invocations.
  BOOST_TEST(choose(1, 64, 64, 4096) == "4x4_k1_p1_wg256_v4_s8_sk8");
  BOOST_TEST(choose(1, 64, 64, 600) == "4x4_k1_p1_wg256_v4_s8_sk2");
  BOOST_TEST(choose(1, 64, 64, 300) == "4x4_k1_p1_wg256_v4_s16");  // K too short to split
  BOOST_TEST(choose(16, 64, 64, 4096) == "4x4_k1_p1_wg256_v4_s8_sk4");  // the batch fills the device sooner
  // A classifier (1000 classes, 2048 features, batch 1): a column of 1x1 blocks, K split 8 ways.
  BOOST_TEST(choose(1, 1000, 1, 2048) == "1x1_k1_p1_wg256_v4_s8_sk8_wn1");
  // A row vector times a matrix: a row of 1x1 blocks.
  BOOST_TEST(choose(1, 1, 4096, 512) == "1x1_k1_p1_wg256_v4_s8_sk2_wn128");
  // CPU devices and GPUs without room for 256-invocation workgroups keep the register path.
  BOOST_TEST(sh::choose_gemm_knobs(1, 2048, 2048, 2048, lavapipe()).shared_k_tile == 0u);
  BOOST_TEST(sh::choose_gemm_knobs(1, 2048, 2048, 2048, register_gpu()).shared_k_tile == 0u);
  BOOST_TEST(sh::choose_gemm_knobs(1, 2048, 2048, 2048, LowerTarget{"vulkan", 32, 1024, 4096}).shared_k_tile == 0u);
  BOOST_TEST(sh::choose_gemm_knobs(1, 2048, 2048, 2048, minimal_gpu()).shared_k_tile == 16u);
  // 1x1 convolutions take the GEMM's choice.
  BOOST_TEST(sh::to_string(sh::choose_conv_plan(conv_problem({1, 64, 256, 1, 56, 56, 1, 1, 1, 1, 0, 0, 0, 0, false}),
                                                LowerTarget{})
                               .gemm) == "4x4_k1_p1_wg256_v4_s16");
}

// The device classes' GEMMs: a discrete GPU takes 128 x 128 double-buffered
// blocks where a product has enough of them, and double-buffers the
// integrated class's blocks elsewhere; an integrated GPU (the default
// target) keeps single-buffered 64 x 64 blocks.
BOOST_AUTO_TEST_CASE(discrete_gpus_take_large_double_buffered_blocks) {
  LowerTarget discrete{"cuda", 32, 1024, 49152};
  discrete.device_class = kiln::lower::DeviceClass::discrete_gpu;
  LowerTarget integrated = discrete;
  integrated.device_class = kiln::lower::DeviceClass::integrated_gpu;
  auto choose = [](const LowerTarget& target, std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k) {
    return sh::to_string(sh::choose_gemm_knobs(batch, m, n, k, target));
  };
  // 16 x 16 blocks of 128 x 128: large blocks.
  BOOST_TEST(choose(discrete, 1, 2048, 2048, 2048) == "8x8_k1_p1_wg256_v4_s8_st2");
  BOOST_TEST(choose(integrated, 1, 2048, 2048, 2048) == "4x4_k1_p1_wg256_v4_s16");
  // ResNet-50's 3x3 convolution of stage 2 at batch 16 (M 64, N 16 x 56 x 56):
  // a single row of 128-row blocks still makes 392 of them.
  BOOST_TEST(choose(discrete, 1, 64, 16 * 56 * 56, 576) == "8x8_k1_p1_wg256_v4_s8_st2");
  // ViT-B's MLP at batch 1 (197 x 3072): 2 x 24 large blocks are too few; 64 x 64 ones, double-buffered.
  BOOST_TEST(choose(discrete, 1, 197, 3072, 768) == "4x4_k1_p1_wg256_v4_s16_st2");
  // Split-K and the thin shapes keep their arrangement, double-buffered.
  BOOST_TEST(choose(discrete, 1, 64, 64, 4096) == "4x4_k1_p1_wg256_v4_s8_sk8_st2");
  BOOST_TEST(choose(discrete, 1, 1000, 1, 2048) == "1x1_k1_p1_wg256_v4_s8_sk8_st2_wn1");
  BOOST_TEST(choose(integrated, 1, 1000, 1, 2048) == "1x1_k1_p1_wg256_v4_s8_sk8_wn1");
  // Where two sets do not fit, one: 16 KiB of shared memory holds the large block's two but not split-K's.
  LowerTarget small = discrete;
  small.max_shared_memory_bytes = 16384;
  BOOST_TEST(choose(small, 1, 2048, 2048, 2048) == "8x8_k1_p1_wg256_v4_s8_st2");
  BOOST_TEST(choose(small, 1, 64, 64, 4096) == "4x4_k1_p1_wg256_v4_s8_sk8");
  // Matrix units on a discrete GPU: double-buffered too.
  LowerTarget tensor_cores = discrete;
  tensor_cores.matrix_units = {{"f16", 16, 8, 16, 32}};
  tensor_cores.storage16 = "f16";
  const sh::GemmKnobs matrix = sh::choose_gemm_knobs(1, 2048, 2048, 2048, tensor_cores);
  BOOST_TEST(matrix.matrix_m == 16u);
  BOOST_TEST(matrix.shared_stages == 2u);
  // The knob space offers every class's blocks to the tuner on any GPU that fits them.
  const std::vector<sh::GemmKnobs> space = sh::gemm_knob_space(integrated);
  for (const char* text : {"8x8_k1_p1_wg256_v4_s8_st2", "8x8_k1_p1_wg256_v4_s8", "4x4_k1_p1_wg256_v4_s16_st2"})
    BOOST_TEST_CONTEXT(text) {
      BOOST_TEST(std::count(space.begin(), space.end(), sh::parse_gemm_knobs(text)) == 1);
    }
  // Deep K tiles need 64 KiB: offered where a block may have it (Hopper's 227 KiB), not within 48 KiB.
  const sh::GemmKnobs deep = sh::parse_gemm_knobs("8x8_k1_p1_wg256_v4_s32_st2");
  BOOST_TEST(sh::detail::shared_gemm_bytes(deep) == 65536u);
  BOOST_TEST(std::count(space.begin(), space.end(), deep) == 0);
  LowerTarget hopper = discrete;
  hopper.max_shared_memory_bytes = 227 * 1024;
  const std::vector<sh::GemmKnobs> roomy = sh::gemm_knob_space(hopper);
  BOOST_TEST(std::count(roomy.begin(), roomy.end(), deep) == 1);
}

BOOST_AUTO_TEST_CASE(the_device_class_comes_from_the_capability_record) {
  using kiln::lower::DeviceClass;
  // The record's facts, never the backend's or the device type's name.
  auto class_of = [](bool cpu_cores, bool host_code, bool discrete_gpu) {
    kiln::backend::TargetDesc t;
    t.backend = "vulkan";
    t.device_type = "other";
    t.cpu_cores = cpu_cores;
    t.host_code = host_code;
    t.discrete_gpu = discrete_gpu;
    return kiln::lower::device_class(t);
  };
  BOOST_TEST((class_of(false, false, true) == DeviceClass::discrete_gpu));
  BOOST_TEST((class_of(false, false, false) == DeviceClass::integrated_gpu));  // integrated, virtual, unstated
  BOOST_TEST((class_of(true, false, false) == DeviceClass::emulated_gpu));     // lavapipe
  BOOST_TEST((class_of(true, true, false) == DeviceClass::host_cpu));          // the cpu backend
  // What the backends report: CUDA's and HIP's offline targets are discrete,
  // Vulkan's (any GPU, mobile ones too) integrated; the cpu backend's device
  // is the host's.
  for (const char* name : {"cuda", "hip", "vulkan"})
    for (const kiln::backend::TargetDesc& target : kiln::backend::get_backend(name).offline_targets())
      BOOST_TEST_CONTEXT(name << " " << target.arch) {
        BOOST_TEST((kiln::lower::device_class(target) ==
                    (std::string(name) == "vulkan" ? DeviceClass::integrated_gpu : DeviceClass::discrete_gpu)));
      }
  if (auto cpu = kiln::backend::get_backend("cpu").create_device(0))
    BOOST_TEST((kiln::lower::device_class(cpu->target()) == DeviceClass::host_cpu));
  // The policy hands its class to lowering, and the CPU classes are CPU devices.
  kiln::backend::TargetDesc lavapipe_desc;
  lavapipe_desc.backend = "vulkan";
  lavapipe_desc.cpu_cores = true;
  const kiln::lower::TargetPolicy policy = kiln::lower::target_policy(lavapipe_desc);
  BOOST_TEST((policy.lower.device_class == DeviceClass::emulated_gpu));
  BOOST_TEST(policy.cpu_device());
  BOOST_TEST(policy.pass_options({}).cpu_device);
  BOOST_TEST(std::string(kiln::lower::device_class_name(DeviceClass::discrete_gpu)) == "discrete-gpu");
}

BOOST_AUTO_TEST_CASE(conv_plans_follow_the_shape) {
  auto problem = [](std::int64_t c, std::int64_t co, std::int64_t groups, std::int64_t size, std::int64_t kernel,
                    std::int64_t stride) {
    const std::int64_t pad = kernel / 2;
    return conv_problem({1, c, co, groups, size, size, kernel, kernel, stride, 1, pad, pad, pad, pad, false});
  };
  const sh::ConvPlan pointwise = sh::choose_conv_plan(problem(64, 256, 1, 56, 1, 1), lavapipe());
  BOOST_TEST(pointwise.algorithm == sh::ConvAlgorithm::gemm_1x1);
  BOOST_TEST(pointwise.gemm.tile_m * pointwise.gemm.tile_n == 128u);  // 8x16 on a CPU device
  BOOST_TEST(pointwise.gemm.panel_width == 8u);
  // Strided 1x1 convolutions (ResNet's downsamples) with at least 256 output
  // pixels: implicit GEMM, with the GEMM's knobs for M = Co, N = out pixels, K = Ci.
  const sh::ConvPlan downsample = sh::choose_conv_plan(problem(256, 512, 1, 56, 1, 2), lavapipe());
  BOOST_TEST(downsample.algorithm == sh::ConvAlgorithm::implicit_gemm);
  BOOST_TEST((downsample.gemm == sh::choose_gemm_knobs(1, 512, 28 * 28, 256, lavapipe())));
  BOOST_TEST(downsample.gemm.tile_n == 16u);
  // A 7x7 output (no room for 16-column blocks) and 3x3 windows: direct, 8x8.
  for (const sh::ConvProblem& p : {problem(1024, 2048, 1, 14, 1, 2), problem(256, 256, 1, 14, 3, 1),
                                   problem(512, 512, 1, 7, 3, 1), problem(64, 64, 8, 28, 3, 1)}) {
    const sh::ConvPlan plan = sh::choose_conv_plan(p, lavapipe());
    BOOST_TEST(plan.algorithm == sh::ConvAlgorithm::direct);
    BOOST_TEST(plan.conv.tile_channels == 8u);
    BOOST_TEST(plan.conv.tile_width == 8u);  // 7 or 14 columns: one or two wasted, still fastest
  }
  const sh::ConvPlan depthwise = sh::choose_conv_plan(problem(96, 96, 96, 112, 3, 2), lavapipe());
  BOOST_TEST(depthwise.algorithm == sh::ConvAlgorithm::depthwise);
  BOOST_TEST(depthwise.conv.tile_channels == 1u);
  BOOST_TEST(depthwise.conv.tile_width == 8u);
  const sh::ConvPlan stem = sh::choose_conv_plan(problem(3, 64, 1, 224, 7, 2), lavapipe());
  BOOST_TEST(stem.algorithm == sh::ConvAlgorithm::direct);
  BOOST_TEST(stem.conv.tile_channels == 8u);
  BOOST_TEST(stem.conv.tile_width == 8u);
  // One input channel: the depthwise template.
  BOOST_TEST(sh::choose_conv_plan(problem(1, 8, 1, 28, 3, 1), lavapipe()).algorithm == sh::ConvAlgorithm::depthwise);
  // 3 columns: every block wider than 1 would waste more than a quarter of the row.
  BOOST_TEST(sh::choose_conv_plan(problem(64, 64, 1, 3, 3, 1), lavapipe()).conv.tile_width == 1u);
  BOOST_TEST(sh::choose_conv_plan(problem(64, 64, 1, 12, 3, 1), lavapipe()).conv.tile_width == 4u);
}

// An NVIDIA GPU of sm_80 or later as lowering sees it (its tensor cores),
// lowering a node of `storage16` tensors.
LowerTarget tensor_core_gpu(const std::string& storage16) {
  LowerTarget target{"cuda", 32, 1024, 49152};
  for (const char* inputs : {"tf32", "f16", "bf16"})
    target.matrix_units.push_back({inputs, 16, 8, std::string(inputs) == "tf32" ? 8u : 16u, 32});
  target.storage16 = storage16;
  return target;
}

// Matrix units where the node's 16-bit inputs are of an instruction's
// precision (rounding them to it is exact), for products of at least an
// instruction tile each way; f32 products keep f32 arithmetic unless the
// precision settings allow more (the next case).
BOOST_AUTO_TEST_CASE(gpu_gemm_knobs_use_matrix_units_for_16bit_inputs) {
  auto choose = [](const LowerTarget& target, std::int64_t m, std::int64_t n, std::int64_t k) {
    return sh::to_string(sh::choose_gemm_knobs(1, m, n, k, target));
  };
  BOOST_TEST(choose(tensor_core_gpu("f16"), 2048, 2048, 2048) == "2x4_k1_p1_wg128_v4_s32_mma16x8x16f16l32");
  BOOST_TEST(choose(tensor_core_gpu("bf16"), 197, 3072, 768) == "2x4_k1_p1_wg128_v4_s32_mma16x8x16bf16l32");
  BOOST_TEST(choose(tensor_core_gpu(""), 2048, 2048, 2048) == "4x4_k1_p1_wg256_v4_s16");
  BOOST_TEST(choose(tensor_core_gpu("bf16+f16"), 2048, 2048, 2048) == "4x4_k1_p1_wg256_v4_s16");
  BOOST_TEST(choose(tensor_core_gpu("f16"), 1000, 1, 2048) == "1x1_k1_p1_wg256_v4_s8_sk8_wn1");  // one column
  BOOST_TEST(choose(tensor_core_gpu("f16"), 64, 64, 16) == "4x4_k1_p1_wg256_v4_s16");           // one K step
  LowerTarget mi200{"hip", 64, 1024, 65536};
  mi200.matrix_units = {{"tf32", 16, 16, 4, 64}, {"f16", 16, 16, 16, 64}, {"bf16", 16, 16, 16, 64}};
  mi200.storage16 = "f16";
  BOOST_TEST(choose(mi200, 512, 512, 512) == "2x2_k1_p1_wg256_v4_s32_mma16x16x16f16l64");
  // The block (64 x 64 elements, K tiles of 32) fits 16 KiB of shared memory.
  BOOST_TEST(sh::detail::shared_gemm_bytes(sh::parse_gemm_knobs("2x4_k1_p1_wg128_v4_s32_mma16x8x16f16l32")) == 16384u);
  for (const std::string storage16 : {"f16", "bf16"})
    for (const sh::GemmKnobs& knobs : sh::gemm_knob_space(tensor_core_gpu(storage16)))
      if (knobs.matrix_m != 0) BOOST_TEST(knobs.matrix_precision != static_cast<std::uint8_t>(kir::MatrixPrecision::tf32));
}

// f32 products on matrix units where the precision settings let the node
// round its inputs (LowerTarget::f32_products, from the node's attribute):
// TF32 on tensor cores, bf16 under float32_matmul_precision medium; never
// without it, and the tuner's records are checked the same way.
BOOST_AUTO_TEST_CASE(f32_gemms_use_matrix_units_where_the_precision_allows) {
  auto choose = [](const LowerTarget& target, std::int64_t m, std::int64_t n, std::int64_t k) {
    return sh::to_string(sh::choose_gemm_knobs(1, m, n, k, target));
  };
  LowerTarget tf32 = tensor_core_gpu("");
  tf32.f32_products = "tf32";
  BOOST_TEST(choose(tf32, 2048, 2048, 2048) == "2x4_k1_p1_wg128_v4_s32_mma16x8x8tf32l32");
  BOOST_TEST(choose(tf32, 64, 3136, 64) == "2x4_k1_p1_wg128_v4_s32_mma16x8x8tf32l32");  // a 1x1 convolution
  LowerTarget bf16 = tensor_core_gpu("");
  bf16.f32_products = "bf16";
  BOOST_TEST(choose(bf16, 2048, 2048, 2048) == "2x4_k1_p1_wg128_v4_s32_mma16x8x16bf16l32");
  LowerTarget mi100{"hip", 64, 1024, 65536};
  mi100.matrix_units = {{"tf32", 16, 16, 4, 64}, {"f16", 16, 16, 16, 64}};
  mi100.f32_products = "tf32";
  BOOST_TEST(choose(mi100, 512, 512, 512) == "2x2_k1_p1_wg256_v4_s32_mma16x16x4tf32l64");
  // A 16-bit node ignores the f32 choice; an f32 node without it keeps f32.
  LowerTarget half = tensor_core_gpu("f16");
  half.f32_products = "tf32";
  BOOST_TEST(choose(half, 2048, 2048, 2048) == "2x4_k1_p1_wg128_v4_s32_mma16x8x16f16l32");
  BOOST_TEST(choose(tensor_core_gpu(""), 2048, 2048, 2048) == "4x4_k1_p1_wg256_v4_s16");

  const sh::GemmKnobs tf32_knobs = sh::parse_gemm_knobs("2x4_k1_p1_wg128_v4_s32_mma16x8x8tf32l32");
  BOOST_TEST(!sh::matrix_knobs_unfit(tf32_knobs, tf32));
  const auto refused = sh::matrix_knobs_unfit(tf32_knobs, tensor_core_gpu(""));
  BOOST_TEST_REQUIRE(refused.has_value());
  BOOST_TEST(refused->find("tf32 inputs for a node of f32 tensors") != std::string::npos, *refused);
  BOOST_TEST(sh::matrix_knobs_unfit(tf32_knobs, bf16).has_value());
  BOOST_TEST(sh::matrix_knobs_unfit(tf32_knobs, half).has_value());
  // 3x3 convolutions: the implicit GEMM on matrix units where the node may
  // use them (TF32 products, or 16-bit tensors), else the direct template;
  // depthwise ones (K = 9) keep theirs.
  const auto conv = [](std::int64_t c, std::int64_t groups, std::int64_t size, std::int64_t stride) {
    return conv_problem({1, c, c, groups, size, size, 3, 3, stride, 1, 1, 1, 1, 1, false});
  };
  for (const sh::ConvProblem& p : {conv(64, 1, 56, 1), conv(128, 1, 56, 2), conv(512, 16, 14, 1)}) {
    const sh::ConvPlan plan = sh::choose_conv_plan(p, tf32);
    BOOST_TEST(plan.algorithm == sh::ConvAlgorithm::implicit_gemm);
    BOOST_TEST(plan.gemm.matrix_precision == static_cast<std::uint8_t>(kir::MatrixPrecision::tf32));
    BOOST_TEST(sh::choose_conv_plan(p, half).gemm.matrix_precision ==
               static_cast<std::uint8_t>(kir::MatrixPrecision::f16));
    BOOST_TEST(sh::choose_conv_plan(p, tensor_core_gpu("")).algorithm == sh::ConvAlgorithm::direct);
  }
  BOOST_TEST(sh::choose_conv_plan(conv(96, 96, 56, 1), tf32).algorithm == sh::ConvAlgorithm::depthwise);

  // The tuner's space offers what the heuristic may choose.
  bool offered = false;
  for (const sh::GemmKnobs& knobs : sh::gemm_knob_space(tf32))
    offered = offered || knobs == tf32_knobs;
  BOOST_TEST(offered);
}

BOOST_AUTO_TEST_CASE(every_choice_is_in_the_enumerated_space) {
  LowerTarget tf32_gpu = tensor_core_gpu("");
  tf32_gpu.f32_products = "tf32";
  for (const LowerTarget& target : {LowerTarget{}, lavapipe(), small_device(), minimal_gpu(), register_gpu(),
                                    tensor_core_gpu("f16"), tensor_core_gpu("bf16"), tf32_gpu}) {
    const auto gemm_space = sh::gemm_knob_space(target);
    const auto conv_space = sh::conv_plan_space(target);
    for (std::int64_t m : {1, 2, 3, 5, 8, 64, 1000})
      for (std::int64_t n : {1, 3, 4, 7, 49, 3136})
        for (std::int64_t k : {1, 7, 8, 576})
          for (std::int64_t batch : {1, 4}) {
            const sh::GemmKnobs knobs = sh::choose_gemm_knobs(batch, m, n, k, target);
            BOOST_TEST_REQUIRE(contains(gemm_space, knobs), "gemm " << sh::to_string(knobs));
          }
    for (std::int64_t c : {1, 3, 8, 32})
      for (std::int64_t groups : {std::int64_t{1}, c})
        for (std::int64_t size : {1, 7, 14, 56})
          for (std::int64_t kernel : {1, 3, 5})
            for (std::int64_t stride : {1, 2}) {
              const std::int64_t pad = kernel / 2;
              const sh::ConvProblem p =
                  conv_problem({1, c, c * 2, groups, size, size, kernel, kernel, stride, 1, pad, pad, pad, pad, false});
              const sh::ConvPlan plan = sh::choose_conv_plan(p, target);
              BOOST_TEST_REQUIRE(contains(conv_space, plan), describe({1, c, c * 2, groups, size, size, kernel,
                                                                        kernel, stride, 1, pad, pad, pad, pad, false}));
              BOOST_TEST_REQUIRE(sh::conv_algorithm_applies(p, plan.algorithm));
            }
  }
}

BOOST_AUTO_TEST_CASE(lower_node_takes_its_knobs_from_the_target) {
  kiln::Builder b("conv");
  auto x = b.input("x", kiln::DType::f32, {1, 8, 16, 16});
  auto w = b.constant("w", kiln::Tensor(kiln::DType::f32, {8, 8, 3, 3}));
  const kiln::Model model = b.build({b.conv2d(x, w, std::nullopt, {.padding = {1, 1, 1, 1}})});
  const kiln::graph::Graph& g = kiln::internal::graph(model);
  const kiln::graph::Node& node = g.nodes().back();
  std::vector<kiln::graph::TensorType> inputs, outputs;
  for (auto id : node.inputs)
    if (id >= 0) inputs.push_back(g.value(id).type);
  for (auto id : node.outputs) outputs.push_back(g.value(id).type);
  const auto lowered_default = kiln::lower::lower_node(node, inputs, outputs);
  const auto lowered_small = kiln::lower::lower_node(node, inputs, outputs, small_device());
  BOOST_TEST_REQUIRE(lowered_default.kernel.has_value());
  BOOST_TEST_REQUIRE(lowered_small.kernel.has_value());
  BOOST_TEST(lowered_default.kernel->workgroup_size == 64u);
  BOOST_TEST(lowered_small.kernel->workgroup_size == 32u);
  BOOST_TEST(lowered_default.kernel->name.find("conv2d_direct_") == 0u);
  BOOST_TEST(!kiln::lower::unsupported_reason(node, inputs, outputs, small_device()).has_value());
}

// ---- Code generation for CUDA and HIP ------------------------------------

BOOST_AUTO_TEST_CASE(every_configuration_compiles_for_cuda_and_hip, *boost::unit_test::label("exhaustive") * boost::unit_test::label("offline_space")) {
  // One kernel per register block and per convolution plan (the other GEMM
  // knobs change only constants), rendered and compiled for each offline target.
  std::vector<kir::Kernel> kernels;
  const LowerTarget gpu{"cuda", 32, 1024, 49152};
  // Two shapes: one with no vec4 loads, one with vec4 loads of A and B.
  for (const sh::GemmKnobs& knobs : sh::gemm_knob_space(gpu)) {
    if (knobs.shared_k_tile == 0 && (knobs.k_unroll != 4 || knobs.panel_width != 8)) continue;
    for (const std::int64_t n : {11, 12}) {
      kir::Kernel kernel("gemm_" + sh::to_string(knobs) + "_n" + std::to_string(n));
      sh::GemmProblem p;
      p.batch = 2;
      p.m = 9, p.n = n, p.k = n + 4;
      p.a_row_stride = n + 4, p.a_k_stride = 1, p.b_k_stride = n, p.b_col_stride = 1, p.y_row_stride = n;
      p.a_base_multiple = 9 * (n + 4), p.b_base_multiple = (n + 4) * n;
      p.a = kernel.add_buffer("a", kir::ScalarType::f32, kir::Access::read);
      p.b = kernel.add_buffer("b", kir::ScalarType::f32, kir::Access::read);
      p.y = kernel.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
      p.bases = [n](std::vector<kir::Stmt>&, kir::Expr batch) {
        return sh::GemmBases{batch * kir::i32(9 * (n + 4)), batch * kir::i32((n + 4) * n), batch * kir::i32(9 * n)};
      };
      sh::build_gemm(kernel, p, knobs);
      kernels.push_back(std::move(kernel));
    }
  }
  for (const sh::ConvPlan& plan : sh::conv_plan_space(gpu)) {
    if (uses_gemm_knobs(plan) && plan.gemm.shared_k_tile == 0 && (plan.gemm.k_unroll != 4 || plan.gemm.panel_width != 8))
      continue;
    // Shared tiling: the thin arrangements differ from the square one only
    // in constants once B is gathered (the GEMMs above compile them all).
    if (uses_gemm_knobs(plan) && plan.gemm.shared_k_tile != 0 && plan.gemm.workgroup_n != 0) continue;
    const ConvCase& c = plan.algorithm == sh::ConvAlgorithm::gemm_1x1        ? kConv1x1Cases[1]
                        : plan.algorithm == sh::ConvAlgorithm::depthwise     ? kDepthwiseCases[0]
                        : plan.algorithm == sh::ConvAlgorithm::implicit_gemm ? kImplicitGemmCases[2]
                                                                             : kDirectCases[2];
    kir::Kernel kernel(std::string("conv_") + sh::conv_algorithm_name(plan.algorithm));
    sh::ConvProblem p = conv_problem(c);
    p.x = kernel.add_buffer("x", kir::ScalarType::f32, kir::Access::read);
    p.w = kernel.add_buffer("w", kir::ScalarType::f32, kir::Access::read);
    p.bias = kernel.add_buffer("bias", kir::ScalarType::f32, kir::Access::read);
    p.activation = [](kir::Expr v) { return kir::max(v, kir::f32(0.0)); };
    p.y = kernel.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
    sh::build_conv(kernel, p, plan);
    kernels.push_back(std::move(kernel));
  }
  // KILN_OFFLINE_PART limits the targets (tests/offline_targets.h).
  int compiled = 0;
  for (const kiln::testing::OfflineTarget& t : kiln::testing::offline_targets_of_part()) {
    if (t.backend->name() != "cuda" && t.backend->name() != "hip") continue;
    for (const kir::Kernel& kernel : kernels) {
      const kb::KernelSource source = kiln::render::make_kernel_source(kernel, t.backend->language());
      BOOST_TEST(!t.backend->compiler().compile(source, t.target).data.empty(), kernel.name << " for " << t.target.arch);
      ++compiled;
    }
  }
  std::cout << "templates: " << kernels.size() << " configurations compiled " << compiled
            << " times for the offline CUDA/HIP targets of part "
            << kiln::testing::offline_part().first << "/" << kiln::testing::offline_part().second << "\n";
}

// ---- Throughput ----------------------------------------------------------

BOOST_AUTO_TEST_CASE(gemm_throughput) {
  // KILN_GEMM_BENCH_SIZE=2048 gives the 2048^3 figure (the default keeps CI
  // fast); KILN_GEMM_BENCH_SHAPE=M,N,K any other shape (a 1x1 convolution of
  // Ci -> Co channels on H x W pixels is M = Co, N = H * W, K = Ci);
  // KILN_GEMM_BENCH_KNOBS=tile_m,tile_n,k_unroll,panel[,vector_width[,workgroup[,shared_k_tile[,split_k[,workgroup_n
  // [,subgroup_broadcast[,texel_loads]]]]]]]
  // overrides the heuristic's lavapipe knobs, for tuning (shared_k_tile > 0:
  // the GPU shared-memory path, e.g. 4,4,1,1,4,256,16 as the heuristic picks
  // for GPUs; subgroup_broadcast 8 and texel_loads 1: the subgroup path with
  // texel loads, e.g. 8,64,1,1,4,64,0,1,0,8,1); KILN_GEMM_BENCH_PACKED_B=P reads B in slabs of P columns,
  // [N / P, K, P] (P = 16: as the pack_matmul_weights pass lays constant
  // weights out), as a batch of N / P products (N must be a multiple of P).
  // KILN_GEMM_BENCH_KNOBS also takes knob text ("8x16_k1_p1_wg64_v4_sg8_tex_swap").
  const char* size_text = std::getenv("KILN_GEMM_BENCH_SIZE");
  const std::int64_t size = size_text ? std::atoll(size_text) : 256;
  std::int64_t m = size, n = size, k = size;
  if (const char* text = std::getenv("KILN_GEMM_BENCH_SHAPE"))
    BOOST_TEST_REQUIRE(std::sscanf(text, "%ld,%ld,%ld", &m, &n, &k) == 3);
  BOOST_TEST_REQUIRE(std::min({m, n, k}) >= 1);
  sh::GemmKnobs knobs = sh::choose_gemm_knobs(1, m, n, k, lavapipe());
  const char* knob_text = std::getenv("KILN_GEMM_BENCH_KNOBS");
  if (knob_text && std::string_view(knob_text).find('x') != std::string_view::npos) {
    knobs = sh::parse_gemm_knobs(knob_text);
  } else if (const char* text = knob_text) {
    unsigned texel = 0;
    BOOST_TEST_REQUIRE(std::sscanf(text, "%u,%u,%u,%u,%u,%u,%u,%u,%u,%u,%u", &knobs.tile_m, &knobs.tile_n,
                                   &knobs.k_unroll, &knobs.panel_width, &knobs.vector_width, &knobs.workgroup_size,
                                   &knobs.shared_k_tile, &knobs.split_k, &knobs.workgroup_n,
                                   &knobs.subgroup_broadcast, &texel) >= 4);
    knobs.texel_loads = texel != 0;
  }
  kir::Kernel kernel("gemm_bench");
  sh::GemmProblem p;
  p.m = m, p.n = n, p.k = k;
  p.a_row_stride = k, p.a_k_stride = 1, p.b_k_stride = n, p.b_col_stride = 1, p.y_row_stride = n;
  p.a = kernel.add_buffer("a", kir::ScalarType::f32, kir::Access::read);
  p.b = kernel.add_buffer("b", kir::ScalarType::f32, kir::Access::read);
  p.y = kernel.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
  std::int64_t packed = 0;
  if (const char* text = std::getenv("KILN_GEMM_BENCH_PACKED_B")) packed = std::atoll(text);
  if (packed > 0) {
    BOOST_TEST_REQUIRE(n % packed == 0);
    p.batch = n / packed;
    p.n = packed;
    p.b_k_stride = packed;
    p.a_base_multiple = 4, p.b_base_multiple = 4;
    p.bases = [=](std::vector<kir::Stmt>&, kir::Expr batch) {
      return sh::GemmBases{kir::i32(0), batch * kir::i32(k * packed), batch * kir::i32(packed)};
    };
  }
  sh::build_gemm(kernel, p, knobs);

  const auto a = random_values(static_cast<std::size_t>(m * k), 11);
  const auto b = random_values(static_cast<std::size_t>(k * n), 12);
  std::vector<float> y(static_cast<std::size_t>(m * n), NAN);
  double best_ms = 0;
  vulkan().run(kernel, {a, b, y}, 3, &best_ms);
  y = vulkan().run(kernel, {a, b, y})[2];
  // Spot-check elements spread over the result against double sums.
  // Element (q, j) of B: row-major, or in 16-column slabs [N / P, K, P].
  auto b_at = [&](std::int64_t q, std::int64_t j) {
    return packed > 0 ? b[((j / packed) * k + q) * packed + j % packed] : b[q * n + j];
  };
  for (std::int64_t i = 0; i < m; i += m / 7 + 1)
    for (std::int64_t j = 0; j < n; j += n / 5 + 1) {
      double sum = 0;
      for (std::int64_t q = 0; q < k; ++q) sum += double(a[i * k + q]) * b_at(q, j);
      BOOST_TEST(std::fabs(y[i * n + j] - sum) <= 1e-4 * std::max(1.0, std::fabs(sum)));
    }
  const double gflops = 2.0 * double(m) * double(n) * double(k) / (best_ms * 1e6);
  std::cout << "templates: " << m << "x" << n << "x" << k << " (MxNxK) fp32 GEMM, knobs " << sh::to_string(knobs)
            << ": " << best_ms << " ms, " << gflops << " GFLOP/s\n";
  BOOST_TEST(gflops > 0.0);
}

BOOST_AUTO_TEST_CASE(conv_throughput) {
  // A ResNet-50 convolution with the heuristic's lavapipe plan, against the
  // reference on a few outputs. KILN_CONV_BENCH=C,K,HW,kernel,stride picks
  // another (default 256,256,14,3,1: layer3's 3x3);
  // KILN_CONV_BENCH_KNOBS=tile_m,tile_n,k_unroll,panel overrides the GEMM
  // knobs of the implicit GEMM; KILN_CONV_BENCH_DIRECT=tile_channels,tile_width[,packed]
  // runs the direct template instead (on packed weights unless packed is 0).
  std::int64_t c = 256, co = 256, size = 14, kernel = 3, stride = 1;
  if (const char* text = std::getenv("KILN_CONV_BENCH"))
    BOOST_TEST_REQUIRE(std::sscanf(text, "%ld,%ld,%ld,%ld,%ld", &c, &co, &size, &kernel, &stride) == 5);
  const std::int64_t pad = kernel / 2;
  const ConvCase shape{1, c, co, 1, size, size, kernel, kernel, stride, 1, pad, pad, pad, pad, false};
  sh::ConvPlan plan = sh::choose_conv_plan(conv_problem(shape), lavapipe());
  if (const char* text = std::getenv("KILN_CONV_BENCH_KNOBS")) {
    plan.algorithm = sh::ConvAlgorithm::implicit_gemm;
    BOOST_TEST_REQUIRE(std::sscanf(text, "%u,%u,%u,%u", &plan.gemm.tile_m, &plan.gemm.tile_n, &plan.gemm.k_unroll,
                                   &plan.gemm.panel_width) == 4);
  }
  int packed = plan.algorithm == sh::ConvAlgorithm::direct;
  if (const char* text = std::getenv("KILN_CONV_BENCH_DIRECT")) {
    plan.algorithm = sh::ConvAlgorithm::direct;
    packed = 1;
    BOOST_TEST_REQUIRE(std::sscanf(text, "%u,%u,%d", &plan.conv.tile_channels, &plan.conv.tile_width, &packed) >= 2);
  }
  kir::Kernel conv("conv_bench");
  sh::ConvProblem p = conv_problem(shape);
  p.packed_weights = packed != 0;
  p.x = conv.add_buffer("x", kir::ScalarType::f32, kir::Access::read);
  p.w = conv.add_buffer("w", kir::ScalarType::f32, kir::Access::read);
  p.y = conv.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
  sh::build_conv(conv, p, plan);
  const auto x = random_values(static_cast<std::size_t>(c * size * size), 13);
  const auto w = random_values(static_cast<std::size_t>(co * c * kernel * kernel), 14);
  const std::size_t outputs = static_cast<std::size_t>(co * p.out_h * p.out_w);
  double best_ms = 0;
  const std::vector<float> weights = p.packed_weights ? pack_oihw4o(p, w) : w;
  const auto y = vulkan().run(conv, {x, weights, std::vector<float>(outputs, NAN)}, 5, &best_ms)[2];
  const std::vector<double> want = reference_conv(p, x, w, nullptr);
  for (std::size_t i = 0; i < outputs; i += outputs / 97 + 1)
    BOOST_TEST(std::fabs(y[i] - want[i]) <= 1e-4 * std::max(1.0, std::fabs(want[i])), "output " << i);
  const double flops = 2.0 * double(co) * double(p.out_h * p.out_w) * double(c * kernel * kernel);
  const std::string knobs = uses_gemm_knobs(plan) ? sh::to_string(plan.gemm) : sh::to_string(plan.conv);
  std::cout << "templates: conv " << describe(shape) << ", " << sh::conv_algorithm_name(plan.algorithm) << " "
            << knobs << (p.packed_weights ? " packed" : "") << ": " << best_ms << " ms, "
            << flops / (best_ms * 1e6) << " GFLOP/s\n";
  BOOST_TEST(best_ms > 0.0);
}

}  // namespace

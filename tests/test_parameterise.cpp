// Runtime kernel parameters (src/kernel/parameterise.h): grouping by
// structure, the limit, interpreter equivalence with the baked kernels,
// rendering for every language (compiled with NVRTC/hiprtc where present),
// and on Vulkan: differently shaped convolutions sharing one pipeline.
#define BOOST_TEST_MODULE parameterise
#include <boost/test/unit_test.hpp>

#include <kiln/kiln.h>

#include "test_backend.h"
#include "backends/registry.h"
#include "graph/op_registry.h"
#include "shaders/gemm_template.h"
#include "src/kernel/interpreter.h"
#include "src/kernel/parameterise.h"
#include "src/render/cstyle.h"
#include "src/runtime/internal_access.h"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace kir = kiln::kir;
namespace sh = kiln::shaders;
using kiln::Error;
using kiln::ErrorKind;

namespace {

const sh::GemmKnobs kKnobs{4, 4, 4, 64, 8, 4};

// Y[m x n] = A[m x k] * B[k x n], row-major, no epilogue.
kir::Kernel make_gemm(std::int64_t m, std::int64_t n, std::int64_t k, const sh::GemmKnobs& knobs = kKnobs) {
  kir::Kernel kernel("gemm");
  sh::GemmProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a_row_stride = k;
  p.a_k_stride = 1;
  p.b_k_stride = n;
  p.b_col_stride = 1;
  p.y_row_stride = n;
  p.a = kernel.add_buffer("a", kir::ScalarType::f32, kir::Access::read);
  p.b = kernel.add_buffer("b", kir::ScalarType::f32, kir::Access::read);
  p.y = kernel.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
  sh::build_gemm(kernel, p, knobs);
  return kernel;
}

// y = max(x, 0) over n elements, one per invocation.
kir::Kernel make_relu(std::int64_t n) {
  kir::Kernel kernel("relu");
  const kir::Buf x = kernel.add_buffer("x", kir::ScalarType::f32, kir::Access::read);
  const kir::Buf y = kernel.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
  kernel.global_size = n;
  const kir::Expr i = kir::global_index();
  kernel.body.push_back(kir::store(y, i, kir::max(kir::load(x, i, kir::ScalarType::f32), kir::f32(0.0))));
  return kernel;
}

std::vector<float> random_values(std::size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

// Runs `kernel` on the interpreter; returns every buffer afterwards.
std::vector<std::vector<float>> interpret(const kir::Kernel& kernel, std::vector<std::vector<float>> buffers) {
  std::vector<std::span<std::byte>> spans;
  for (auto& b : buffers) spans.push_back(std::as_writable_bytes(std::span<float>(b)));
  kir::interpret(kernel, spans);
  return buffers;
}

kir::ParameteriseReport parameterise(std::vector<kir::Kernel*> kernels, std::size_t max_params = 32,
                                     bool loop_bounds = false) {
  kir::ParameteriseOptions options;
  options.max_params = max_params;
  options.loop_bounds = loop_bounds;
  return kir::parameterise(kernels, options);
}

const kiln::backend::LanguageTable& glsl() { return kiln::backend::get_backend("vulkan").language(); }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_CASE(equal_structure_merges_into_one_source) {
  kir::Kernel small = make_gemm(8, 32, 16), large = make_gemm(16, 64, 16);
  const std::string small_before = kiln::render::render(small, glsl());
  BOOST_TEST(small_before != kiln::render::render(large, glsl()));

  const kir::ParameteriseReport report = parameterise({&small, &large});
  BOOST_TEST(report.groups == 1);
  BOOST_TEST(report.kernels == 2);
  BOOST_TEST(!small.params.empty());
  BOOST_TEST(small.params.size() == large.params.size());
  BOOST_TEST(small.params != large.params);
  BOOST_TEST(small.global_size_param.has_value());  // 8x32 and 16x64 outputs need different grids
  // One source for both; the instance values live outside it.
  const std::string shared = kiln::render::render(small, glsl());
  BOOST_TEST(shared == kiln::render::render(large, glsl()));
  BOOST_TEST(contains(shared, "layout(push_constant)"));
  BOOST_TEST(!contains(shared, "global_size " + std::to_string(small.global_size)));
  // print() shows parameters as parameters, not their values.
  const std::string text = kir::print(small);
  BOOST_TEST(text == kir::print(large));
  BOOST_TEST(contains(text, "param(0)"));
  BOOST_TEST(contains(text, "params " + std::to_string(small.params.size())));
}

BOOST_AUTO_TEST_CASE(different_structure_does_not_merge) {
  kir::Kernel gemm = make_gemm(8, 32, 16), relu = make_relu(256);
  kir::Kernel wide_tiles = make_gemm(16, 64, 32, sh::GemmKnobs{8, 8, 4, 64, 8, 4});
  const kir::ParameteriseReport report = parameterise({&gemm, &relu, &wide_tiles});
  BOOST_TEST(report.groups == 0);
  BOOST_TEST(gemm.params.empty());
  BOOST_TEST(relu.params.empty());
  BOOST_TEST(wide_tiles.params.empty());
  BOOST_TEST(!gemm.global_size_param.has_value());
}

BOOST_AUTO_TEST_CASE(identical_kernels_need_no_parameters) {
  kir::Kernel a = make_relu(100), b = make_relu(100);
  const kir::ParameteriseReport report = parameterise({&a, &b});
  BOOST_TEST(report.groups == 0);
  BOOST_TEST(a.params.empty());
  BOOST_TEST(kiln::render::render(a, glsl()) == kiln::render::render(b, glsl()));
}

BOOST_AUTO_TEST_CASE(a_group_over_the_limit_stays_unmerged) {
  kir::Kernel small = make_gemm(8, 32, 32), large = make_gemm(16, 64, 64);
  const std::string small_text = kir::print(small);
  const kir::ParameteriseReport report = parameterise({&small, &large}, 1, true);
  BOOST_TEST(report.groups == 0);
  BOOST_TEST(report.groups_over_limit == 1);
  BOOST_TEST(small.params.empty());
  BOOST_TEST(kir::print(small) == small_text);
}

BOOST_AUTO_TEST_CASE(reports_which_kernels_render_one_source) {
  kir::Kernel a = make_relu(100), small = make_gemm(8, 32, 16), b = make_relu(100), c = make_relu(300),
              large = make_gemm(16, 64, 16);
  std::vector<kir::Kernel*> kernels = {&a, &small, &b, &c, &large};
  const kir::ParameteriseReport report = parameterise(kernels);
  BOOST_TEST(report.same_source_as == (std::vector<std::size_t>{0, 1, 0, 0, 1}), boost::test_tools::per_element());
  for (std::size_t i = 0; i < kernels.size(); ++i)
    BOOST_TEST(kiln::render::render(*kernels[i], glsl()) ==
                   kiln::render::render(*kernels[report.same_source_as[i]], glsl()),
               "kernel " << i);

  // A group over the limit keeps its differing literals: each its own source.
  kir::Kernel over_small = make_gemm(8, 32, 32), over_large = make_gemm(16, 64, 64);
  BOOST_TEST(parameterise({&over_small, &over_large}, 1, true).same_source_as == (std::vector<std::size_t>{0, 1}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(only_differing_literals_become_parameters) {
  // Sizes differ; the stores' structure and the 0.0 constant do not.
  kir::Kernel a = make_relu(100), b = make_relu(37);
  const kir::ParameteriseReport report = parameterise({&a, &b});
  BOOST_TEST(report.groups == 1);
  BOOST_TEST(a.params == std::vector<std::int32_t>{100});
  BOOST_TEST(b.params == std::vector<std::int32_t>{37});
  BOOST_TEST((a.global_size_param == std::optional<int>(0)));
  const std::string source = kiln::render::render(a, glsl());
  BOOST_TEST(contains(source, "if (kiln_linear >= uint(kiln_params.p0)) return;"));
  BOOST_TEST(!contains(source, "100"));

  const std::vector<float> x = random_values(37, 5);
  const auto out = interpret(b, {x, std::vector<float>(37, -9.0f)});
  for (std::size_t i = 0; i < x.size(); ++i) BOOST_TEST(out[1][i] == std::max(x[i], 0.0f));
}

BOOST_AUTO_TEST_CASE(loop_bounds_are_structure_unless_asked) {
  kir::Kernel k32 = make_gemm(8, 32, 32), k64 = make_gemm(8, 32, 64);
  BOOST_TEST(parameterise({&k32, &k64}).groups == 0);
  BOOST_TEST(k32.params.empty());
  BOOST_TEST(parameterise({&k32, &k64}, 32, true).groups == 1);
  BOOST_TEST(contains(kir::print(k32), "kk < param("));
  // Short trip counts (K 16 and 24: bounds below kShortLoopBound) stay
  // constants even when asked.
  kir::Kernel k16 = make_gemm(8, 32, 16), k24 = make_gemm(8, 32, 24);
  BOOST_TEST(parameterise({&k16, &k24}, 32, true).groups == 0);
  BOOST_TEST(contains(kir::print(k16), "kk < 16"));
}

BOOST_AUTO_TEST_CASE(per_element_divisors_stay_constants) {
  // y[i] = x[i / d]: without loops the division runs per element, so
  // kernels differing in d stay apart and those differing in size merge.
  auto repeat = [](std::int64_t n, std::int64_t d) {
    kir::Kernel kernel("repeat");
    const kir::Buf x = kernel.add_buffer("x", kir::ScalarType::f32, kir::Access::read);
    const kir::Buf y = kernel.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
    kernel.global_size = n;
    const kir::Expr i = kir::global_index();
    kernel.body.push_back(kir::store(y, i, kir::load(x, i / kir::i32(d), kir::ScalarType::f32)));
    return kernel;
  };
  kir::Kernel by3 = repeat(30, 3), by5 = repeat(30, 5), by3_longer = repeat(60, 3);
  const kir::ParameteriseReport report = parameterise({&by3, &by5, &by3_longer});
  BOOST_TEST(report.groups == 1);
  BOOST_TEST(by5.params.empty());
  BOOST_TEST(by3.params == std::vector<std::int32_t>{30});
  BOOST_TEST(by3_longer.params == std::vector<std::int32_t>{60});
  BOOST_TEST(contains(kiln::render::render(by3, glsl()), "/ 3)"));
}

// Dynamic dims: a kernel and its probe twin (the same kernel at another
// extent) tell which literals vary with the extent; those become parameters
// even where they would be structure (a per-element divisor, a short loop
// bound), so the kernel at a third extent renders the same source and
// computes what its baked version does. Literals that do not vary stay.
BOOST_AUTO_TEST_CASE(probes_turn_the_literals_that_vary_into_parameters) {
  // y[i] = sum over j < w of x[(i / w) * w + j] * 2: rows of width w (the
  // dynamic extent), a divisor and a short loop bound both depending on it.
  auto rows = [](std::int64_t count, std::int64_t w) {
    kir::Kernel kernel("row_sum");
    const kir::Buf x = kernel.add_buffer("x", kir::ScalarType::f32, kir::Access::read);
    const kir::Buf y = kernel.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
    kernel.global_size = count * w;
    const kir::Expr i = kir::global_index();
    const kir::Expr acc = kir::var("acc", kir::ScalarType::f32);
    kernel.body = {
        kir::declare("acc", kir::ScalarType::f32, kir::f32(0.0)),
        kir::loop("j", kir::i32(0), kir::i32(w),
                  {kir::assign("acc", acc + kir::load(x, (i / kir::i32(w)) * kir::i32(w) + kir::var("j", kir::ScalarType::i32),
                                                      kir::ScalarType::f32) *
                                            kir::f32(2.0))}),
        kir::store(y, i, acc),
    };
    return kernel;
  };
  kir::Kernel at4 = rows(3, 4), probe = rows(3, 12), at6 = rows(3, 6), probe6 = rows(3, 18);
  int varying = 0;
  kir::ParameteriseReport report = kir::parameterise_with_probes(std::vector<kir::Kernel*>{&at4},
                                                                 std::vector<kir::Kernel*>{&probe}, {}, &varying);
  BOOST_TEST(varying == 1);
  BOOST_TEST(report.same_source_as == std::vector<std::size_t>{0});
  kir::parameterise_with_probes(std::vector<kir::Kernel*>{&at6}, std::vector<kir::Kernel*>{&probe6});
  BOOST_TEST(at4.params == (std::vector<std::int32_t>{4, 12}));  // w, then the global size
  BOOST_TEST(at6.params == (std::vector<std::int32_t>{6, 18}));
  BOOST_TEST(kiln::render::render(at4, glsl()) == kiln::render::render(at6, glsl()));
  BOOST_TEST(contains(kir::print(at4), "j < param(0)"));
  BOOST_TEST(contains(kir::print(at4), "/ param(0)"));
  BOOST_TEST(probe.params.empty());  // the probes are left as they were
  // Without a probe the divisor and the short bound stay constants.
  kir::Kernel alone = rows(3, 4);
  kir::parameterise_with_probes(std::vector<kir::Kernel*>{&alone}, {});
  BOOST_TEST(alone.params.empty());
  // The parameterised kernel computes what the baked one does, at each extent.
  for (const std::int64_t w : {4, 6}) {
    const kir::Kernel baked = rows(3, w);
    const auto x = random_values(static_cast<std::size_t>(3 * w), 7);
    const std::vector<float> y(static_cast<std::size_t>(3 * w), NAN);
    const auto want = interpret(baked, {x, y});
    const auto got = interpret(w == 4 ? at4 : at6, {x, y});
    BOOST_TEST(std::memcmp(want[1].data(), got[1].data(), want[1].size() * sizeof(float)) == 0);
  }
}

BOOST_AUTO_TEST_CASE(interpreter_results_equal_the_baked_kernels) {
  struct Shape {
    std::int64_t m, n, k;
  };
  const std::vector<Shape> shapes = {{8, 32, 32}, {16, 64, 64}, {12, 48, 40}};
  std::vector<kir::Kernel> baked, parameterised;
  for (const Shape& s : shapes) {
    baked.push_back(make_gemm(s.m, s.n, s.k));
    parameterised.push_back(make_gemm(s.m, s.n, s.k));
  }
  std::vector<kir::Kernel*> members;
  for (kir::Kernel& k : parameterised) members.push_back(&k);
  BOOST_TEST_REQUIRE(parameterise(members, 32, true).groups == 1);  // K differs: loop bounds too
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    const auto a = random_values(static_cast<std::size_t>(s.m * s.k), 10 + static_cast<unsigned>(i));
    const auto b = random_values(static_cast<std::size_t>(s.k * s.n), 20 + static_cast<unsigned>(i));
    const std::vector<float> y(static_cast<std::size_t>(s.m * s.n), NAN);
    const auto want = interpret(baked[i], {a, b, y});
    const auto got = interpret(parameterised[i], {a, b, y});
    // Same arithmetic in the same order: bit for bit.
    BOOST_TEST(std::memcmp(want[2].data(), got[2].data(), want[2].size() * sizeof(float)) == 0);
  }
}

// A kernel lowered at other extents takes a parameterised kernel's source
// with the parameter values read off its literals, and computes what it
// would have alone; a kernel differing in structure or in a literal that
// stayed a constant does not match.
BOOST_AUTO_TEST_CASE(a_kernel_at_other_extents_matches_a_parameterised_one) {
  kir::Kernel small = make_gemm(8, 32, 16), large = make_gemm(16, 64, 16);
  BOOST_TEST_REQUIRE(parameterise({&small, &large}).groups == 1);
  const kir::Kernel other = make_gemm(24, 96, 16);
  const std::optional<std::vector<std::int32_t>> params = kir::match_parameters(small, other);
  BOOST_TEST_REQUIRE(params.has_value());
  BOOST_TEST(params->size() == small.params.size());
  BOOST_TEST(*kir::match_parameters(large, make_gemm(16, 64, 16)) == large.params);
  kir::Kernel matched = small;
  matched.params = *params;
  matched.global_size = other.global_size;
  const auto a = random_values(24 * 16, 3), b = random_values(16 * 96, 4);
  const std::vector<float> y(24 * 96, NAN);
  const auto want = interpret(other, {a, b, y});
  const auto got = interpret(matched, {a, b, y});
  BOOST_TEST(std::memcmp(want[2].data(), got[2].data(), want[2].size() * sizeof(float)) == 0);
  // K is a short loop bound, a constant in both: another K is another kernel.
  BOOST_TEST(!kir::match_parameters(small, make_gemm(24, 96, 8)).has_value());
  BOOST_TEST(!kir::match_parameters(small, make_relu(256)).has_value());
  BOOST_TEST(!kir::match_parameters(small, make_gemm(24, 96, 16, sh::GemmKnobs{8, 8, 4, 64, 8, 4})).has_value());
  // A kernel with parameters of its own is no literal kernel.
  BOOST_TEST(!kir::match_parameters(small, large).has_value());
}

// A kernel whose literals differ where the set kernel has constants (here:
// K, a short loop bound, or no parameters at all) is that kernel with more
// parameters; it computes what the literal kernel computes, and a third
// extent then matches it.
BOOST_AUTO_TEST_CASE(a_kernel_at_other_constants_generalises_the_set_kernel) {
  kir::Kernel small = make_gemm(8, 32, 16), large = make_gemm(16, 64, 16);
  BOOST_TEST_REQUIRE(parameterise({&small, &large}).groups == 1);
  const kir::Kernel other_k = make_gemm(24, 96, 8);
  BOOST_TEST_REQUIRE(!kir::match_parameters(small, other_k).has_value());
  const std::optional<kir::Kernel> general = kir::generalise_parameters(small, other_k, 32);
  BOOST_TEST_REQUIRE(general.has_value());
  BOOST_TEST(general->params.size() > small.params.size());
  BOOST_TEST(general->global_size == other_k.global_size);
  kir::verify(*general);
  const auto a = random_values(24 * 8, 5), b = random_values(8 * 96, 6);
  const std::vector<float> y(24 * 96, NAN);
  const auto want = interpret(other_k, {a, b, y});
  const auto got = interpret(*general, {a, b, y});
  BOOST_TEST(std::memcmp(want[2].data(), got[2].data(), want[2].size() * sizeof(float)) == 0);
  // A third extent of that K takes it, or generalises it again (positions
  // that agreed at two extents may differ at a third); either computes what
  // the literal kernel computes.
  const kir::Kernel third = make_gemm(40, 128, 8);
  kir::Kernel taken = *general;
  if (std::optional<std::vector<std::int32_t>> params = kir::match_parameters(*general, third)) {
    taken.params = *params;
    taken.global_size = third.global_size;
  } else {
    std::optional<kir::Kernel> again = kir::generalise_parameters(*general, third, 32);
    BOOST_TEST_REQUIRE(again.has_value());
    taken = *again;
  }
  const auto a3 = random_values(40 * 8, 7), b3 = random_values(8 * 128, 8);
  const std::vector<float> y3(40 * 128, NAN);
  const auto want3 = interpret(third, {a3, b3, y3});
  const auto got3 = interpret(taken, {a3, b3, y3});
  BOOST_TEST(std::memcmp(want3[2].data(), got3[2].data(), want3[2].size() * sizeof(float)) == 0);
  // A set kernel without parameters generalises too; another structure does not.
  const kir::Kernel plain = make_gemm(8, 32, 16);
  BOOST_TEST(kir::generalise_parameters(plain, make_gemm(16, 64, 16), 32).has_value());
  BOOST_TEST(!kir::generalise_parameters(plain, make_relu(256), 32).has_value());
  BOOST_TEST(!kir::generalise_parameters(small, make_gemm(24, 96, 16, sh::GemmKnobs{8, 8, 4, 64, 8, 4}), 32).has_value());
  // Past the parameter limit: none.
  BOOST_TEST(!kir::generalise_parameters(small, other_k, small.params.size()).has_value());
}

BOOST_AUTO_TEST_CASE(verify_checks_parameter_indices) {
  kir::Kernel bad_index = make_relu(8);
  bad_index.params = {8};
  bad_index.body.push_back(kir::declare("t", kir::ScalarType::i32, kir::param(1)));
  BOOST_CHECK_EXCEPTION(kir::verify(bad_index), Error, [](const Error& e) {
    return e.kind() == ErrorKind::Internal && contains(e.what(), "parameter index 1") &&
           contains(e.what(), "1 parameters");
  });
  kir::Kernel bad_guard = make_relu(8);
  bad_guard.params = {9};
  bad_guard.global_size_param = 0;
  BOOST_CHECK_EXCEPTION(kir::verify(bad_guard), Error, [](const Error& e) {
    return contains(e.what(), "global-size guard reads param(0) = 9, but global_size is 8");
  });
  BOOST_CHECK_THROW(kir::param(-1), Error);
}

BOOST_AUTO_TEST_CASE(parameterised_kernels_render_and_compile_for_every_language) {
  kir::Kernel small = make_gemm(8, 32, 32), large = make_gemm(16, 64, 64);
  BOOST_TEST_REQUIRE(parameterise({&small, &large}, 32, true).groups == 1);
  int compiled = 0;
  for (const kiln::backend::Backend* backend : kiln::backend::all_backends()) {
    const kiln::backend::KernelSource source = kiln::render::make_kernel_source(small, backend->language());
    BOOST_TEST(source.num_params == small.params.size());
    BOOST_TEST(source.text == kiln::render::make_kernel_source(large, backend->language()).text);
    BOOST_TEST(contains(source.text, "kiln_params.p0"), backend->name() << ":\n" << source.text);
    if (backend->name() != "cuda" && backend->name() != "hip") continue;
    BOOST_TEST(contains(source.text, "KilnParams kiln_params"));
    for (const kiln::backend::TargetDesc& target : backend->offline_targets()) {
      try {
        const kiln::backend::KernelBinary binary = backend->compiler().compile(source, target);
        BOOST_TEST(!binary.data.empty());
        ++compiled;
      } catch (const Error& e) {
        // A missing toolkit is reported as unavailable, not as a compile error.
        BOOST_TEST(e.kind() != ErrorKind::Internal, backend->name() << " " << target.arch << ": " << e.what());
      }
    }
  }
  BOOST_TEST_MESSAGE("compiled the parameterised GEMM for " << compiled << " offline targets");
}

namespace {

// Two 1x1 convolutions of one weight over inputs of different sizes: the
// same kernel structure at two shapes (large enough that the heuristic picks
// one tile for both, as in ResNet's bottlenecks).
kiln::Model two_shapes_model() {
  kiln::Builder b("two_shapes");
  auto small = b.input("small", kiln::DType::f32, {1, 64, 28, 28});
  auto large = b.input("large", kiln::DType::f32, {1, 64, 56, 56});
  kiln::Tensor weight(kiln::DType::f32, {64, 64, 1, 1});
  const auto w = random_values(static_cast<std::size_t>(weight.numel()), 3);
  std::copy(w.begin(), w.end(), weight.values<float>().begin());
  auto conv_w = b.constant("conv.weight", weight);
  return b.build({b.relu(b.conv2d(small, conv_w, std::nullopt, {})), b.relu(b.conv2d(large, conv_w, std::nullopt, {}))});
}

kiln::Tensor random_tensor(const kiln::Shape& shape, unsigned seed) {
  kiln::Tensor t(kiln::DType::f32, shape);
  const auto v = random_values(static_cast<std::size_t>(t.numel()), seed);
  std::copy(v.begin(), v.end(), t.values<float>().begin());
  return t;
}

}  // namespace

BOOST_AUTO_TEST_CASE(differently_shaped_convolutions_share_one_vulkan_pipeline) {
  const kiln::Model model = two_shapes_model();
  const std::vector<kiln::Tensor> inputs = {random_tensor({1, 64, 28, 28}, 1), random_tensor({1, 64, 56, 56}, 2)};
  const auto want = kiln::graph::run_reference(kiln::internal::graph(model), inputs);
  for (kiln::Mode mode : {kiln::Mode::default_, kiln::Mode::reduce_overhead}) {
    kiln::CompiledModel compiled = kiln::compile(model, {.backend = kiln::testing::test_backend(), .mode = mode});
    for (int call = 0; call < 2; ++call) {  // reduce-overhead: the second call replays the recording
      const auto got = compiled(inputs);
      BOOST_TEST_REQUIRE(got.size() == 2u);
      BOOST_TEST(kiln::max_abs_diff(got[0], want[0]) <= 1e-4f);
      BOOST_TEST(kiln::max_abs_diff(got[1], want[1]) <= 1e-4f);
    }
    BOOST_TEST(compiled.stats().dispatches_per_run == 2);
    BOOST_TEST(compiled.stats().kernels == 1, compiled.explain());
  }
  // Eager plans its kernels the same way.
  kiln::EagerModel eager = kiln::eager(model, {.backend = kiln::testing::test_backend()});
  const auto got = eager(inputs);
  BOOST_TEST(kiln::max_abs_diff(got[1], want[1]) <= 1e-4f);

  // The setting keeps every shape baked in: one kernel per shape.
  kiln::CompiledModel baked = kiln::compile(model, {.backend = kiln::testing::test_backend(), .settings = {{"parameterise", "off"}}});
  const auto baked_out = baked(inputs);
  BOOST_TEST(baked.stats().kernels == 2);
  BOOST_TEST(kiln::max_abs_diff(baked_out[0], want[0]) <= 1e-4f);
}

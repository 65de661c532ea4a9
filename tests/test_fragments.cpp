// Matrix fragments in the kernel IR (src/kernel/ir.h): the rounding of
// multiply inputs, what verify() refuses, and the interpreter's semantics,
// which every rendering (tensor cores, MFMA, cooperative matrices, the cpu
// backend's emulation) is checked against.
#define BOOST_TEST_MODULE fragments
#include <boost/test/unit_test.hpp>

#include <kiln/error.h>
#include <kiln/float16.h>

#include "fragment_kernels.h"
#include "src/kernel/interpreter.h"
#include "src/kernel/ir.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

using namespace kiln::kir;

namespace {

constexpr ScalarType F = ScalarType::f32;

std::string internal_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const kiln::Error& e) {
    BOOST_TEST(static_cast<int>(e.kind()) == static_cast<int>(kiln::ErrorKind::Internal));
    return e.what();
  }
  BOOST_FAIL("expected kiln::Error(Internal)");
  return {};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

template <class T>
std::span<std::byte> bytes(std::vector<T>& v) {
  return std::as_writable_bytes(std::span<T>(v));
}

void run(const Kernel& kernel, std::vector<std::span<std::byte>> buffers) { interpret(kernel, buffers); }

float from_bits(std::uint32_t bits) { return std::bit_cast<float>(bits); }

std::vector<float> random_values(std::size_t count, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

// What the fragment semantics give: inputs rounded to the precision, each
// step of 8 summed exactly and rounded once to f32 onto the accumulator.
std::vector<float> fragment_reference(const std::vector<float>& a, const std::vector<float>& b, int m, int n, int k,
                                      MatrixPrecision precision) {
  std::vector<float> y(static_cast<std::size_t>(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int k0 = 0; k0 < k; k0 += 8) {
        double sum = acc;
        for (int p = k0; p < std::min(k, k0 + 8); ++p)
          sum += static_cast<double>(round_to_precision(a[static_cast<std::size_t>(i * k + p)], precision)) *
                 round_to_precision(b[static_cast<std::size_t>(p * n + j)], precision);
        acc = static_cast<float>(sum);
      }
      y[static_cast<std::size_t>(i * n + j)] = acc;
    }
  return y;
}

}  // namespace

BOOST_AUTO_TEST_CASE(tf32_rounds_to_nearest_with_ties_away_from_zero) {
  const MatrixPrecision t = MatrixPrecision::tf32;
  // TF32 keeps 10 mantissa bits: its unit at 1 is 2^-10.
  BOOST_TEST(round_to_precision(1.0f + std::ldexp(1.0f, -10), t) == 1.0f + std::ldexp(1.0f, -10));
  BOOST_TEST(round_to_precision(1.0f + std::ldexp(1.0f, -12), t) == 1.0f);                          // below half
  BOOST_TEST(round_to_precision(1.0f + std::ldexp(1.0f, -11), t) == 1.0f + std::ldexp(1.0f, -10));  // a tie: away
  BOOST_TEST(round_to_precision(-(1.0f + std::ldexp(1.0f, -11)), t) == -(1.0f + std::ldexp(1.0f, -10)));
  BOOST_TEST(round_to_precision(1.0f + 3 * std::ldexp(1.0f, -11), t) == 1.0f + std::ldexp(1.0f, -9));  // a tie: away
  BOOST_TEST(round_to_precision(from_bits(0x3f801fffu), t) == 1.0f + std::ldexp(1.0f, -10));  // just above half
  // A carry into the exponent, and past the largest finite value.
  BOOST_TEST(round_to_precision(from_bits(0x3ffff000u), t) == 2.0f);
  BOOST_TEST(std::isinf(round_to_precision(std::numeric_limits<float>::max(), t)));
  BOOST_TEST(round_to_precision(std::numeric_limits<float>::infinity(), t) == std::numeric_limits<float>::infinity());
  BOOST_TEST(std::isnan(round_to_precision(std::numeric_limits<float>::quiet_NaN(), t)));
  BOOST_TEST(std::bit_cast<std::uint32_t>(round_to_precision(-0.0f, t)) == 0x80000000u);
  // f16 and bf16 inputs round as their storage does (ties to even).
  for (const float x : {1.0f + std::ldexp(1.0f, -11), 70000.0f, 3.14159f, 1e-6f})
    BOOST_TEST(round_to_precision(x, MatrixPrecision::f16) == kiln::f16_value(kiln::f16_bits(x)));
  BOOST_TEST(round_to_precision(1.0f + std::ldexp(1.0f, -8), MatrixPrecision::bf16) == 1.0f);
}

BOOST_AUTO_TEST_CASE(a_fragment_gemm_computes_the_rounded_product) {
  // 40 x 20 times 20 x 56: edge tiles in every dimension (k in steps of 8,
  // m and n not multiples of 16), so rows and cols bound loads and stores.
  const int m = 40, n = 56, k = 20;
  for (const MatrixPrecision precision : {MatrixPrecision::tf32, MatrixPrecision::f16, MatrixPrecision::bf16}) {
    BOOST_TEST_CONTEXT(matrix_precision_name(precision)) {
      std::vector<float> a = random_values(static_cast<std::size_t>(m) * k, 1);
      std::vector<float> b = random_values(static_cast<std::size_t>(k) * n, 2);
      const std::vector<float> want = fragment_reference(a, b, m, n, k, precision);
      // Subgroups of 32 lanes (a warp), and of one (the cpu emulation): the
      // same semantics whoever holds the fragment.
      for (const auto& [subgroup, workgroup] : {std::pair{32u, 64u}, std::pair{1u, 3u}}) {
        BOOST_TEST_CONTEXT("subgroup " << subgroup << ", workgroup " << workgroup) {
          std::vector<float> y(static_cast<std::size_t>(m) * n, -7.0f);
          run(kiln::test::fragment_gemm(m, n, k, subgroup, workgroup, precision), {bytes(a), bytes(b), bytes(y)});
          for (std::size_t i = 0; i < y.size(); ++i) BOOST_TEST_REQUIRE(y[i] == want[i], "element " << i);
        }
      }
      // And within the precision's bound of the f32 product.
      double worst = 0;
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double exact = 0, scale = 0;
          for (int p = 0; p < k; ++p) {
            exact += static_cast<double>(a[static_cast<std::size_t>(i * k + p)]) * b[static_cast<std::size_t>(p * n + j)];
            scale += std::fabs(static_cast<double>(a[static_cast<std::size_t>(i * k + p)]) *
                               b[static_cast<std::size_t>(p * n + j)]);
          }
          worst = std::max(worst, std::fabs(want[static_cast<std::size_t>(i * n + j)] - exact) / scale);
        }
      const double unit = precision == MatrixPrecision::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
      BOOST_TEST(worst <= 2 * unit);
      BOOST_TEST(worst > 0.0);  // the inputs were rounded
    }
  }
}

BOOST_AUTO_TEST_CASE(fragments_load_16_bit_buffers_and_column_major_tiles) {
  // An f16 a read from an f16 buffer; b read column-major (b^T stored row-major).
  const FragmentShape shape{16, 8, 8};
  Kernel kernel("f16_tiles");
  const Buf a = kernel.add_buffer("a", ScalarType::f16, Access::read);
  const Buf bt = kernel.add_buffer("bt", F, Access::read);
  const Buf y = kernel.add_buffer("y", ScalarType::bf16, Access::write);
  kernel.subgroup_size = 4;
  kernel.workgroup_size = 4;
  kernel.global_size = 4;
  const Frag fa = kernel.add_fragment("fa", FragmentRole::a, shape, MatrixPrecision::f16);
  const Frag fb = kernel.add_fragment("fb", FragmentRole::b, shape, MatrixPrecision::f16);
  const Frag acc = kernel.add_fragment("acc", FragmentRole::accumulator, shape);
  kernel.body = {fragment_fill(acc, f32(0.5)),
                 fragment_load(fa, a, i32(0), i32(8), i32(16), i32(8)),
                 fragment_load(fb, bt, i32(0), i32(8), i32(8), i32(8), /*column_major=*/true),
                 fragment_mma(acc, fa, fb, acc),
                 fragment_store(acc, y, i32(0), i32(8), i32(16), i32(8))};
  std::vector<std::uint16_t> a_bits(16 * 8);
  std::vector<float> a_values = random_values(16 * 8, 3), bt_values = random_values(8 * 8, 4);
  for (std::size_t i = 0; i < a_bits.size(); ++i) a_bits[i] = kiln::f16_bits(a_values[i]);
  std::vector<std::uint16_t> y_bits(16 * 8);
  run(kernel, {bytes(a_bits), bytes(bt_values), bytes(y_bits)});
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      double sum = 0.5;
      for (int p = 0; p < 8; ++p)
        sum += static_cast<double>(kiln::f16_value(a_bits[static_cast<std::size_t>(i * 8 + p)])) *
               round_to_precision(bt_values[static_cast<std::size_t>(j * 8 + p)], MatrixPrecision::f16);
      BOOST_TEST(y_bits[static_cast<std::size_t>(i * 8 + j)] == kiln::bf16_bits(static_cast<float>(sum)),
                 "element " << i << "," << j);
    }
}

BOOST_AUTO_TEST_CASE(fragments_go_through_shared_memory_with_barriers) {
  // The accumulator staged in shared memory, read back by every invocation
  // after a barrier (an epilogue's shape); without the barrier, a race.
  const FragmentShape shape{8, 8, 8};
  for (const bool with_barrier : {true, false}) {
    Kernel kernel("staged");
    const Buf a = kernel.add_buffer("a", F, Access::read);
    const Buf y = kernel.add_buffer("y", F, Access::write);
    const Shared tile = kernel.add_shared("tile", F, 8 * 64);
    kernel.subgroup_size = 8;
    kernel.workgroup_size = 64;
    kernel.global_size = 64;
    const Frag acc = kernel.add_fragment("acc", FragmentRole::accumulator, shape);
    // Each of the 8 subgroups stores its tile (the same one) to its own region.
    kernel.body = {fragment_load(acc, a, i32(0), i32(8), i32(8), i32(8)),
                   fragment_store(acc, tile, subgroup_id() * i32(64), i32(8), i32(8), i32(8))};
    if (with_barrier) kernel.body.push_back(barrier());
    kernel.body.push_back(store(y, global_index(), load(tile, global_index(), F) * f32(2.0)));
    std::vector<float> in = random_values(64, 5), out(64);
    if (!with_barrier) {
      BOOST_TEST(contains(internal_error([&] { run(kernel, {bytes(in), bytes(out)}); }), "(a race)"));
      continue;
    }
    run(kernel, {bytes(in), bytes(out)});
    for (std::size_t i = 0; i < 64; ++i) BOOST_TEST(out[i] == in[i] * 2.0f);
  }
}

BOOST_AUTO_TEST_CASE(fragment_operands_must_agree_within_a_subgroup) {
  const FragmentShape shape{8, 8, 8};
  Kernel kernel("divergent");
  const Buf a = kernel.add_buffer("a", F, Access::read);
  kernel.subgroup_size = 4;
  kernel.workgroup_size = 4;
  kernel.global_size = 4;
  const Frag acc = kernel.add_fragment("acc", FragmentRole::accumulator, shape);
  kernel.body = {fragment_load(acc, a, subgroup_lane(), i32(8), i32(8), i32(8))};
  std::vector<float> in(128);
  BOOST_TEST(contains(internal_error([&] { run(kernel, {bytes(in)}); }),
                      "the index of a fragment statement on 'acc' differs between lanes of one subgroup"));
  // A tile reaching past its buffer is out of bounds, as a load is.
  kernel.body = {fragment_load(acc, a, i32(80), i32(8), i32(8), i32(8))};
  BOOST_TEST(contains(internal_error([&] { run(kernel, {bytes(in)}); }), "out of bounds"));
}

BOOST_AUTO_TEST_CASE(verify_checks_fragments) {
  const FragmentShape shape{16, 16, 8};
  auto base = [&] {
    Kernel k("frag");
    k.add_buffer("x", F, Access::read);
    k.add_buffer("y", F, Access::write);
    k.subgroup_size = 32;
    k.workgroup_size = 32;
    k.global_size = 32;
    k.add_fragment("fa", FragmentRole::a, shape);
    k.add_fragment("fb", FragmentRole::b, shape);
    k.add_fragment("acc", FragmentRole::accumulator, shape);
    return k;
  };
  const Frag fa{0, "fa"}, fb{1, "fb"}, acc{2, "acc"};
  const Buf x{0}, y{1};
  auto refused = [&](Kernel k) { return internal_error([&] { verify(k); }); };

  Kernel k = base();
  k.body = {fragment_fill(acc, f32(0.0)), fragment_load(fa, x, i32(0), i32(8), i32(16), i32(8)),
            fragment_load(fb, x, i32(0), i32(16), i32(8), i32(16)), fragment_mma(acc, fa, fb, acc),
            fragment_store(acc, y, i32(0), i32(16), i32(16), i32(16))};
  verify(k);

  k = base();
  k.subgroup_size = 0;
  BOOST_TEST(contains(refused(k), "declares matrix fragments but no subgroup_size"));
  k = base();
  k.body = {fragment_mma(acc, fb, fa, acc)};
  BOOST_TEST(contains(refused(k), "fragment 'fb' is b, not a"));
  k = base();
  k.body = {fragment_store(fa, y, i32(0), i32(8), i32(16), i32(8))};
  BOOST_TEST(contains(refused(k), "fragment 'fa' is a, not accumulator"));
  k = base();
  k.body = {fragment_store(acc, x, i32(0), i32(16), i32(16), i32(16))};
  BOOST_TEST(contains(refused(k), "declared read-only"));
  k = base();
  k.body = {branch(global_index() < i32(16), {fragment_fill(acc, f32(0.0))})};
  BOOST_TEST(contains(refused(k), "fragment fill inside a branch whose condition may differ"));
  k = base();
  k.add_fragment("small", FragmentRole::accumulator, FragmentShape{16, 8, 8});
  k.body = {fragment_mma(Frag{3, "small"}, fa, fb, acc)};
  BOOST_TEST(contains(refused(k), "has another shape"));
  k = base();
  k.fragments[1].precision = MatrixPrecision::f16;
  k.body = {fragment_mma(acc, fa, fb, acc)};
  BOOST_TEST(contains(refused(k), "a is tf32, b f16"));
  k = base();
  k.body = {fragment_fill(Frag{7, "missing"}, f32(0.0))};
  BOOST_TEST(contains(refused(k), "undeclared fragment 'missing'"));
  k = base();
  k.fragments[0].shape = FragmentShape{16, 16, 0};
  BOOST_TEST(contains(refused(k), "each dimension in [1, 64]"));
  BOOST_CHECK_THROW(base().add_fragment("fa", FragmentRole::a, shape), kiln::Error);  // a duplicate name
}

BOOST_AUTO_TEST_CASE(print_shows_fragments_and_their_accesses) {
  Kernel k = kiln::test::fragment_gemm(16, 16, 8, 32, 32, MatrixPrecision::bf16);
  const std::string text = print(k);
  BOOST_TEST(contains(text, "fragment 0 fa: a 16x16x8 bf16\n"), text);
  BOOST_TEST(contains(text, "fragment 2 acc: accumulator 16x16x8 f32\n"), text);
  BOOST_TEST(contains(text, "fragment acc = fill(0.0)"), text);
  BOOST_TEST(contains(text, "fragment acc = mma(fa, fb, acc)"), text);
  BOOST_TEST(contains(text, "fragment fa = a.tile[((row0 * 8) + kk), stride 8, rows (16 - row0), cols (8 - kk)]"),
             text);
  BOOST_TEST(contains(text, "y.tile[((row0 * 16) + col0), stride 16, rows (16 - row0), cols (16 - col0)] = fragment acc"),
             text);
  // Layout and precision are part of the kernel's text (caches key on it).
  Kernel other = k;
  other.fragments[0].precision = MatrixPrecision::f16;
  other.fragments[1].precision = MatrixPrecision::f16;
  BOOST_TEST(print(other) != text);
  other = k;
  other.body[4].body[1].column_major = true;
  BOOST_TEST(contains(print(other), "b.tile_col_major["));
}

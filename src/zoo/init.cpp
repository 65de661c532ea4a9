#include "src/zoo/init.h"

#include "src/base/check.h"

#include <array>
#include <cmath>

// Fused multiply-add would change the last bits on machines that have it.
// GCC never contracts in ISO mode (-std=c++20, as this project builds);
// clang needs to be told.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

namespace kiln::models::init {

std::uint64_t Rng::next_u64() {
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Rng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  // Polar method: a point uniform in the unit disc gives two independent
  // normals with only log and sqrt, no trigonometry.
  double u = 0.0, v = 0.0, s = 0.0;
  do {
    u = 2.0 * uniform() - 1.0;
    v = 2.0 * uniform() - 1.0;
    s = u * u + v * v;
  } while (s >= 1.0 || s == 0.0);
  const double factor = std::sqrt(-2.0 * portable_log(s) / s);
  spare_ = v * factor;
  has_spare_ = true;
  return u * factor;
}

namespace {

// 1/(2k+1) for the atanh series; evaluated by the compiler with IEEE rounding.
constexpr std::array<double, 12> kAtanhCoefficients = [] {
  std::array<double, 12> c{};
  for (std::size_t k = 0; k < c.size(); ++k) c[k] = 1.0 / static_cast<double>(2 * k + 1);
  return c;
}();

}  // namespace

double portable_log(double x) {
  KILN_ASSERT(x > 0.0 && std::isfinite(x));
  int exponent = 0;
  double m = std::frexp(x, &exponent);  // exact: x = m * 2^exponent, m in [0.5, 1)
  if (m < 0.70710678118654752440) {
    m *= 2.0;
    --exponent;
  }
  // log(m) = 2 atanh(s) with |s| <= 0.172, so 12 terms reach double precision.
  const double s = (m - 1.0) / (m + 1.0);
  const double s2 = s * s;
  double series = 0.0;
  for (std::size_t k = kAtanhCoefficients.size(); k-- > 0;) series = series * s2 + kAtanhCoefficients[k];
  return 2.0 * s * series + static_cast<double>(exponent) * 0.69314718055994530942;
}

std::uint64_t tensor_seed(std::uint64_t model_seed, std::string_view tensor_name) {
  std::uint64_t hash = 0xCBF29CE484222325ull;  // FNV-1a
  for (char c : tensor_name) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001B3ull;
  }
  return Rng(model_seed ^ hash).next_u64();
}

Tensor normal(Shape shape, double mean, double stddev, std::uint64_t seed) {
  Tensor t(DType::f32, std::move(shape));
  Rng rng(seed);
  for (float& x : t.values<float>()) x = static_cast<float>(mean + stddev * rng.normal());
  return t;
}

Tensor uniform(Shape shape, double low, double high, std::uint64_t seed) {
  Tensor t(DType::f32, std::move(shape));
  Rng rng(seed);
  for (float& x : t.values<float>()) x = static_cast<float>(low + (high - low) * rng.uniform());
  return t;
}

Tensor kaiming_normal_fan_out(Shape shape, std::uint64_t seed) {
  KILN_CHECK(shape.size() >= 2, ErrorKind::InvalidArgument,
             "kaiming_normal_fan_out needs a weight of rank >= 2, got " + shape_str(shape));
  const std::int64_t fan_out = num_elements(shape) / shape[1];  // out * kh * kw
  return normal(std::move(shape), 0.0, std::sqrt(2.0 / static_cast<double>(fan_out)), seed);
}

}  // namespace kiln::models::init

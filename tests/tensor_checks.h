// Random f32 tensors and their comparison, for suites that check a rewritten
// graph or a compiled model against the reference. Shared by the winograd and
// pack_matmul suites; include after <boost/test/unit_test.hpp>.
#pragma once

#include <kiln/tensor.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace tensor_checks {

// Values uniform in [-1, 1), the same for the same shape and seed.
inline kiln::Tensor random_tensor(const kiln::Shape& shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  kiln::Tensor t(kiln::DType::f32, shape);
  for (float& v : t.values<float>()) v = dist(rng);
  return t;
}

// max |actual - expected| / max |expected|.
inline double relative_difference(const kiln::Tensor& actual, const kiln::Tensor& expected) {
  BOOST_REQUIRE(actual.shape() == expected.shape());
  auto a = actual.values<float>();
  auto e = expected.values<float>();
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::fabs(double(a[i]) - e[i]));
    scale = std::max(scale, std::fabs(double(e[i])));
  }
  BOOST_REQUIRE(scale > 0);
  return worst / scale;
}

}  // namespace tensor_checks

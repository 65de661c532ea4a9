// Small seeded models for the suites that call models from several threads
// and chain them on the device (threads, device_io). Include after
// <boost/test/unit_test.hpp>.
#pragma once

#include <kiln/kiln.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace small_models {

// Values uniform in [-scale, scale), the same for the same shape and seed.
inline kiln::Tensor random_tensor(const kiln::Shape& shape, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  kiln::Tensor t(kiln::DType::f32, shape);
  for (float& v : t.values<float>()) v = dist(rng);
  return t;
}

// x[1, 3, 16, 16] -> Conv 3x3 + bias, Relu, Conv 3x3 + the first's output
// (a residual) -> features[1, 8, 16, 16].
inline kiln::Model trunk(unsigned seed = 1) {
  kiln::Builder b("trunk");
  auto x = b.input("x", kiln::DType::f32, {1, 3, 16, 16});
  auto w1 = b.constant("conv1.weight", random_tensor({8, 3, 3, 3}, seed, 0.5f));
  auto b1 = b.constant("conv1.bias", random_tensor({8}, seed + 1, 0.1f));
  auto w2 = b.constant("conv2.weight", random_tensor({8, 8, 3, 3}, seed + 2, 0.3f));
  auto y1 = b.relu(b.conv2d(x, w1, b1, {.padding = {1, 1, 1, 1}}));
  auto y2 = b.add(b.conv2d(y1, w2, std::nullopt, {.padding = {1, 1, 1, 1}}), y1);
  return b.build({y2});
}

// features[1, 8, 16, 16] -> global average pool, MatMul + bias, Softmax -> [1, 10].
inline kiln::Model head(unsigned seed = 11) {
  kiln::Builder b("head");
  auto x = b.input("features", kiln::DType::f32, {1, 8, 16, 16});
  auto w = b.constant("fc.weight", random_tensor({8, 10}, seed, 1.0f));
  auto bias = b.constant("fc.bias", random_tensor({10}, seed + 1, 0.1f));
  auto pooled = b.flatten(b.global_avg_pool(x));
  return b.build({b.softmax(b.add(b.matmul(pooled, w), bias))});
}

// x[4, 32] -> MatMul + bias, Gelu, MatMul -> [4, 16]; and the hidden layer [4, 64].
inline kiln::Model mlp(unsigned seed = 21) {
  kiln::Builder b("mlp");
  auto x = b.input("x", kiln::DType::f32, {4, 32});
  auto w1 = b.constant("fc1.weight", random_tensor({32, 64}, seed, 0.2f));
  auto b1 = b.constant("fc1.bias", random_tensor({64}, seed + 1, 0.1f));
  auto w2 = b.constant("fc2.weight", random_tensor({64, 16}, seed + 2, 0.2f));
  auto hidden = b.gelu(b.add(b.matmul(x, w1), b1));
  return b.build({b.matmul(hidden, w2), hidden});
}

// The largest |a - b| over every output; fails the test on a count, dtype or shape mismatch.
inline float max_difference(const std::vector<kiln::Tensor>& got, const std::vector<kiln::Tensor>& want) {
  BOOST_TEST_REQUIRE(got.size() == want.size());
  float worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    BOOST_TEST_REQUIRE((got[i].dtype() == want[i].dtype()));
    BOOST_TEST_REQUIRE(got[i].shape() == want[i].shape());
    worst = std::max(worst, kiln::max_abs_diff(got[i], want[i]));
  }
  return worst;
}

inline std::vector<kiln::Tensor> to_host(const std::vector<kiln::DeviceTensor>& tensors) {
  std::vector<kiln::Tensor> host;
  for (const kiln::DeviceTensor& t : tensors) host.push_back(t.to_host());
  return host;
}

}  // namespace small_models

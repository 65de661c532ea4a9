#define BOOST_TEST_MODULE resnet
#include <boost/test/unit_test.hpp>

#include <kiln/kiln.h>

#include "test_backend.h"
#include "graph/op_registry.h"
#include "src/runtime/internal_access.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

// ResNet-18 (torchvision architecture, seeded weights): reference vs eager vs
// compiled, on Vulkan. Sizes are kept small so CI stays fast; `kiln run`
// exercises 224x224.

namespace {

kiln::Tensor ramp_input(const kiln::Shape& shape) {
  kiln::Tensor t(kiln::DType::f32, shape);
  auto v = t.values<float>();
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37f * static_cast<float>(i)) * 1.5f;
  return t;
}

float max_abs(const kiln::Tensor& t) {
  float m = 0;
  for (float v : t.values<float>()) m = std::max(m, std::fabs(v));
  return m;
}

void check_model(std::int64_t batch, std::int64_t size) {
  auto model = kiln::models::resnet18({.batch = batch, .image_size = size, .num_classes = 1000, .seed = 0});
  auto x = ramp_input({batch, 3, size, size});
  auto want = kiln::graph::run_reference(kiln::internal::graph(model), std::vector<kiln::Tensor>{x});
  BOOST_REQUIRE_EQUAL(want.size(), 1u);
  BOOST_REQUIRE(want[0].shape() == (kiln::Shape{batch, 1000}));
  const float scale = std::max(1.0f, max_abs(want[0]));
  BOOST_TEST_MESSAGE("largest |logit| " << scale);

  auto eager = kiln::eager(model, {.backend = kiln::testing::test_backend()});
  auto e = eager({x});
  BOOST_TEST(kiln::max_abs_diff(e[0], want[0]) <= 2e-4f * scale);

  auto compiled = kiln::compile(model, {.backend = kiln::testing::test_backend(), .fullgraph = true});
  auto c = compiled({x});
  BOOST_TEST(kiln::max_abs_diff(c[0], want[0]) <= 2e-4f * scale);
  BOOST_TEST(kiln::max_abs_diff(c[0], e[0]) <= 2e-4f * scale);

  auto replayed = kiln::compile(model, {.backend = kiln::testing::test_backend(), .mode = kiln::Mode::reduce_overhead, .fullgraph = true});
  auto r1 = replayed({x});
  auto r2 = replayed({x});
  BOOST_TEST(kiln::max_abs_diff(r1[0], c[0]) <= 1e-6f * scale);
  BOOST_TEST(kiln::max_abs_diff(r2[0], r1[0]) == 0.0f);

  // The logits must carry signal: not constant across classes.
  auto v = c[0].values<float>();
  BOOST_TEST(*std::max_element(v.begin(), v.end()) - *std::min_element(v.begin(), v.end()) > 1e-3f);

  // 20 BN folded away and 9 ReLUs fused: fewer dispatches than eager.
  BOOST_TEST(compiled.stats().dispatches_per_run < eager.stats().dispatches_per_run);
  BOOST_TEST_MESSAGE("resnet18 batch " << batch << " " << size << "x" << size << ": eager "
                     << eager.stats().dispatches_per_run << " dispatches, compiled "
                     << compiled.stats().dispatches_per_run);
}

}  // namespace

BOOST_AUTO_TEST_CASE(resnet18_64px_batch1) { check_model(1, 64); }

BOOST_AUTO_TEST_CASE(resnet18_96px_batch2) { check_model(2, 96); }

BOOST_AUTO_TEST_CASE(resnet18_explain_mentions_passes_and_memory) {
  auto model = kiln::models::resnet18({.image_size = 32});
  auto compiled = kiln::compile(model, {.backend = kiln::testing::test_backend()});
  compiled.prepare();
  const std::string text = compiled.explain();
  BOOST_TEST(text.find("fold_batch_norm") != std::string::npos);
  BOOST_TEST(text.find("memory:") != std::string::npos);
  BOOST_TEST(text.find("layer4.1.conv2") != std::string::npos);
}

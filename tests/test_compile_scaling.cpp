#define BOOST_TEST_MODULE compile_scaling
#include <boost/test/unit_test.hpp>

// Long graphs compile in time linear in their size: chains of tens of
// thousands of nodes and a transformer-shaped graph of thousands, planned
// and compiled on Vulkan, against the reference. Nothing here asserts a
// time: the suite's timeout (tests/meson.build) is the bound, and any step
// quadratic in the node count exceeds it by far (a 4,000-node chain once
// took 90 s to build and compile). docs/benchmarks/compile-scaling.md has
// the measured times.

#include <kiln/builder.h>
#include <kiln/kiln.h>

#include "graph/ir.h"
#include "graph/op_registry.h"
#include "graph/passes/passes.h"
#include "src/fuse/schedule.h"
#include "tensor_checks.h"
#include "tools/bench/scaling_models.h"
#include "src/runtime/internal_access.h"

#include <string>
#include <vector>

namespace {

using kiln::DType;
using kiln::Tensor;
using tensor_checks::random_tensor;
using tensor_checks::relative_difference;

// `nodes` pointwise ops on x [4, 64], cycling through Add of one bias
// vector, Mul by one scale and Relu: a value that keeps changing (a Relu
// chain alone would hide a dropped node) from operands every fused kernel
// shares.
kiln::Model pointwise_chain(int nodes) {
  kiln::Builder b("pointwise_chain");
  auto y = b.input("x", DType::f32, {4, 64});
  auto bias = b.constant("bias", random_tensor({64}, 2));
  auto scale = b.constant("scale", Tensor::scalar_f32(1.0001f));
  for (int i = 0; i < nodes; ++i) y = i % 3 == 0 ? b.add(y, bias) : i % 3 == 1 ? b.mul(y, scale) : b.relu(y);
  return b.build({y});
}

// The passes, lowering and fusion must run in every test run: a plan cache
// entry from an earlier run would skip what these tests time out on.
const kiln::CompileOptions kPlanEveryTime{.backend = "vulkan", .settings = {{"plan_cache", "off"}}};

std::size_t groups_of(std::size_t nodes) { return (nodes + kiln::fuse::kMaxFusedNodes - 1) / kiln::fuse::kMaxFusedNodes; }

}  // namespace

BOOST_AUTO_TEST_CASE(long_pointwise_chain_compiles_to_bounded_kernels_and_matches_the_reference) {
  constexpr int kNodes = 20000;
  const kiln::Model model = pointwise_chain(kNodes);
  const std::vector<Tensor> inputs = {random_tensor({4, 64}, 1)};
  const Tensor expected = kiln::graph::run_reference(kiln::internal::graph(model), inputs)[0];

  kiln::CompiledModel compiled = kiln::compile(model, kPlanEveryTime);
  compiled.prepare();
  const Tensor got = compiled(inputs)[0];
  BOOST_TEST(relative_difference(got, expected) < 1e-5);
  BOOST_TEST(compiled.stats().dispatches_per_run == static_cast<int>(groups_of(kNodes)));
  // One kernel per phase of the Add-Mul-Relu cycle a group starts at, and the shorter last group.
  BOOST_TEST(compiled.stats().kernels <= 4);
}

BOOST_AUTO_TEST_CASE(transformer_shaped_graph_compiles_and_matches_the_reference) {
  constexpr int kBlocks = 150;
  const kiln::Model model = kiln::tools::bench::transformer_stack(kBlocks);
  BOOST_TEST(kiln::internal::graph(model).nodes().size() == static_cast<std::size_t>(kBlocks * kiln::tools::bench::kTransformerBlockNodes));
  const std::vector<Tensor> inputs = {random_tensor({8, 16}, 3)};
  const Tensor expected = kiln::graph::run_reference(kiln::internal::graph(model), inputs)[0];

  kiln::CompiledModel compiled = kiln::compile(model, kPlanEveryTime);
  compiled.prepare();
  const Tensor got = compiled(inputs)[0];
  BOOST_TEST(relative_difference(got, expected) < 1e-4);
  // Every block is planned alike: a handful of pipelines however many blocks.
  BOOST_TEST(compiled.stats().kernels <= 12);
  BOOST_TEST(compiled.stats().dispatches_per_run < kBlocks * kiln::tools::bench::kTransformerBlockNodes / 2);
}

BOOST_AUTO_TEST_CASE(hundred_thousand_node_chain_builds_passes_and_plans) {
  // No device: building, the compile passes, lowering and fusion alone.
  constexpr std::size_t kNodes = 100000;
  const kiln::Model model = kiln::tools::bench::relu_chain(static_cast<std::int64_t>(kNodes));
  BOOST_TEST(kiln::internal::graph(model).nodes().back().name == "relu_" + std::to_string(kNodes - 1));
  const kiln::graph::passes::PipelineResult passed =
      kiln::graph::passes::run_compile_passes(kiln::internal::graph(model), {.cpu_device = true});
  BOOST_REQUIRE(passed.graph.nodes().size() == kNodes);

  kiln::fuse::PlanOptions options;
  options.fuse = true;
  options.target.device_class = kiln::lower::DeviceClass::emulated_gpu;
  const kiln::fuse::KernelPlan plan = kiln::fuse::plan_kernels(passed.graph, options);
  BOOST_REQUIRE(plan.steps.size() == groups_of(kNodes));
  for (std::size_t i = 0; i + 1 < plan.steps.size(); ++i) BOOST_TEST(plan.steps[i].nodes.size() == kiln::fuse::kMaxFusedNodes);
  BOOST_TEST(plan.steps.back().nodes.size() == kNodes - (plan.steps.size() - 1) * kiln::fuse::kMaxFusedNodes);
}

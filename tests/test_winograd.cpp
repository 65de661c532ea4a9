#define BOOST_TEST_MODULE winograd
#include <boost/test/unit_test.hpp>

// The winograd compile pass and its ops (WinogradInput, WinogradOutput): the
// rewritten graph against the original Conv on the reference implementation
// and on Vulkan (compiled mode), which convolutions it takes, and how the
// scheduler fuses what follows.

#include <kiln/builder.h>
#include <kiln/kiln.h>

#include "backends/registry.h"
#include "graph/ir.h"
#include "graph/op_registry.h"
#include "graph/passes/passes.h"
#include "src/fuse/schedule.h"
#include "src/render/cstyle.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

using kiln::DType;
using kiln::Shape;
using kiln::Tensor;
namespace passes = kiln::graph::passes;

Tensor random_tensor(const Shape& shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Tensor t(DType::f32, shape);
  for (float& v : t.values<float>()) v = dist(rng);
  return t;
}

// max |actual - expected| / max |expected|.
double relative_difference(const Tensor& actual, const Tensor& expected) {
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

struct ConvCase {
  std::string name;
  std::int64_t batch, in_channels, out_channels, height, width;
  std::vector<std::int64_t> padding;  // top, left, bottom, right
  std::vector<std::int64_t> dilation;
  bool bias, relu;
};

// Odd and even extents, padding 0, 1, 2 and asymmetric, batch 2, dilations
// (fcn_resnet50's backbone uses 2 and 4), with and without bias and Relu;
// each just above the pass's 8 M multiply-adds.
const std::vector<ConvCase> kCases = {
    {"pad1_bias_relu", 1, 64, 64, 16, 16, {1, 1, 1, 1}, {1, 1}, true, true},
    {"batch2_odd", 2, 64, 72, 13, 9, {1, 1, 1, 1}, {1, 1}, false, false},
    {"pad0_bias", 1, 72, 64, 19, 18, {0, 0, 0, 0}, {1, 1}, true, false},
    {"batch2_dilation2_relu", 2, 64, 64, 13, 11, {2, 2, 2, 2}, {2, 2}, true, true},
    {"asymmetric_dilation3x1", 1, 64, 72, 21, 17, {1, 0, 0, 2}, {3, 1}, false, true},
    {"dilation4", 1, 72, 64, 16, 16, {4, 4, 4, 4}, {4, 4}, true, false},
};

kiln::Model conv_model(const ConvCase& c) {
  kiln::Builder b(c.name);
  auto x = b.input("x", DType::f32, {c.batch, c.in_channels, c.height, c.width});
  auto w = b.constant("w", random_tensor({c.out_channels, c.in_channels, 3, 3}, 1));
  std::optional<kiln::Builder::Value> bias;
  if (c.bias) bias = b.constant("bias", random_tensor({c.out_channels}, 2));
  auto y = b.conv2d(x, w, bias, {.padding = c.padding, .dilation = c.dilation});
  return b.build({c.relu ? b.relu(y) : y});
}

std::vector<std::string> ops_of(const kiln::graph::Graph& g) {
  std::vector<std::string> ops;
  for (const auto& node : g.nodes()) ops.push_back(node.op);
  return ops;
}

// The compile passes up to and including winograd, as compile() runs them.
kiln::graph::Graph winograd_graph(const kiln::graph::Graph& g) {
  return passes::winograd(passes::fuse_activation(g).graph).graph;
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(reference)

BOOST_AUTO_TEST_CASE(rewritten_convolutions_match_the_original) {
  for (const ConvCase& c : kCases) {
    BOOST_TEST_CONTEXT(c.name) {
      const kiln::Model model = conv_model(c);
      const passes::PassResult result = passes::winograd(passes::fuse_activation(model.graph()).graph);
      BOOST_TEST(result.report.changes == 1);
      BOOST_TEST((ops_of(result.graph) == std::vector<std::string>{"WinogradInput", "MatMul", "WinogradOutput"}));
      const std::vector<Tensor> inputs = {random_tensor(model.inputs()[0].shape, 3)};
      const Tensor expected = kiln::graph::run_reference(model.graph(), inputs)[0];
      const Tensor actual = kiln::graph::run_reference(result.graph, inputs)[0];
      const double diff = relative_difference(actual, expected);
      BOOST_TEST_MESSAGE(c.name << ": relative difference " << diff);
      BOOST_TEST(diff < 1e-5);
    }
  }
}

BOOST_AUTO_TEST_CASE(matmul_is_batched_over_the_16_transformed_planes) {
  const ConvCase& c = kCases[1];  // batch 2, 13x9 output: 7x5 tiles per image
  const kiln::graph::Graph g = winograd_graph(conv_model(c).graph());
  const auto& matmul = g.node(1);
  BOOST_TEST(g.value(matmul.inputs[0]).constant.has_value());
  BOOST_TEST((g.value(matmul.inputs[0]).type.shape == Shape{16, 72, 64}));
  // 2 * 7 * 5 = 70 tiles, padded to 80 columns for the GEMM's register tiles.
  BOOST_TEST((g.value(matmul.inputs[1]).type.shape == Shape{16, 64, 80}));
  BOOST_TEST((g.value(matmul.outputs[0]).type.shape == Shape{16, 72, 80}));
  // The Conv's name and its output's name survive on WinogradOutput.
  BOOST_TEST(g.node(2).name == conv_model(c).graph().nodes()[0].name);
}

BOOST_AUTO_TEST_CASE(convolutions_it_does_not_pay_for_are_left_alone) {
  struct Skip {
    std::string why;
    Shape weight;
    std::int64_t size;  // of the square input map
    kiln::Conv2dOptions options;
  };
  // Each with enough multiply-adds but for the reason it names.
  const std::vector<Skip> skips = {
      {"few input channels", {64, 3, 3, 3}, 128, {.padding = {1, 1, 1, 1}}},
      {"few output channels", {32, 64, 3, 3}, 32, {.padding = {1, 1, 1, 1}}},
      {"strided", {64, 64, 3, 3}, 64, {.stride = {2, 2}, .padding = {1, 1, 1, 1}}},
      {"grouped", {128, 64, 3, 3}, 32, {.padding = {1, 1, 1, 1}, .groups = 2}},
      {"1x1", {64, 64, 1, 1}, 32, {}},
      {"5x5", {64, 64, 5, 5}, 32, {.padding = {2, 2, 2, 2}}},
      {"too little work (two more dispatches would cost more)", {64, 64, 3, 3}, 8, {.padding = {1, 1, 1, 1}}},
      // Rate 12 on 14x14 (DeepLabV3's ASPP): 144 nearly empty tiles for 196 pixels.
      {"more multiplies than the direct convolution", {256, 960, 3, 3}, 14,
       {.padding = {12, 12, 12, 12}, .dilation = {12, 12}}},
  };
  for (const Skip& skip : skips) {
    BOOST_TEST_CONTEXT(skip.why) {
      kiln::Builder b("skip");
      const std::int64_t groups = skip.options.groups;
      auto x = b.input("x", DType::f32, {1, skip.weight[1] * groups, skip.size, skip.size});
      auto y = b.conv2d(x, b.constant("w", random_tensor(skip.weight, 4)), std::nullopt, skip.options);
      const kiln::Model model = b.build({y});
      BOOST_TEST(passes::winograd(model.graph()).report.changes == 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(switch_turns_the_pass_off) {
  const kiln::Model model = conv_model(kCases[0]);
  const ScopedEnv off("KILN_NO_WINOGRAD", "1");
  const passes::PassResult result = passes::winograd(model.graph());
  BOOST_TEST(result.report.changes == 0);
  BOOST_TEST((ops_of(result.graph) == ops_of(model.graph())));
  BOOST_TEST(result.report.details.at(0) == "disabled by KILN_NO_WINOGRAD");
}

BOOST_AUTO_TEST_CASE(pipeline_runs_it_before_pack_weights) {
  const passes::PipelineResult result = passes::run_compile_passes(conv_model(kCases[0]).graph());
  const auto position = [&](const std::string& pass) {
    return std::find_if(result.reports.begin(), result.reports.end(),
                        [&](const passes::PassReport& r) { return r.pass == pass; }) -
           result.reports.begin();
  };
  BOOST_TEST(position("winograd") < position("pack_weights"));
  BOOST_TEST(position("fuse_activation") < position("winograd"));
  BOOST_TEST(result.reports[static_cast<std::size_t>(position("pack_weights"))].changes == 0);
  BOOST_TEST((ops_of(result.graph) == std::vector<std::string>{"WinogradInput", "MatMul", "WinogradOutput"}));
}

BOOST_AUTO_TEST_CASE(ops_reject_shapes_that_do_not_fit) {
  kiln::graph::Graph g;
  const auto m = g.add_input("m", {DType::f32, {16, 8, 7}});
  kiln::graph::Attributes attrs;
  attrs.set("output_shape", std::vector<std::int64_t>{2, 8, 4, 4});  // 2 images of 4 tiles: 7 columns are too few
  BOOST_CHECK_THROW(g.add_node("WinogradOutput", {m}, attrs), kiln::Error);
  const auto x = g.add_input("x", {DType::f32, {1, 8, 2, 2}});
  BOOST_CHECK_THROW(g.add_node("WinogradInput", {x}, {}), kiln::Error);  // 2x2 is smaller than the 3x3 window
}

BOOST_AUTO_TEST_CASE(output_transform_is_not_recomputed_inside_a_following_convolution) {
  // ResNet-50's bottleneck: a 3x3 conv feeds a 1x1 conv, which reads each
  // element once per block of output channels; inlining the output transform
  // there as a prologue would redo its 9 loads at every read.
  kiln::Builder b("winograd_then_1x1");
  auto x = b.input("x", DType::f32, {1, 64, 16, 16});
  auto y = b.conv2d(x, b.constant("w", random_tensor({64, 64, 3, 3}, 9)), std::nullopt, {.padding = {1, 1, 1, 1}});
  auto z = b.conv2d(y, b.constant("w2", random_tensor({64, 64, 1, 1}, 10)), std::nullopt);
  const kiln::Model model = b.build({z});
  const kiln::graph::Graph passed = passes::run_compile_passes(model.graph()).graph;
  kiln::fuse::PlanOptions options;
  options.fuse = true;
  const kiln::fuse::KernelPlan plan = kiln::fuse::plan_kernels(passed, options);
  BOOST_REQUIRE(plan.steps.size() == 4u);
  for (const auto& step : plan.steps) BOOST_TEST(step.nodes.size() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(vulkan)

BOOST_AUTO_TEST_CASE(compiled_convolutions_match_the_reference) {
  for (const ConvCase& c : kCases) {
    BOOST_TEST_CONTEXT(c.name) {
      const kiln::Model model = conv_model(c);
      const std::vector<Tensor> inputs = {random_tensor(model.inputs()[0].shape, 5)};
      const Tensor expected = kiln::graph::run_reference(model.graph(), inputs)[0];
      kiln::CompiledModel compiled = kiln::compile(model, {.backend = "vulkan"});
      const double diff = relative_difference(compiled(inputs)[0], expected);
      BOOST_TEST_MESSAGE(c.name << ": relative difference on Vulkan " << diff);
      BOOST_TEST(diff < 1e-5);
      BOOST_TEST(compiled.stats().dispatches_per_run == 3);  // input transform, GEMM, output transform
    }
  }
}

BOOST_AUTO_TEST_CASE(residual_add_and_relu_fuse_into_the_output_transform) {
  // ResNet's block tail: conv (bias) -> + x -> Relu.
  kiln::Builder b("winograd_residual");
  auto x = b.input("x", DType::f32, {1, 64, 16, 16});
  auto y = b.conv2d(x, b.constant("w", random_tensor({64, 64, 3, 3}, 6)), b.constant("bias", random_tensor({64}, 7)),
                    {.padding = {1, 1, 1, 1}});
  const kiln::Model model = b.build({b.relu(b.add(y, x))});
  const kiln::graph::Graph passed = passes::run_compile_passes(model.graph()).graph;

  kiln::fuse::PlanOptions options;
  options.fuse = true;
  const kiln::fuse::KernelPlan plan = kiln::fuse::plan_kernels(passed, options);
  BOOST_REQUIRE(plan.steps.size() == 3u);
  std::vector<std::string> last;
  for (auto id : plan.steps[2].nodes) last.push_back(passed.node(id).op);
  BOOST_TEST((last == std::vector<std::string>{"WinogradOutput", "Add", "Relu"}));
  // The 16 products are one batched GEMM kernel.
  BOOST_TEST(plan.steps[1].nodes.size() == 1u);
  BOOST_TEST(plan.steps[1].kernel->kernel.name.rfind("matmul_", 0) == 0u);

  const std::vector<Tensor> inputs = {random_tensor({1, 64, 16, 16}, 8)};
  const Tensor expected = kiln::graph::run_reference(model.graph(), inputs)[0];
  kiln::CompiledModel compiled = kiln::compile(model, {.backend = "vulkan"});
  const double diff = relative_difference(compiled(inputs)[0], expected);
  BOOST_TEST_MESSAGE("residual block: relative difference on Vulkan " << diff);
  BOOST_TEST(diff < 1e-5);
  BOOST_TEST(compiled.stats().dispatches_per_run == 3);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(codegen)

BOOST_AUTO_TEST_CASE(kernels_compile_for_every_offline_cuda_and_hip_target) {
  // The transforms (with and without padding columns, dilation 1 and 2), the
  // batched GEMM and the output transform with a fused residual Add + Relu.
  kiln::Builder b("winograd_residual");
  auto x = b.input("x", DType::f32, {1, 64, 16, 16});
  auto y = b.conv2d(x, b.constant("w", random_tensor({64, 64, 3, 3}, 11)), std::nullopt, {.padding = {1, 1, 1, 1}});
  std::vector<kiln::graph::Graph> graphs = {passes::run_compile_passes(b.build({b.relu(b.add(y, x))}).graph()).graph};
  for (std::size_t i : {1, 3}) graphs.push_back(passes::run_compile_passes(conv_model(kCases[i]).graph()).graph);

  int compiled = 0;
  for (const kiln::backend::Backend* backend : kiln::backend::all_backends()) {
    if (backend->name() != "cuda" && backend->name() != "hip") continue;
    for (const kiln::graph::Graph& g : graphs) {
      kiln::fuse::PlanOptions options;
      options.fuse = true;
      for (const kiln::fuse::PlanStep& step : kiln::fuse::plan_kernels(g, options).steps) {
        BOOST_REQUIRE(step.kernel.has_value());
        const kiln::backend::KernelSource source =
            kiln::render::make_kernel_source(step.kernel->kernel, backend->language());
        for (const kiln::backend::TargetDesc& target : backend->offline_targets()) {
          BOOST_TEST_CONTEXT(backend->name() << " " << target.arch << " " << source.name) {
            const kiln::backend::KernelBinary binary = backend->compiler().compile(source, target);
            BOOST_TEST(!binary.data.empty());
            ++compiled;
          }
        }
      }
    }
  }
  BOOST_TEST_MESSAGE(compiled << " kernel binaries compiled");
  if (compiled == 0) BOOST_TEST_MESSAGE("no CUDA or HIP code generation in this build: nothing to compile");
}

BOOST_AUTO_TEST_SUITE_END()

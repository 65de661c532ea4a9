#define BOOST_TEST_MODULE fusion
#include <boost/test/unit_test.hpp>

// The fusion scheduler (src/fuse/): fused kernels against the unfused graph's
// reference results on the kernel IR interpreter, the rules for what may be
// fused, and compiled (fused) execution on Vulkan against eager.

#include <kiln/builder.h>
#include <kiln/kiln.h>
#include <kiln/models.h>
#include <kiln/sources.h>

#include "backends/registry.h"
#include "graph/ir.h"
#include "graph/op_registry.h"
#include "graph/passes/passes.h"
#include "src/compile/memory_plan.h"
#include "src/compile/sources.h"
#include "src/fuse/epilogue.h"
#include "src/fuse/prologue.h"
#include "src/fuse/schedule.h"
#include "src/kernel/interpreter.h"
#include "src/render/cstyle.h"
#include "src/runtime/executor.h"
#include "src/runtime/internal_access.h"
#include "test_backend.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace {

using kiln::DType;
using kiln::Shape;
using kiln::Tensor;
using kiln::graph::ValueId;

Tensor random_tensor(const Shape& shape, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t(DType::f32, shape);
  for (float& v : t.values<float>()) v = dist(rng);
  return t;
}

float max_difference(const Tensor& a, const Tensor& b) {
  BOOST_REQUIRE(a.shape() == b.shape());
  float m = 0;
  auto va = a.values<float>();
  auto vb = b.values<float>();
  for (std::size_t i = 0; i < va.size(); ++i) m = std::max(m, std::fabs(va[i] - vb[i]));
  return m;
}

// Every value of `g` computed node by node with the reference implementation.
std::vector<Tensor> reference_values(const kiln::graph::Graph& g, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> values(g.values().size());
  for (const auto& v : g.values())
    if (v.constant) values[static_cast<std::size_t>(v.id)] = *v.constant;
  for (std::size_t i = 0; i < inputs.size(); ++i) values[static_cast<std::size_t>(g.inputs()[i])] = inputs[i];
  for (const auto& node : g.nodes()) {
    std::vector<Tensor> in;
    for (ValueId v : node.inputs) in.push_back(v >= 0 ? values[static_cast<std::size_t>(v)] : Tensor());
    std::vector<Tensor> out = kiln::graph::get_op(node.op).reference(node, in);
    for (std::size_t i = 0; i < out.size(); ++i) values[static_cast<std::size_t>(node.outputs[i])] = out[i];
  }
  return values;
}

// The graph's outputs computed by running the plan's kernels on the
// interpreter (views share their root's memory; host steps use the reference).
std::vector<Tensor> interpret_plan(const kiln::graph::Graph& g, const kiln::fuse::KernelPlan& plan,
                                   const std::vector<Tensor>& inputs) {
  std::vector<Tensor> memory(g.values().size());  // by root value id
  auto root = [&](ValueId v) { return plan.root[static_cast<std::size_t>(v)]; };
  auto tensor_of = [&](ValueId v) -> Tensor& {
    Tensor& t = memory[static_cast<std::size_t>(root(v))];
    if (t.numel() == 0 && kiln::num_elements(g.value(root(v)).type.shape) > 0)
      t = Tensor(DType::f32, g.value(root(v)).type.shape);
    return t;
  };
  for (const auto& v : g.values())
    if (v.constant) memory[static_cast<std::size_t>(v.id)] = v.constant->clone();
  for (std::size_t i = 0; i < inputs.size(); ++i) memory[static_cast<std::size_t>(g.inputs()[i])] = inputs[i].clone();
  for (const auto& step : plan.steps) {
    if (step.host) {
      const auto& node = g.node(step.nodes[0]);
      std::vector<Tensor> in;
      for (ValueId v : node.inputs)
        in.push_back(v >= 0 ? tensor_of(v).reshaped(g.value(v).type.shape) : Tensor());
      std::vector<Tensor> out = kiln::graph::get_op(node.op).reference(node, in);
      for (std::size_t i = 0; i < out.size(); ++i) memory[static_cast<std::size_t>(node.outputs[i])] = out[i];
      continue;
    }
    for (ValueId v : step.kernel->values)
      BOOST_REQUIRE_MESSAGE(!plan.fused_away[static_cast<std::size_t>(v)], "a fused-away value is bound");
    std::vector<std::span<std::byte>> buffers;
    for (ValueId v : step.kernel->values) buffers.push_back(tensor_of(v).bytes());
    kiln::kir::interpret(step.kernel->kernel, buffers);
  }
  std::vector<Tensor> outputs;
  for (ValueId v : g.outputs()) outputs.push_back(tensor_of(v).reshaped(g.value(v).type.shape));
  return outputs;
}

// Plans for a CPU device, as lavapipe is (the Vulkan checks run there):
// register-blocked GEMMs. gpu_plan_options() plans for a generic GPU.
kiln::fuse::PlanOptions plan_options(bool fuse, std::uint32_t max_kernel_buffers = 0) {
  kiln::fuse::PlanOptions options;
  options.fuse = fuse;
  options.target.device_class = kiln::lower::DeviceClass::emulated_gpu;
  options.max_kernel_buffers = max_kernel_buffers;
  return options;
}

// Runs `model`'s graph as planned (with fusion unless told otherwise) on the
// interpreter and checks every output against the reference; returns the plan.
kiln::fuse::KernelPlan check_on_interpreter(const kiln::Model& model, const std::vector<Tensor>& inputs,
                                            kiln::fuse::PlanOptions options = plan_options(true)) {
  const kiln::graph::Graph& g = kiln::internal::graph(model);
  kiln::fuse::KernelPlan plan = kiln::fuse::plan_kernels(g, options);
  const std::vector<Tensor> expected = reference_values(g, inputs);
  const std::vector<Tensor> got = interpret_plan(g, plan, inputs);
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float diff = max_difference(got[i], expected[static_cast<std::size_t>(g.outputs()[i])]);
    BOOST_TEST_MESSAGE(model.name() << " output " << i << ": max |fused - reference| = " << diff);
    BOOST_TEST(diff < 1e-4f);
  }
  return plan;
}

// Compiled (fused) and eager on Vulkan; returns the compiled model after
// checking it matches eager.
kiln::CompiledModel check_on_vulkan(const kiln::Model& model, const std::vector<Tensor>& inputs,
                                    float tolerance = 1e-4f) {
  kiln::EagerModel eager = kiln::eager(model, {.backend = kiln::testing::test_backend()});
  kiln::CompiledModel compiled = kiln::compile(model, {.backend = kiln::testing::test_backend()});
  const std::vector<Tensor> expected = eager(inputs);
  const std::vector<Tensor> got = compiled(inputs);
  BOOST_REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float diff = max_difference(got[i], expected[i]);
    BOOST_TEST_MESSAGE(model.name() << " output " << i << ": max |compiled - eager| = " << diff);
    BOOST_TEST(diff < tolerance);
  }
  BOOST_TEST(compiled.stats().dispatches_per_run <= eager.stats().dispatches_per_run);
  return compiled;
}

std::vector<std::string> ops_of(const kiln::graph::Graph& g, const std::vector<kiln::graph::NodeId>& nodes) {
  std::vector<std::string> ops;
  for (auto id : nodes) ops.push_back(g.node(id).op);
  return ops;
}

int kernel_steps(const kiln::fuse::KernelPlan& plan) {
  return static_cast<int>(std::count_if(plan.steps.begin(), plan.steps.end(), [](const auto& s) { return !s.host; }));
}

kiln::Builder::Value constant(kiln::Builder& b, const std::string& name, const Shape& shape, unsigned seed) {
  return b.constant(name, random_tensor(shape, seed));
}

// conv (with bias) -> + residual -> relu: ResNet's block tail.
kiln::Model conv_residual_relu() {
  kiln::Builder b("conv_residual_relu");
  auto x = b.input("x", DType::f32, {1, 4, 8, 8});
  auto w = constant(b, "w", {4, 4, 3, 3}, 1);
  auto bias = constant(b, "bias", {4}, 2);
  auto y = b.conv2d(x, w, bias, {.padding = {1, 1, 1, 1}});
  return b.build({b.relu(b.add(y, x))});
}

}  // namespace

BOOST_AUTO_TEST_SUITE(epilogue)

BOOST_AUTO_TEST_CASE(conv_bias_residual_add_relu_is_one_kernel) {
  const kiln::Model model = conv_residual_relu();
  const std::vector<Tensor> inputs = {random_tensor({1, 4, 8, 8}, 3)};
  auto plan = check_on_interpreter(model, inputs);
  BOOST_REQUIRE(plan.steps.size() == 1u);
  BOOST_TEST((ops_of(kiln::internal::graph(model), plan.steps[0].nodes) == std::vector<std::string>{"Conv", "Add", "Relu"}));
  // x is read by the convolution and by the residual add: one binding serves both.
  BOOST_TEST(plan.steps[0].kernel->kernel.buffers.size() == 4u);

  auto compiled = check_on_vulkan(model, inputs);
  BOOST_TEST(compiled.stats().dispatches_per_run == 1);
}

BOOST_AUTO_TEST_CASE(unfused_plan_is_one_kernel_per_node) {
  const kiln::Model model = conv_residual_relu();
  auto plan = check_on_interpreter(model, {random_tensor({1, 4, 8, 8}, 3)}, plan_options(false));
  BOOST_TEST(plan.steps.size() == 3u);
  BOOST_TEST(std::none_of(plan.fused_away.begin(), plan.fused_away.end(), [](bool f) { return f; }));
}

BOOST_AUTO_TEST_CASE(pointwise_chain_with_broadcasting_collapses_into_its_first_op) {
  kiln::Builder b("chain");
  auto x = b.input("x", DType::f32, {2, 3, 4, 5});
  auto other = b.input("other", DType::f32, {2, 1, 4, 1});
  auto per_channel = constant(b, "per_channel", {3, 1, 1}, 4);
  auto per_column = constant(b, "per_column", {5}, 5);
  auto y = b.sub(b.sigmoid(b.add(b.mul(x, per_channel), per_column)), other);
  y = b.op("Clip", {y}, [] {
    kiln::graph::Attributes a;
    a.set("min", -0.25);
    a.set("max", 0.5);
    return a;
  }())[0];
  const kiln::Model model = b.build({y});
  const std::vector<Tensor> inputs = {random_tensor({2, 3, 4, 5}, 6, -3, 3), random_tensor({2, 1, 4, 1}, 7)};
  auto plan = check_on_interpreter(model, inputs);
  BOOST_REQUIRE(plan.steps.size() == 1u);
  BOOST_TEST((ops_of(kiln::internal::graph(model), plan.steps[0].nodes) ==
              std::vector<std::string>{"Mul", "Add", "Sigmoid", "Sub", "Clip"}));
  auto compiled = check_on_vulkan(model, inputs);
  BOOST_TEST(compiled.stats().dispatches_per_run == 1);
}

BOOST_AUTO_TEST_CASE(hard_swish_and_gelu_fuse_into_conv) {
  kiln::Builder b("conv_hardswish");
  auto x = b.input("x", DType::f32, {1, 3, 6, 6});
  auto w = constant(b, "w", {8, 3, 1, 1}, 8);
  auto y = b.op("HardSwish", {b.conv2d(x, w, std::nullopt)}, {})[0];
  const kiln::Model model = b.build({b.gelu(y)});
  const std::vector<Tensor> inputs = {random_tensor({1, 3, 6, 6}, 9, -4, 4)};
  auto plan = check_on_interpreter(model, inputs);
  BOOST_REQUIRE(plan.steps.size() == 1u);
  BOOST_TEST((ops_of(kiln::internal::graph(model), plan.steps[0].nodes) == std::vector<std::string>{"Conv", "HardSwish", "Gelu"}));
  check_on_vulkan(model, inputs);
}

BOOST_AUTO_TEST_CASE(silu_as_exported_fuses_into_conv_after_the_compile_passes) {
  // torch.onnx.export's SiLU, y * sigmoid(y): y has two readers, so only
  // recognise_silu's Silu (y's one reader) lets the convolution take it.
  kiln::Builder b("conv_silu");
  auto x = b.input("x", DType::f32, {1, 3, 7, 7});
  auto y = b.conv2d(x, constant(b, "w", {8, 3, 3, 3}, 40), constant(b, "bias", {8}, 41), {.padding = {1, 1, 1, 1}});
  const kiln::Model model = b.build({b.mul(y, b.sigmoid(y))});
  const std::vector<Tensor> inputs = {random_tensor({1, 3, 7, 7}, 42, -4, 4)};

  const kiln::Model passed = kiln::internal::make_model(std::make_shared<const kiln::graph::Graph>(
      kiln::graph::passes::run_compile_passes(kiln::internal::graph(model)).graph));
  auto plan = check_on_interpreter(passed, inputs);
  BOOST_REQUIRE(plan.steps.size() == 1u);
  BOOST_TEST((ops_of(kiln::internal::graph(passed), plan.steps[0].nodes) == std::vector<std::string>{"Conv", "Silu"}));
  // Without the pass the Sigmoid-Mul pair is a kernel of its own.
  BOOST_TEST(check_on_interpreter(model, inputs).steps.size() == 2u);

  kiln::CompiledModel compiled = check_on_vulkan(model, inputs);
  BOOST_TEST(compiled.stats().dispatches_per_run == 1);
  const std::vector<Tensor> expected = reference_values(kiln::internal::graph(model), inputs);
  const float diff = max_difference(compiled({inputs})[0], expected[static_cast<std::size_t>(kiln::internal::graph(model).outputs()[0])]);
  BOOST_TEST_MESSAGE("max |compiled - reference| = " << diff);
  BOOST_TEST(diff < 1e-4f);
}

BOOST_AUTO_TEST_CASE(squeeze_excitation_scale_moved_onto_the_projection_weight) {
  // scale_conv_weights: the gate multiplies the 1x1 projection's weight
  // [4, 8, 1, 1] rather than x [1, 8, 48, 48]; same results, same dispatches.
  kiln::Builder b("squeeze_excitation");
  auto x = b.input("x", DType::f32, {1, 8, 48, 48});
  auto gate = b.sigmoid(b.conv2d(b.global_avg_pool(x), constant(b, "fc", {8, 8, 1, 1}, 43), std::nullopt));
  auto y = b.conv2d(b.mul(x, gate), constant(b, "proj", {4, 8, 1, 1}, 44), constant(b, "proj_bias", {4}, 45));
  const kiln::Model model = b.build({y});
  const std::vector<Tensor> inputs = {random_tensor({1, 8, 48, 48}, 46, -3, 3)};

  const kiln::Model passed = kiln::internal::make_model(std::make_shared<const kiln::graph::Graph>(
      kiln::graph::passes::run_compile_passes(kiln::internal::graph(model)).graph));
  auto plan = check_on_interpreter(passed, inputs);
  std::vector<std::vector<std::string>> kernels;
  for (const auto& step : plan.steps) kernels.push_back(ops_of(kiln::internal::graph(passed), step.nodes));
  BOOST_TEST((kernels == std::vector<std::vector<std::string>>{
                  {"GlobalAveragePool"}, {"Conv", "Sigmoid"}, {"Mul"}, {"Conv"}}));
  const auto& mul_step = plan.steps[2];
  BOOST_TEST(kiln::graph::type_str(kiln::internal::graph(passed).value(kiln::internal::graph(passed).node(mul_step.nodes[0]).outputs[0]).type) ==
             "f32[4, 8, 1, 1]");

  kiln::CompiledModel compiled = check_on_vulkan(model, inputs);
  BOOST_TEST(compiled.stats().dispatches_per_run == 4);
  const std::vector<Tensor> expected = reference_values(kiln::internal::graph(model), inputs);
  const float diff = max_difference(compiled({inputs})[0], expected[static_cast<std::size_t>(kiln::internal::graph(model).outputs()[0])]);
  BOOST_TEST_MESSAGE("max |compiled - reference| = " << diff);
  BOOST_TEST(diff < 1e-4f);
}

BOOST_AUTO_TEST_CASE(single_head_transpose_is_a_view_after_the_compile_passes) {
  // [1, L, 1, D] -> [1, 1, L, D] moves no element: transpose_to_reshape makes
  // it a view. With two readers it could not be inlined as a prologue, so
  // before the pass it was a kernel of its own.
  kiln::Builder b("single_head");
  auto x = b.input("x", DType::f32, {1, 6, 1, 4});
  auto heads = b.transpose(x, {0, 2, 1, 3});
  const kiln::Model model = b.build({b.softmax(heads, -1), b.relu(heads)});
  const std::vector<Tensor> inputs = {random_tensor({1, 6, 1, 4}, 47, -3, 3)};
  kiln::EagerModel eager = kiln::eager(model, {.backend = kiln::testing::test_backend()});
  kiln::CompiledModel compiled = check_on_vulkan(model, inputs);
  eager(inputs);
  BOOST_TEST(eager.stats().dispatches_per_run == 3);
  BOOST_TEST(compiled.stats().dispatches_per_run == 2);
  const std::vector<Tensor> expected = reference_values(kiln::internal::graph(model), inputs);
  const std::vector<Tensor> got = compiled(inputs);
  for (std::size_t i = 0; i < got.size(); ++i)
    BOOST_TEST(max_difference(got[i], expected[static_cast<std::size_t>(kiln::internal::graph(model).outputs()[i])]) < 1e-6f);
}

BOOST_AUTO_TEST_CASE(batch_norm_after_conv_fuses_without_folding) {
  // The plan of the graph as written (no fold_batch_norm pass): BN's kernel
  // itself is inlined, with its per-channel operands as extra buffers.
  kiln::Builder b("conv_bn");
  auto x = b.input("x", DType::f32, {2, 3, 5, 5});
  auto w = constant(b, "w", {6, 3, 3, 3}, 10);
  auto y = b.conv2d(x, w, std::nullopt, {.padding = {1, 1, 1, 1}});
  auto var = b.constant("var", random_tensor({6}, 11, 0.5f, 2.0f));
  y = b.batch_norm(y, constant(b, "scale", {6}, 12), constant(b, "shift", {6}, 13), constant(b, "mean", {6}, 14), var);
  const kiln::Model model = b.build({b.relu(y)});
  const std::vector<Tensor> inputs = {random_tensor({2, 3, 5, 5}, 15)};
  auto plan = check_on_interpreter(model, inputs);
  BOOST_REQUIRE(plan.steps.size() == 1u);
  BOOST_TEST((ops_of(kiln::internal::graph(model), plan.steps[0].nodes) ==
              std::vector<std::string>{"Conv", "BatchNormalization", "Relu"}));
  BOOST_TEST(plan.steps[0].kernel->kernel.buffers.size() == 7u);  // x, w, y + BN's four
  check_on_vulkan(model, inputs);
}

BOOST_AUTO_TEST_CASE(epilogue_inlined_at_every_store_of_a_reduction) {
  // Softmax stores inside a loop; the consumer is inlined there, once per
  // store, with its variables renamed apart from the producer's.
  kiln::Builder b("softmax_mul");
  auto x = b.input("x", DType::f32, {3, 7});
  auto gain = constant(b, "gain", {7}, 16);
  const kiln::Model model = b.build({b.tanh(b.mul(b.softmax(x), gain))});
  auto plan = check_on_interpreter(model, {random_tensor({3, 7}, 17, -5, 5)});
  BOOST_REQUIRE(plan.steps.size() == 1u);
  BOOST_TEST(plan.steps[0].kernel->kernel.name == "softmax_mul_tanh");
}

BOOST_AUTO_TEST_CASE(group_is_limited_by_max_kernel_buffers) {
  // conv (x, w, bias, y) then four adds of fresh operands: with at most six
  // buffers the conv takes two adds, and the rest start a new kernel.
  kiln::Builder b("many_operands");
  auto x = b.input("x", DType::f32, {1, 2, 4, 4});
  auto y = b.conv2d(x, constant(b, "w", {2, 2, 3, 3}, 18), constant(b, "bias", {2}, 19), {.padding = {1, 1, 1, 1}});
  for (int i = 0; i < 4; ++i) y = b.add(y, b.input("p" + std::to_string(i), DType::f32, {1, 2, 4, 4}));
  const kiln::Model model = b.build({y});
  std::vector<Tensor> inputs = {random_tensor({1, 2, 4, 4}, 20)};
  for (unsigned i = 0; i < 4; ++i) inputs.push_back(random_tensor({1, 2, 4, 4}, 21 + i));

  auto unlimited = check_on_interpreter(model, inputs);
  BOOST_TEST(unlimited.steps.size() == 1u);
  auto limited = check_on_interpreter(model, inputs, plan_options(true, 6));
  BOOST_REQUIRE(limited.steps.size() == 2u);
  for (const auto& step : limited.steps) BOOST_TEST(step.kernel->kernel.buffers.size() <= 6u);
  BOOST_TEST((ops_of(kiln::internal::graph(model), limited.steps[0].nodes) == std::vector<std::string>{"Conv", "Add", "Add"}));
}

BOOST_AUTO_TEST_CASE(long_chain_becomes_identical_kernels_of_bounded_size) {
  // 150 pointwise ops on a convolution: groups of at most max_fused_nodes,
  // each after the first the same kernel (the same rendered source).
  kiln::Builder b("long_chain");
  auto x = b.input("x", DType::f32, {1, 2, 4, 4});
  auto y = b.conv2d(x, constant(b, "w", {2, 2, 3, 3}, 30), std::nullopt, {.padding = {1, 1, 1, 1}});
  auto scale = constant(b, "scale", {1, 2, 1, 1}, 31);
  for (int i = 0; i < 150; ++i) y = i % 2 ? b.tanh(y) : b.mul(y, scale);
  const kiln::Model model = b.build({y});
  const std::vector<Tensor> inputs = {random_tensor({1, 2, 4, 4}, 32)};

  auto bounded = check_on_interpreter(model, inputs);
  std::vector<std::size_t> sizes;
  for (const auto& step : bounded.steps) sizes.push_back(step.nodes.size());
  BOOST_TEST((sizes == std::vector<std::size_t>{kiln::fuse::kMaxFusedNodes, kiln::fuse::kMaxFusedNodes, 151 - 2 * kiln::fuse::kMaxFusedNodes}));

  kiln::fuse::PlanOptions small = plan_options(true);
  small.max_fused_nodes = 10;
  auto tens = check_on_interpreter(model, inputs, small);
  BOOST_REQUIRE(tens.steps.size() == 16u);  // the Conv and 9 ops, then 14 groups of 10, then 1
  const kiln::backend::LanguageTable& glsl = kiln::backend::get_backend("vulkan").language();
  const std::string second = kiln::render::make_kernel_source(tens.steps[1].kernel->kernel, glsl).text;
  for (std::size_t i = 1; i + 1 < tens.steps.size(); ++i) {
    BOOST_TEST(tens.steps[i].nodes.size() == 10u);
    BOOST_TEST(kiln::render::make_kernel_source(tens.steps[i].kernel->kernel, glsl).text == second, "group " << i);
  }
}

BOOST_AUTO_TEST_CASE(value_with_two_consumers_is_not_fused) {
  kiln::Builder b("two_consumers");
  auto x = b.input("x", DType::f32, {2, 8});
  auto shared = b.sigmoid(b.add(x, constant(b, "c", {8}, 22)));
  const kiln::Model model = b.build({b.mul(b.tanh(shared), b.relu(shared))});
  auto plan = check_on_interpreter(model, {random_tensor({2, 8}, 23)});
  const kiln::graph::Graph& g = kiln::internal::graph(model);
  ValueId shared_id = -1;
  for (const auto& node : g.nodes())
    if (node.op == "Sigmoid") shared_id = node.outputs[0];
  BOOST_REQUIRE(shared_id >= 0);
  BOOST_TEST(!plan.fused_away[static_cast<std::size_t>(shared_id)]);
  // Add+Sigmoid, then Tanh and Relu (each the first op of its chain), with
  // Mul fused into one of them.
  BOOST_TEST(kernel_steps(plan) == 3);
  check_on_vulkan(model, {random_tensor({2, 8}, 23)});
}

BOOST_AUTO_TEST_CASE(graph_output_in_the_middle_is_not_fused) {
  kiln::Builder b("middle_output");
  auto x = b.input("x", DType::f32, {4, 6});
  auto middle = b.add(x, constant(b, "c", {6}, 24));
  const kiln::Model model = b.build({middle, b.sigmoid(middle)});
  const std::vector<Tensor> inputs = {random_tensor({4, 6}, 25)};
  auto plan = check_on_interpreter(model, inputs);
  BOOST_TEST(plan.steps.size() == 2u);
  BOOST_TEST(std::none_of(plan.fused_away.begin(), plan.fused_away.end(), [](bool f) { return f; }));
  auto compiled = check_on_vulkan(model, inputs);
  BOOST_TEST(compiled.stats().dispatches_per_run == 2);
}

BOOST_AUTO_TEST_CASE(consumer_reading_a_later_value_moves_the_group_after_it) {
  // Add(conv_a(x), conv_b(x)): conv_a's group must run after conv_b, which
  // computes Add's other operand.
  kiln::Builder b("two_branches");
  auto x = b.input("x", DType::f32, {1, 2, 5, 5});
  auto a = b.conv2d(x, constant(b, "wa", {3, 2, 3, 3}, 26), std::nullopt, {.padding = {1, 1, 1, 1}});
  auto c = b.conv2d(x, constant(b, "wb", {3, 2, 1, 1}, 27), std::nullopt);
  const kiln::Model model = b.build({b.relu(b.add(a, c))});
  const std::vector<Tensor> inputs = {random_tensor({1, 2, 5, 5}, 28)};
  auto plan = check_on_interpreter(model, inputs);
  BOOST_REQUIRE(plan.steps.size() == 2u);
  BOOST_TEST(ops_of(kiln::internal::graph(model), plan.steps[1].nodes).size() == 3u);
  check_on_vulkan(model, inputs);
}

// Statements of `kind` in `body`, nested ones included.
int count_statements(const std::vector<kiln::kir::Stmt>& body, kiln::kir::StmtKind kind) {
  int n = 0;
  for (const auto& s : body) n += (s.kind == kind) + count_statements(s.body, kind) + count_statements(s.else_body, kind);
  return n;
}

BOOST_AUTO_TEST_CASE(vector_stores_take_a_residual_epilogue_as_vectors) {
  using kiln::kir::StmtKind;
  // 1x1 convolutions: 64 channels over 16x16 pixels (whole register tiles)
  // and 60 over 14x14; both store vec4s.
  for (const auto& [channels, side] : {std::pair{64, 16}, std::pair{60, 14}}) {
    BOOST_TEST_CONTEXT(channels << " channels, " << side << "x" << side) {
      kiln::Builder b("pointwise_residual");
      auto x = b.input("x", DType::f32, {1, channels, side, side});
      auto w = constant(b, "w", {channels, channels, 1, 1}, 30);
      auto bias = constant(b, "bias", {channels}, 31);
      const kiln::Model model = b.build({b.relu(b.add(x, b.conv2d(x, w, bias)))});
      const std::vector<Tensor> inputs = {random_tensor({1, channels, side, side}, 32)};
      auto plan = check_on_interpreter(model, inputs);
      BOOST_REQUIRE(plan.steps.size() == 1u);
      const kiln::kir::Kernel& k = plan.steps[0].kernel->kernel;
      // Every output goes through a vec4 store, the residual through vec4 loads.
      BOOST_TEST(count_statements(k.body, StmtKind::store) == 0);
      BOOST_TEST(count_statements(k.body, StmtKind::store_vector) > 0);
      BOOST_TEST(count_statements(k.body, StmtKind::load_vector) > count_statements(k.body, StmtKind::store_vector));
      check_on_vulkan(model, inputs);
    }
  }
}

// A masked score after a one-row product (a decode step's attention): on
// lavapipe the product takes the matrix-vector knobs, whose vec4 stores
// read the epilogue's inputs four at a time; the mask is a bool, which
// kernels cannot load as a vector, so its four elements are loaded one by one.
BOOST_AUTO_TEST_CASE(a_bool_mask_in_a_vector_store_epilogue_is_loaded_per_component) {
  kiln::Builder b("masked_scores");
  auto q = b.input("q", DType::f32, {1, 16});
  auto k = b.input("k", DType::f32, {16, 32});
  auto mask = b.input("mask", DType::boolean, {1, 32});
  Tensor low(DType::f32, {});
  low.values<float>()[0] = -1e4f;
  auto masked = b.op("Where", {mask, b.matmul(q, k), b.constant("low", low)}, {})[0];
  const kiln::Model model = b.build({masked});
  Tensor keep(DType::boolean, {1, 32});
  for (std::size_t i = 0; i < keep.bytes().size(); ++i) keep.bytes()[i] = std::byte{static_cast<unsigned char>(i % 3 != 0)};
  const std::vector<Tensor> inputs = {random_tensor({1, 16}, 40), random_tensor({16, 32}, 41), keep};
  kiln::CompiledModel compiled = check_on_vulkan(model, inputs);
  BOOST_TEST(compiled.stats().dispatches_per_run == 1);  // the Where is the product's epilogue
}

BOOST_AUTO_TEST_CASE(vector_store_with_a_branching_consumer_is_inlined_per_component) {
  namespace kir = kiln::kir;
  // Producer: y[4v .. 4v+3] = x[4v .. 4v+3] * 2 as one vector store.
  kir::Kernel producer("producer");
  auto in = producer.add_buffer("x", kir::ScalarType::f32, kir::Access::read);
  auto out = producer.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
  producer.global_size = 3;
  const auto v = kir::global_index();
  producer.body.push_back(kir::load_vector({"a", "b", "c", "d"}, in, v, kir::ScalarType::f32));
  std::vector<kir::Expr> doubled;
  for (const char* name : {"a", "b", "c", "d"}) doubled.push_back(kir::var(name, kir::ScalarType::f32) * kir::f32(2));
  producer.body.push_back(kir::store_vector(out, v, doubled));
  // Consumer: z[i] = y[i] > 1 ? y[i] + r[i] : -1, written with a branch.
  kir::Kernel consumer("clip");
  auto y = consumer.add_buffer("y", kir::ScalarType::f32, kir::Access::read);
  auto r = consumer.add_buffer("r", kir::ScalarType::f32, kir::Access::read);
  auto z = consumer.add_buffer("z", kir::ScalarType::f32, kir::Access::write);
  consumer.global_size = 12;
  const auto i = kir::global_index();
  const auto yi = kir::load(y, i, kir::ScalarType::f32);
  consumer.body.push_back(kir::branch(yi > kir::f32(1), {kir::store(z, i, yi + kir::load(r, i, kir::ScalarType::f32))},
                                      {kir::store(z, i, kir::f32(-1))}));
  const kiln::fuse::BoundKernel p{producer, {0, 1}};
  const kiln::fuse::BoundKernel c{consumer, {1, 2, 3}};
  BOOST_REQUIRE(!kiln::fuse::epilogue_unfusable_reason(p, c, 1, 12).has_value());
  const kiln::fuse::BoundKernel fused = kiln::fuse::fuse_epilogue(p, c, 1, 12);
  BOOST_TEST(count_statements(fused.kernel.body, kir::StmtKind::store_vector) == 0);
  BOOST_TEST(count_statements(fused.kernel.body, kir::StmtKind::store) == 8);
  std::vector<float> x(12), residual(12), result(12, 0.0f);
  for (int e = 0; e < 12; ++e) {
    x[e] = static_cast<float>(e) * 0.25f - 0.5f;
    residual[e] = static_cast<float>(e) * 10.0f;
  }
  std::vector<std::span<std::byte>> buffers = {std::as_writable_bytes(std::span(x)),
                                               std::as_writable_bytes(std::span(result)),
                                               std::as_writable_bytes(std::span(residual))};
  kir::interpret(fused.kernel, buffers);
  for (int e = 0; e < 12; ++e) BOOST_TEST(result[e] == (x[e] * 2 > 1 ? x[e] * 2 + residual[e] : -1.0f), "z[" << e << "]");
}

BOOST_AUTO_TEST_CASE(broadcast_operands_of_a_vector_store_are_read_once_per_vector) {
  namespace kir = kiln::kir;
  using kir::ScalarType;
  // Producer: y[4v .. 4v+3] = x[4v .. 4v+3] as one vector store, over a
  // [3, 8] value (3 rows of 8: two vectors per row).
  kir::Kernel producer("producer");
  auto in = producer.add_buffer("x", ScalarType::f32, kir::Access::read);
  auto out = producer.add_buffer("y", ScalarType::f32, kir::Access::write);
  producer.global_size = 6;
  const auto v = kir::global_index();
  producer.body.push_back(kir::load_vector({"a", "b", "c", "d"}, in, v, ScalarType::f32));
  producer.body.push_back(kir::store_vector(out, v,
                                            {kir::var("a", ScalarType::f32), kir::var("b", ScalarType::f32),
                                             kir::var("c", ScalarType::f32), kir::var("d", ScalarType::f32)}));
  // Consumer: z[i] = y[i] * row_scale[i / 8] + column_bias[i % 8] + odd[(i * 3) % 5],
  // with the column index declared first, as broadcast lowering does.
  kir::Kernel consumer("scale_bias");
  auto y = consumer.add_buffer("y", ScalarType::f32, kir::Access::read);
  auto row_scale = consumer.add_buffer("row_scale", ScalarType::f32, kir::Access::read);
  auto column_bias = consumer.add_buffer("column_bias", ScalarType::f32, kir::Access::read);
  auto odd = consumer.add_buffer("odd", ScalarType::f32, kir::Access::read);
  auto z = consumer.add_buffer("z", ScalarType::f32, kir::Access::write);
  consumer.global_size = 24;
  const auto i = kir::global_index();
  consumer.body.push_back(kir::declare("column", ScalarType::i32, i % kir::i32(8)));
  consumer.body.push_back(kir::store(
      z, i,
      kir::load(y, i, ScalarType::f32) * kir::load(row_scale, i / kir::i32(8), ScalarType::f32) +
          kir::load(column_bias, kir::var("column", ScalarType::i32), ScalarType::f32) +
          kir::load(odd, (i * kir::i32(3)) % kir::i32(5), ScalarType::f32)));
  const kiln::fuse::BoundKernel p{producer, {0, 1}};
  const kiln::fuse::BoundKernel c{consumer, {1, 2, 3, 4, 5}};
  const kiln::fuse::BoundKernel fused = kiln::fuse::fuse_epilogue(p, c, 1, 24);
  const std::string text = kir::print(fused.kernel);
  // The row scale is one load per vector, the column bias one vec4 load; the
  // operand read at (3i) % 5 stays a load per component.
  BOOST_TEST(count_statements(fused.kernel.body, kir::StmtKind::load_vector) == 2);  // x and column_bias
  BOOST_TEST(count_statements(fused.kernel.body, kir::StmtKind::store_vector) == 1);
  auto occurrences = [&](const std::string& part) {
    int n = 0;
    for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
    return n;
  };
  BOOST_TEST(occurrences("epilogue_in[") == 1);        // row_scale
  BOOST_TEST(occurrences("epilogue_in_2.vec4[") == 1);  // column_bias
  BOOST_TEST(occurrences("epilogue_in_3[") == 4);       // odd

  std::vector<float> x(24), scale(3), bias(8), odd_values(5), result(24, 0.0f);
  for (int e = 0; e < 24; ++e) x[e] = static_cast<float>(e) * 0.5f - 3.0f;
  for (int r = 0; r < 3; ++r) scale[r] = static_cast<float>(r + 2);
  for (int col = 0; col < 8; ++col) bias[col] = static_cast<float>(col) * 100.0f;
  for (int k = 0; k < 5; ++k) odd_values[k] = static_cast<float>(k) * 1000.0f;
  std::vector<std::span<std::byte>> buffers = {
      std::as_writable_bytes(std::span(x)), std::as_writable_bytes(std::span(result)),
      std::as_writable_bytes(std::span(scale)), std::as_writable_bytes(std::span(bias)),
      std::as_writable_bytes(std::span(odd_values))};
  kir::interpret(fused.kernel, buffers);
  for (int e = 0; e < 24; ++e)
    BOOST_TEST(result[e] == x[e] * scale[e / 8] + bias[e % 8] + odd_values[(e * 3) % 5], "z[" << e << "]");
}

BOOST_AUTO_TEST_CASE(unfusable_pairs_say_why) {
  kiln::kir::Kernel producer("producer");
  auto in = producer.add_buffer("x", kiln::kir::ScalarType::f32, kiln::kir::Access::read);
  auto out = producer.add_buffer("y", kiln::kir::ScalarType::f32, kiln::kir::Access::write);
  producer.global_size = 8;
  producer.body.push_back(kiln::kir::store(out, kiln::kir::global_index(),
                                           kiln::kir::load(in, kiln::kir::global_index(), kiln::kir::ScalarType::f32)));
  // A consumer reading its input at a neighbour's index is not pointwise.
  kiln::kir::Kernel shift("shift");
  auto a = shift.add_buffer("a", kiln::kir::ScalarType::f32, kiln::kir::Access::read);
  auto z = shift.add_buffer("z", kiln::kir::ScalarType::f32, kiln::kir::Access::write);
  shift.global_size = 8;
  const auto i = kiln::kir::global_index();
  shift.body.push_back(kiln::kir::store(z, i, kiln::kir::load(a, (i + kiln::kir::i32(1)) % kiln::kir::i32(8),
                                                             kiln::kir::ScalarType::f32)));
  const kiln::fuse::BoundKernel p{producer, {0, 1}};
  const kiln::fuse::BoundKernel c{shift, {1, 2}};
  auto why = kiln::fuse::epilogue_unfusable_reason(p, c, 1, 8);
  BOOST_REQUIRE(why.has_value());
  BOOST_TEST(why->find("other than its global index") != std::string::npos);
  BOOST_CHECK_THROW(kiln::fuse::fuse_epilogue(p, c, 1, 8), kiln::Error);
  // One invocation per element is required too.
  BOOST_TEST(kiln::fuse::epilogue_unfusable_reason(p, c, 1, 16).has_value());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(prologue)

// The ops of the plan's kernel steps, in order.
std::vector<std::vector<std::string>> kernel_ops(const kiln::graph::Graph& g, const kiln::fuse::KernelPlan& plan) {
  std::vector<std::vector<std::string>> out;
  for (const auto& step : plan.steps)
    if (!step.host) out.push_back(ops_of(g, step.nodes));
  return out;
}

BOOST_AUTO_TEST_CASE(residual_add_fuses_into_layer_norm_loads) {
  // (x + y) -> LayerNormalization: the Add is computed at each of the
  // normalisation's loads, so the sum never reaches memory.
  kiln::Builder b("add_layer_norm");
  auto x = b.input("x", DType::f32, {3, 10});
  auto y = b.input("y", DType::f32, {3, 10});
  auto ln = b.layer_norm(b.add(x, y), constant(b, "scale", {10}, 40), constant(b, "bias", {10}, 41));
  const kiln::Model model = b.build({ln});
  const std::vector<Tensor> inputs = {random_tensor({3, 10}, 42), random_tensor({3, 10}, 43)};
  auto plan = check_on_interpreter(model, inputs);
  BOOST_TEST((kernel_ops(kiln::internal::graph(model), plan) == std::vector<std::vector<std::string>>{{"Add", "LayerNormalization"}}));
  auto compiled = check_on_vulkan(model, inputs);
  BOOST_TEST(compiled.stats().dispatches_per_run == 1);
}

BOOST_AUTO_TEST_CASE(scale_and_mask_fuse_into_softmax_then_its_epilogue) {
  // softmax(s * 0.125 + mask) * gain: the scale and mask are a prologue of
  // the softmax, the gain an epilogue: one kernel.
  kiln::Builder b("scaled_softmax");
  auto s = b.input("s", DType::f32, {2, 5, 7});
  auto mask = b.input("mask", DType::f32, {1, 1, 7});
  auto scale = b.constant("scale", Tensor::scalar_f32(0.125f));
  auto probs = b.softmax(b.add(b.mul(s, scale), mask));
  const kiln::Model model = b.build({b.mul(probs, constant(b, "gain", {7}, 44))});
  const std::vector<Tensor> inputs = {random_tensor({2, 5, 7}, 45, -8, 8), random_tensor({1, 1, 7}, 46, -3, 0)};
  auto plan = check_on_interpreter(model, inputs);
  BOOST_TEST((kernel_ops(kiln::internal::graph(model), plan) ==
              std::vector<std::vector<std::string>>{{"Mul", "Add", "Softmax", "Mul"}}));
  check_on_vulkan(model, inputs);
}

BOOST_AUTO_TEST_CASE(transposed_matmul_operand_is_a_prologue) {
  // (q * 0.125) @ transpose(k): as attention computes its scores, k^T never
  // reaches memory. (The GEMM template loads its A operand with guards or
  // vector loads, so the scaled q stays a kernel of its own.)
  kiln::Builder b("scores");
  auto q = b.input("q", DType::f32, {2, 16, 8});
  auto k = b.input("k", DType::f32, {2, 16, 8});
  auto scaled = b.mul(q, b.constant("scale", Tensor::scalar_f32(0.125f)));
  const kiln::Model model = b.build({b.matmul(scaled, b.transpose(k, {0, 2, 1}))});
  const std::vector<Tensor> inputs = {random_tensor({2, 16, 8}, 56), random_tensor({2, 16, 8}, 57)};
  auto plan = check_on_interpreter(model, inputs);
  BOOST_REQUIRE(kernel_steps(plan) == 2);
  BOOST_TEST((ops_of(kiln::internal::graph(model), plan.steps[1].nodes) == std::vector<std::string>{"Transpose", "MatMul"}));
  check_on_vulkan(model, inputs);
}

BOOST_AUTO_TEST_CASE(shared_memory_gemm_takes_an_epilogue_and_keeps_its_tiles) {
  // Planned for a GPU, the MatMul is the shared-memory GEMM (tiles of A and B
  // staged in workgroup memory, 4x4 register blocks, split-K on the long K):
  // the bias and Relu still fuse into its stores, and the fused kernel keeps
  // its shared arrays (the interpreter runs it workgroup by workgroup).
  kiln::Builder b("shared_gemm");
  auto x = b.input("x", DType::f32, {2, 15, 40});
  auto w = constant(b, "w", {40, 24}, 61);
  const kiln::Model model = b.build({b.relu(b.add(b.matmul(x, w), constant(b, "bias", {24}, 62)))});
  const std::vector<Tensor> inputs = {random_tensor({2, 15, 40}, 63)};
  kiln::fuse::PlanOptions gpu = plan_options(true);
  gpu.target.device_class = kiln::lower::DeviceClass::integrated_gpu;
  auto plan = check_on_interpreter(model, inputs, gpu);
  BOOST_REQUIRE(kernel_steps(plan) == 1);
  BOOST_TEST((ops_of(kiln::internal::graph(model), plan.steps[0].nodes) == std::vector<std::string>{"MatMul", "Add", "Relu"}));
  BOOST_TEST(!plan.steps[0].kernel->kernel.shared.empty());
}

BOOST_AUTO_TEST_CASE(matrix_unit_kernels_take_their_epilogues) {
  // Planned for tensor cores, with the precision settings' TF32 products:
  // a 3x3 convolution (an implicit GEMM gathering its taps) with a residual
  // add and ReLU, and a MatMul with a bias and ReLU. Their fragments stay in
  // shared memory and the block reaches Y through scalar stores, so each
  // epilogue fuses. Values are multiples of 1/8 in [-1, 1], which TF32 keeps
  // exactly: the fused kernels must match the reference as in f32.
  auto dyadic = [](const Shape& shape, unsigned seed) {
    Tensor t = random_tensor(shape, seed);
    for (float& v : t.values<float>()) v = std::round(v * 8.0f) / 8.0f;
    return t;
  };
  kiln::graph::Attributes conv_attrs;
  conv_attrs.set("pads", std::vector<std::int64_t>{1, 1, 1, 1});
  conv_attrs.set("f32_products", std::string("tf32"));
  kiln::graph::Attributes product_attrs;
  product_attrs.set("f32_products", std::string("tf32"));
  kiln::Builder b("matrix_units");
  auto x = b.input("x", DType::f32, {1, 16, 12, 12});
  auto conv = b.op("Conv", {x, b.constant("w", dyadic({32, 16, 3, 3}, 71))}, conv_attrs)[0];
  auto residual = b.input("residual", DType::f32, {1, 32, 12, 12});
  auto rows = b.input("rows", DType::f32, {40, 48});
  auto product = b.op("MatMul", {rows, b.constant("m", dyadic({48, 32}, 72))}, product_attrs)[0];
  const kiln::Model model = b.build({b.relu(b.add(conv, residual)), b.relu(b.add(product, b.constant("bias", dyadic({32}, 73))))});
  const std::vector<Tensor> inputs = {dyadic({1, 16, 12, 12}, 74), dyadic({1, 32, 12, 12}, 75), dyadic({40, 48}, 76)};
  kiln::fuse::PlanOptions gpu = plan_options(true);
  gpu.target.device_class = kiln::lower::DeviceClass::integrated_gpu;
  gpu.target.matrix_units = {{"tf32", 16, 8, 8, 32}};
  auto plan = check_on_interpreter(model, inputs, gpu);
  BOOST_REQUIRE(kernel_steps(plan) == 2);
  for (const auto& step : plan.steps) {
    BOOST_TEST(kiln::kir::uses_fragments(step.kernel->kernel), step.kernel->kernel.name);
    BOOST_TEST(step.nodes.size() == 3u, step.kernel->kernel.name);  // the product, the add, the ReLU
  }
}

BOOST_AUTO_TEST_CASE(prologue_and_epilogue_fuse_through_views) {
  // add -> Reshape -> Softmax -> Flatten -> Relu: the views move no data, so
  // the Add is the softmax's prologue and the Relu its epilogue.
  kiln::Builder b("through_views");
  auto x = b.input("x", DType::f32, {2, 12});
  auto sum = b.add(x, constant(b, "c", {12}, 47));
  auto probs = b.softmax(b.reshape(sum, {2, 3, 4}));
  const kiln::Model model = b.build({b.relu(b.flatten(probs, 1))});
  const std::vector<Tensor> inputs = {random_tensor({2, 12}, 48, -4, 4)};
  auto plan = check_on_interpreter(model, inputs);
  BOOST_TEST((kernel_ops(kiln::internal::graph(model), plan) == std::vector<std::vector<std::string>>{{"Add", "Softmax", "Relu"}}));
  check_on_vulkan(model, inputs);
}

BOOST_AUTO_TEST_CASE(shared_producer_is_not_inlined_but_padded_loads_take_one) {
  // The Add feeds two consumers: it must reach memory once.
  kiln::Builder b("shared_sum");
  auto x = b.input("x", DType::f32, {1, 2, 5, 5});
  auto sum = b.add(x, constant(b, "c", {1, 2, 1, 1}, 49));
  auto conv = b.conv2d(sum, constant(b, "w", {2, 2, 3, 3}, 50), std::nullopt, {.padding = {1, 1, 1, 1}});
  const kiln::Model shared = b.build({b.softmax(sum), conv});
  const std::vector<Tensor> inputs = {random_tensor({1, 2, 5, 5}, 51)};
  auto plan = check_on_interpreter(shared, inputs);
  BOOST_TEST(kernel_steps(plan) == 3);
  // A padded convolution loads at an index clamped into the image and zeroes
  // the value outside it (no load under a select), so the producer can be
  // inlined at every load: one kernel, reading only inside the image. (A 1x1
  // window: a larger one reads each element kH x kW times and keeps its
  // producer separate, below.)
  kiln::Builder c("padded_conv");
  auto y = c.input("x", DType::f32, {1, 2, 5, 5});
  auto s = c.add(y, constant(c, "c", {1, 2, 1, 1}, 52));
  const kiln::Model padded =
      c.build({c.conv2d(s, constant(c, "w", {2, 2, 1, 1}, 53), std::nullopt, {.padding = {1, 1, 1, 1}})});
  auto padded_plan = check_on_interpreter(padded, inputs);
  BOOST_TEST(kernel_steps(padded_plan) == 1);
  check_on_vulkan(padded, inputs);
}

BOOST_AUTO_TEST_CASE(windowed_convolutions_take_no_prologue) {
  const std::vector<Tensor> inputs = {random_tensor({1, 2, 5, 5}, 54)};
  kiln::Builder c("window");
  auto y = c.input("x", DType::f32, {1, 2, 5, 5});
  auto s = c.add(y, constant(c, "c", {1, 2, 1, 1}, 55));
  const kiln::Model windowed =
      c.build({c.conv2d(s, constant(c, "w", {2, 2, 3, 3}, 56), std::nullopt, {.padding = {1, 1, 1, 1}})});
  auto plan = check_on_interpreter(windowed, inputs);
  BOOST_TEST(kernel_steps(plan) == 2);
  check_on_vulkan(windowed, inputs);
}

BOOST_AUTO_TEST_CASE(gemm_convolutions_take_a_prologue_only_when_they_read_each_element_once) {
  // A channel scale into a 1x1 convolution: with 2 output channels (one
  // register tile) the product is read once and inlined; with 24 (three
  // tiles) it would be recomputed per tile and stays a kernel of its own.
  const std::vector<Tensor> inputs = {random_tensor({1, 4, 6, 6}, 57)};
  for (const std::int64_t out_channels : {std::int64_t{2}, std::int64_t{24}}) {
    kiln::Builder c("scaled_projection");
    auto x = c.input("x", DType::f32, {1, 4, 6, 6});
    auto scaled = c.mul(x, constant(c, "s", {1, 4, 1, 1}, 58));
    const kiln::Model model = c.build({c.conv2d(scaled, constant(c, "w", {out_channels, 4, 1, 1}, 59), std::nullopt)});
    auto plan = check_on_interpreter(model, inputs);
    BOOST_TEST(kernel_steps(plan) == (out_channels == 2 ? 1u : 2u), out_channels << " output channels");
    check_on_vulkan(model, inputs);
  }
}

BOOST_AUTO_TEST_CASE(inlined_at_every_load_index_and_unfusable_producers_say_why) {
  using namespace kiln::kir;
  // producer: y[i] = 2 * x[i]; consumer: z[i] = a[(i + 1) % 8] + a[i].
  Kernel producer("double");
  auto in = producer.add_buffer("x", ScalarType::f32, Access::read);
  auto out = producer.add_buffer("y", ScalarType::f32, Access::write);
  producer.global_size = 8;
  producer.body.push_back(declare("t", ScalarType::f32, load(in, global_index(), ScalarType::f32) * f32(2.0)));
  producer.body.push_back(store(out, global_index(), var("t", ScalarType::f32)));
  Kernel shift("shift");
  auto a = shift.add_buffer("a", ScalarType::f32, Access::read);
  auto z = shift.add_buffer("z", ScalarType::f32, Access::write);
  shift.global_size = 8;
  const Expr i = global_index();
  shift.body.push_back(store(z, i, load(a, (i + i32(1)) % i32(8), ScalarType::f32) + load(a, i, ScalarType::f32)));
  const kiln::fuse::BoundKernel p{producer, {0, 1}};
  const kiln::fuse::BoundKernel c{shift, {1, 2}};
  BOOST_TEST(!kiln::fuse::prologue_unfusable_reason(p, c, 1, 1, 8).has_value());
  const kiln::fuse::BoundKernel fused = kiln::fuse::fuse_prologue(p, c, 1, 1, 8);
  BOOST_TEST((fused.values == std::vector<ValueId>{2, 0}));
  Tensor x = random_tensor({8}, 54);
  Tensor result(DType::f32, {8});
  const std::vector<std::span<std::byte>> buffers = {result.bytes(), x.bytes()};
  interpret(fused.kernel, buffers);
  auto xv = x.values<float>();
  auto rv = result.values<float>();
  for (std::size_t k = 0; k < 8; ++k) BOOST_TEST(rv[k] == 2 * xv[(k + 1) % 8] + 2 * xv[k], boost::test_tools::tolerance(1e-6f));

  // A producer that is not one invocation per element, or that loops, is not inlined.
  BOOST_TEST(kiln::fuse::prologue_unfusable_reason(p, c, 1, 1, 16).has_value());
  Kernel looping("looping");
  looping.add_buffer("x", ScalarType::f32, Access::read);
  auto ly = looping.add_buffer("y", ScalarType::f32, Access::write);
  looping.global_size = 8;
  looping.body.push_back(declare("acc", ScalarType::f32, f32(0.0)));
  looping.body.push_back(loop("k", i32(0), i32(2), {assign("acc", var("acc", ScalarType::f32) + f32(1.0))}));
  looping.body.push_back(store(ly, global_index(), var("acc", ScalarType::f32)));
  auto why = kiln::fuse::prologue_unfusable_reason({looping, {0, 1}}, c, 1, 1, 8);
  BOOST_REQUIRE(why.has_value());
  BOOST_TEST(why->find("straight-line") != std::string::npos);
  BOOST_CHECK_THROW(kiln::fuse::fuse_prologue({looping, {0, 1}}, c, 1, 1, 8), kiln::Error);
}

BOOST_AUTO_TEST_CASE(prepared_model_runs_like_an_unprepared_one) {
  // prepare() dispatches every kernel once to warm the device up; the
  // intermediates it writes must not leak into the first call's results.
  const kiln::Model model = conv_residual_relu();
  const std::vector<Tensor> inputs = {random_tensor({1, 4, 8, 8}, 55)};
  kiln::CompiledModel cold = kiln::compile(model, {.backend = kiln::testing::test_backend()});
  kiln::CompiledModel prepared = kiln::compile(model, {.backend = kiln::testing::test_backend()});
  prepared.prepare();
  prepared.prepare();  // the second call does nothing
  const std::vector<Tensor> a = cold(inputs);
  const std::vector<Tensor> b = prepared(inputs);
  BOOST_TEST(max_difference(a[0], b[0]) == 0.0f);
  BOOST_TEST(prepared.stats().dispatches_per_run == cold.stats().dispatches_per_run);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(models)

// Compiled (fused) dispatches of a zoo model against eager, equal results,
// and a memory plan where no two live tensors share memory.
void check_zoo_model(const std::string& name, std::int64_t image_size, int max_compiled_dispatches) {
  const kiln::Model model = kiln::models::build(name, {.image_size = image_size, .num_classes = 10, .seed = 3});
  const Tensor input = random_tensor(kiln::internal::graph(model).value(kiln::internal::graph(model).inputs()[0]).type.shape, 29);
  kiln::EagerModel eager = kiln::eager(model, {.backend = kiln::testing::test_backend()});
  kiln::CompiledModel compiled = kiln::compile(model, {.backend = kiln::testing::test_backend()});
  const Tensor expected = eager({input})[0];
  const Tensor got = compiled({input})[0];
  const float diff = max_difference(got, expected);
  float scale = 0;
  for (float v : expected.values<float>()) scale = std::max(scale, std::fabs(v));
  BOOST_TEST_MESSAGE(name << ": dispatches eager " << eager.stats().dispatches_per_run << ", compiled "
                          << compiled.stats().dispatches_per_run << "; max |compiled - eager| = " << diff
                          << " (max |eager| " << scale << ")");
  BOOST_TEST(diff <= 1e-4f * std::max(1.0f, scale));
  BOOST_TEST(compiled.stats().dispatches_per_run <= max_compiled_dispatches);
  BOOST_TEST(compiled.stats().dispatches_per_run < eager.stats().dispatches_per_run);

  // No two live tensors share memory: replay the dispatches and check every
  // value a dispatch binds against every value still live at that step.
  const kiln::Executor& engine = kiln::internal::engine(compiled);
  kiln::compiler::check_memory_plan(engine.lifetimes(), engine.memory_plan(), 16);
  const kiln::graph::Graph& g = engine.planned_graph();
  const auto dispatches = engine.dispatches();
  std::map<ValueId, std::pair<int, int>> live;  // value -> [first, last] dispatch
  for (int step = 0; step < static_cast<int>(dispatches.size()); ++step)
    for (ValueId v : dispatches[static_cast<std::size_t>(step)].values) {
      if (g.value(v).constant || g.value(v).producer == kiln::graph::kNoNode) continue;
      auto [it, fresh] = live.try_emplace(v, step, step);
      if (!fresh) it->second.second = step;
    }
  for (ValueId v : g.outputs()) live[v].second = static_cast<int>(dispatches.size());
  int fused_away = 0;
  for (const auto& node : g.nodes())
    for (ValueId v : node.outputs)
      if (!engine.placement(v)) ++fused_away;
  BOOST_TEST(fused_away > 0);
  int checked = 0;
  for (const auto& [a, la] : live)
    for (const auto& [b, lb] : live) {
      if (a >= b || la.second < lb.first || lb.second < la.first) continue;
      if (engine.storage_root(a) == engine.storage_root(b)) continue;  // a view shares its tensor's memory
      const auto pa = engine.placement(a), pb = engine.placement(b);
      BOOST_REQUIRE((pa && pb));
      if (pa->buffer != pb->buffer) continue;
      ++checked;
      const bool disjoint = pa->offset + pa->bytes <= pb->offset || pb->offset + pb->bytes <= pa->offset;
      BOOST_TEST(disjoint, "'" << g.value(a).name << "' and '" << g.value(b).name
                               << "' are live together and share memory");
    }
  BOOST_TEST(checked > 0);
}

BOOST_AUTO_TEST_CASE(resnet18_dispatches_drop) {
  // 20 convolutions (+ maxpool, pool, flatten view, gemm) with every BN,
  // residual add and relu fused: exactly one dispatch per conv or pool or gemm.
  check_zoo_model("resnet18", 32, 23);
}

BOOST_AUTO_TEST_CASE(mobilenet_v2_dispatches_drop) { check_zoo_model("mobilenet_v2", 32, 55); }

BOOST_AUTO_TEST_CASE(efficientnet_b0_dispatches_drop) {
  // Every SiLU (a Sigmoid-Mul pair as exported, 49 of them) fuses into its
  // convolution: 110 dispatches (154 with KILN_NO_SILU=1, `kiln run
  // --image-size 32`).
  // The squeeze-excitation multiplies stay kernels of their own: inlined into
  // the 1x1 projection they would be recomputed once per tile of its output
  // channels (scale_conv_weights moves them onto weights only at larger sizes).
  check_zoo_model("efficientnet_b0", 32, 110);
}

BOOST_AUTO_TEST_CASE(dumped_sources_are_the_compiled_kernels) {
  // `kiln dump`'s sources: one per dispatch compiled mode runs, in order,
  // for every built-in language, each naming its fused nodes.
  const kiln::Model model = kiln::models::build("resnet18", {.image_size = 32, .num_classes = 10, .seed = 3});
  kiln::CompiledModel compiled = kiln::compile(model, {.backend = kiln::testing::test_backend()});
  compiled.prepare();
  const auto dispatches = kiln::internal::engine(compiled).dispatches();
  for (const std::string& backend : kiln::compiler::source_backends()) {
    const kiln::KernelSources sources = kiln::compiler::generate_sources(model, backend);
    BOOST_TEST_MESSAGE(backend << " (" << sources.language << "): " << sources.kernels.size() << " kernels");
    BOOST_REQUIRE(sources.kernels.size() == dispatches.size());
    std::set<std::string> files;
    for (std::size_t i = 0; i < dispatches.size(); ++i) {
      const auto& kernel = sources.kernels[i];
      BOOST_TEST(kernel.nodes.size() == dispatches[i].nodes.size());
      BOOST_TEST(kernel.source.find(kernel.kernel_name) != std::string::npos);
      BOOST_TEST(kernel.file_name.find(kernel.kernel_name) != std::string::npos);
      files.insert(kernel.file_name);
    }
    BOOST_TEST(files.size() == sources.kernels.size());  // one file per kernel
    if (backend == "vulkan") {
      // Parameterised as compiled: one distinct source per pipeline it loads.
      std::set<std::string> texts;
      for (const auto& kernel : sources.kernels) texts.insert(kernel.source);
      BOOST_TEST(static_cast<int>(texts.size()) == compiled.stats().kernels);
    }
  }
  BOOST_CHECK_THROW(kiln::compiler::generate_sources(model, "no_such_backend"), kiln::Error);

  // The public call takes each backend's declared source target.
  const std::vector<std::string> targets = kiln::source_targets();
  BOOST_TEST(targets.front() == "vulkan");
  BOOST_TEST((std::find(targets.begin(), targets.end(), "c") != targets.end()));
  BOOST_TEST((std::find(targets.begin(), targets.end(), "cpu") == targets.end()), "cpu's C99 is c's");
  const kiln::KernelSources c = kiln::kernel_sources(model, "c");
  BOOST_TEST(c.backend == "null");
  BOOST_TEST(c.language == "c99");
  BOOST_TEST(c.kernels.size() == dispatches.size());
  try {
    kiln::kernel_sources(model, "null");
    BOOST_ERROR("a backend name that is no source target was taken");
  } catch (const kiln::Error& e) {
    BOOST_TEST(e.kind() == kiln::ErrorKind::NotFound);
    BOOST_TEST(std::string(e.what()).find("'null' (built in: vulkan") != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_SUITE_END()

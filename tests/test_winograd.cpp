#define BOOST_TEST_MODULE winograd
#include <boost/test/unit_test.hpp>

// The winograd pass and its ops (WinogradInput, WinogradOutput, and eager
// mode's WinogradWeight): the rewritten graph against the original Conv on
// the reference implementation and on Vulkan (compiled and eager mode), which
// convolutions it takes, and how the scheduler fuses what follows.

#include <kiln/builder.h>
#include <kiln/kiln.h>

#include "test_backend.h"
#include "backends/registry.h"
#include "graph/ir.h"
#include "graph/op_registry.h"
#include "graph/passes/passes.h"
#include "graph/winograd_weights.h"
#include "shaders/heuristic.h"
#include "src/fuse/schedule.h"
#include "src/lower/target_policy.h"
#include "src/runtime/executor.h"
#include "src/render/cstyle.h"
#include "tensor_checks.h"
#include "src/runtime/internal_access.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace {

using kiln::DType;
using kiln::Shape;
using kiln::Tensor;
namespace passes = kiln::graph::passes;

using tensor_checks::random_tensor;
using tensor_checks::relative_difference;

struct ConvCase {
  std::string name;
  std::int64_t batch, in_channels, out_channels, height, width;
  std::vector<std::int64_t> padding;  // top, left, bottom, right
  std::vector<std::int64_t> dilation;
  bool bias, relu;
  std::int64_t tile;  // the F(tile x tile, 3x3) the pass picks
};

// F(4x4)'s transforms have entries up to 8 (A^T) and 1/24 (G): its fp32
// error is an order of magnitude above F(2x2)'s.
double tolerance(std::int64_t tile) { return tile == 4 ? 1e-4 : 1e-5; }

// Odd and even extents, padding 0, 1, 2 and asymmetric, batch 2, dilations
// (fcn_resnet50's backbone uses 2 and 4), with and without bias and Relu;
// each just above the pass's 8 M multiply-adds. F(2x2) on maps (or, with
// dilation, sub-grids) under 14 outputs along an axis, F(4x4) on larger ones.
const std::vector<ConvCase> kCases = {
    {"batch2_odd", 2, 64, 72, 13, 9, {1, 1, 1, 1}, {1, 1}, false, false, 2},
    {"batch2_dilation2_relu", 2, 64, 64, 13, 11, {2, 2, 2, 2}, {2, 2}, true, true, 2},
    {"asymmetric_dilation3x1", 1, 64, 72, 21, 17, {1, 0, 0, 2}, {3, 1}, false, true, 2},
    {"dilation4", 1, 72, 64, 16, 16, {4, 4, 4, 4}, {4, 4}, true, false, 2},
    {"f4_pad1_bias_relu", 1, 64, 64, 16, 16, {1, 1, 1, 1}, {1, 1}, true, true, 4},
    {"f4_batch2_odd", 2, 64, 72, 17, 15, {1, 1, 1, 1}, {1, 1}, false, false, 4},
    {"f4_pad0_bias", 1, 72, 64, 21, 19, {0, 0, 0, 0}, {1, 1}, true, false, 4},
    {"f4_batch2_dilation2_relu", 2, 64, 64, 31, 29, {2, 2, 2, 2}, {2, 2}, true, true, 4},
    {"f4_asymmetric_dilation2x1", 1, 64, 72, 30, 15, {1, 0, 0, 2}, {2, 1}, false, true, 4},
};

const ConvCase& find_case(const std::string& name) {
  const auto found = std::find_if(kCases.begin(), kCases.end(), [&](const ConvCase& c) { return c.name == name; });
  BOOST_REQUIRE(found != kCases.end());
  return *found;
}

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

// Eager mode's graph: the winograd pass with the weight transformed every call.
kiln::graph::Graph eager_graph(const kiln::graph::Graph& g) { return passes::run_eager_passes(g).graph; }

// The constant values of a graph, by name.
std::vector<std::string> constant_names(const kiln::graph::Graph& g) {
  std::vector<std::string> names;
  for (const auto& v : g.values())
    if (v.constant) names.push_back(v.name);
  std::sort(names.begin(), names.end());
  return names;
}

// A model of one WinogradWeight node whose weight is an input, so that its
// kernel (not a fold) computes U.
kiln::Model weight_transform_model(const Shape& weight, std::int64_t tile) {
  auto g = std::make_shared<kiln::graph::Graph>();
  const auto w = g->add_input("w", {DType::f32, weight});
  kiln::graph::Attributes attrs;
  attrs.set("output_tile", tile);
  g->set_outputs({g->add_node("WinogradWeight", {w}, attrs)[0]});
  return kiln::internal::make_model(g, "winograd_weight");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(reference)

BOOST_AUTO_TEST_CASE(rewritten_convolutions_match_the_original) {
  for (const ConvCase& c : kCases) {
    BOOST_TEST_CONTEXT(c.name) {
      const kiln::Model model = conv_model(c);
      const passes::PassResult result = passes::winograd(passes::fuse_activation(kiln::internal::graph(model)).graph);
      BOOST_TEST(result.report.changes == 1);
      BOOST_REQUIRE((ops_of(result.graph) == std::vector<std::string>{"WinogradInput", "MatMul", "WinogradOutput"}));
      BOOST_TEST(result.graph.node(0).attrs.get_int("output_tile", 0) == c.tile);
      BOOST_TEST(result.graph.node(2).attrs.get_int("output_tile", 0) == c.tile);
      const std::vector<Tensor> inputs = {random_tensor(model.inputs()[0].shape, 3)};
      const Tensor expected = kiln::graph::run_reference(kiln::internal::graph(model), inputs)[0];
      const Tensor actual = kiln::graph::run_reference(result.graph, inputs)[0];
      const double diff = relative_difference(actual, expected);
      BOOST_TEST_MESSAGE(c.name << ": relative difference " << diff);
      BOOST_TEST(diff < tolerance(c.tile));
    }
  }
}

BOOST_AUTO_TEST_CASE(matmul_is_batched_over_the_16_transformed_planes) {
  const ConvCase& c = find_case("batch2_odd");  // 13x9 output: 7x5 F(2x2) tiles per image
  const kiln::graph::Graph g = winograd_graph(kiln::internal::graph(conv_model(c)));
  const auto& matmul = g.node(1);
  BOOST_TEST(g.value(matmul.inputs[0]).constant.has_value());
  BOOST_TEST((g.value(matmul.inputs[0]).type.shape == Shape{16, 72, 64}));
  // 2 * 7 * 5 = 70 tiles, padded to 80 columns for the GEMM's register tiles.
  BOOST_TEST((g.value(matmul.inputs[1]).type.shape == Shape{16, 64, 80}));
  BOOST_TEST((g.value(matmul.outputs[0]).type.shape == Shape{16, 72, 80}));
  // The Conv's name and its output's name survive on WinogradOutput.
  BOOST_TEST(g.node(2).name == kiln::internal::graph(conv_model(c)).nodes()[0].name);
}

BOOST_AUTO_TEST_CASE(the_rule_is_the_devices) {
  const ConvCase& c = find_case("batch2_odd");  // 64 -> 72 channels, 70 F(2x2) tiles
  const kiln::graph::Graph conv = kiln::internal::graph(conv_model(c));
  const auto columns = [](const kiln::graph::Graph& g) { return g.value(g.node(1).inputs[1]).type.shape[2]; };
  // The column multiple pads the tiles: 70 -> 80 for 16 (the default), 72 for 8.
  BOOST_TEST(columns(passes::winograd(conv).graph) == 80);
  BOOST_TEST(columns(passes::winograd(conv, {.rule = {.column_multiple = 8}}).graph) == 72);
  // 96 columns for 32 would cost more multiplies than the rule allows.
  BOOST_TEST(passes::winograd(conv, {.rule = {.column_multiple = 32}}).report.changes == 0);
  // Each threshold keeps the convolution when it is not met.
  BOOST_TEST(passes::winograd(conv, {.rule = {.min_in_channels = 65}}).report.changes == 0);
  BOOST_TEST(passes::winograd(conv, {.rule = {.min_out_channels = 73}}).report.changes == 0);
  BOOST_TEST(passes::winograd(conv, {.rule = {.min_multiply_adds = std::int64_t{1} << 40}}).report.changes == 0);
  const passes::PassResult too_large = passes::winograd(conv, {.rule = {.max_weight_bytes = 16 * 72 * 64 * 4 - 1}});
  BOOST_TEST(too_large.report.changes == 0);
  BOOST_TEST(passes::report_str(too_large.report).find("would exceed 294911 bytes") != std::string::npos,
             passes::report_str(too_large.report));

  // The target policy fills it: the GEMM heuristic's column multiple, and
  // the device's largest binding where it is below every Vulkan device's.
  kiln::backend::TargetDesc target;
  target.cpu_cores = true;
  target.max_buffer_bytes = std::uint64_t{1} << 30;
  const kiln::lower::TargetPolicy roomy = kiln::lower::target_policy(target);
  BOOST_TEST(roomy.winograd.column_multiple == kiln::shaders::gemm_column_multiple(roomy.lower));
  BOOST_TEST(roomy.winograd.max_weight_bytes == std::int64_t{1} << 27);
  target.max_buffer_bytes = std::uint64_t{1} << 20;
  const kiln::lower::TargetPolicy small = kiln::lower::target_policy(target);
  BOOST_TEST(small.winograd.max_weight_bytes == std::int64_t{1} << 20);
  BOOST_TEST(small.pass_options({}).winograd.max_weight_bytes == std::int64_t{1} << 20);
  BOOST_TEST(small.eager_pass_options(kiln::Settings{}).winograd.max_weight_bytes == std::int64_t{1} << 20);
}

BOOST_AUTO_TEST_CASE(f4_matmul_is_batched_over_36_transformed_planes) {
  const ConvCase& c = find_case("f4_batch2_odd");  // 17x15 output: 5x4 F(4x4) tiles per image
  const kiln::graph::Graph g = winograd_graph(kiln::internal::graph(conv_model(c)));
  const auto& matmul = g.node(1);
  BOOST_TEST((g.value(matmul.inputs[0]).type.shape == Shape{36, 72, 64}));
  // 2 * 5 * 4 = 40 tiles, padded to 48 columns.
  BOOST_TEST((g.value(matmul.inputs[1]).type.shape == Shape{36, 64, 48}));
  BOOST_TEST((g.value(matmul.outputs[0]).type.shape == Shape{36, 72, 48}));
}

BOOST_AUTO_TEST_CASE(pass_picks_f4_where_the_sub_grids_are_large) {
  struct Pick {
    std::string why;
    std::int64_t channels, size, dilation;
    std::int64_t tile;
  };
  const std::vector<Pick> picks = {
      {"56x56 (ResNet's first stage)", 64, 56, 1, 4},
      {"14x14, the smallest F(4x4) map", 256, 14, 1, 4},
      {"13x13", 256, 13, 1, 2},
      {"7x7 (ResNet's last stage)", 512, 7, 1, 2},
      {"dilation 2 on 28x28: 14x14 sub-grids", 256, 28, 2, 4},
      {"dilation 2 on 26x26: 13x13 sub-grids", 256, 26, 2, 2},
      {"dilation 4 on 28x28: 7x7 sub-grids", 256, 28, 4, 2},
  };
  for (const Pick& pick : picks) {
    BOOST_TEST_CONTEXT(pick.why) {
      kiln::Builder b("pick");
      auto x = b.input("x", DType::f32, {1, pick.channels, pick.size, pick.size});
      const std::int64_t d = pick.dilation;
      auto y = b.conv2d(x, b.constant("w", random_tensor({pick.channels, pick.channels, 3, 3}, 12)), std::nullopt,
                        {.padding = {d, d, d, d}, .dilation = {d, d}});
      const passes::PassResult result = passes::winograd(kiln::internal::graph(b.build({y})));
      BOOST_REQUIRE(result.report.changes == 1);
      BOOST_TEST(result.graph.node(0).attrs.get_int("output_tile", 0) == pick.tile);
      const std::string f = std::to_string(pick.tile);
      BOOST_TEST(result.report.details.back().find("F(" + f + "x" + f + ", 3x3)") != std::string::npos);
    }
  }
}

BOOST_AUTO_TEST_CASE(pass_picks_f2_where_the_f4_weight_would_not_fit_a_storage_buffer) {
  // FCN-ResNet50's classifier: 2048 -> 512 channels on 28x28; U is 151 MB
  // with F(4x4), over Vulkan's guaranteed 2^27-byte buffers, 67 MB with F(2x2).
  kiln::Builder b("classifier");
  auto x = b.input("x", DType::f32, {1, 2048, 28, 28});
  auto y = b.conv2d(x, b.constant("w", random_tensor({512, 2048, 3, 3}, 13)), std::nullopt, {.padding = {1, 1, 1, 1}});
  const passes::PassResult result = passes::winograd(kiln::internal::graph(b.build({y})));
  BOOST_REQUIRE(result.report.changes == 1);
  BOOST_TEST(result.graph.node(0).attrs.get_int("output_tile", 0) == 2);
  BOOST_TEST((result.graph.value(result.graph.node(1).inputs[0]).type.shape == Shape{16, 512, 2048}));
}

BOOST_AUTO_TEST_CASE(switch_forces_f2) {
  const kiln::Model model = conv_model(find_case("f4_pad1_bias_relu"));
  BOOST_TEST(passes::winograd(kiln::internal::graph(model)).graph.node(0).attrs.get_int("output_tile", 0) == 4);
  const passes::PassResult result = passes::winograd(kiln::internal::graph(model), {.max_tile = 2});
  BOOST_TEST(result.report.changes == 1);
  BOOST_TEST(result.graph.node(0).attrs.get_int("output_tile", 0) == 2);
  BOOST_TEST(result.report.details.at(0) == "F(4x4, 3x3) off: output tiles of 2x2 only");
  // The pipeline takes it from the winograd_tile setting.
  const passes::PipelineResult piped =
      passes::run_compile_passes(kiln::internal::graph(model), {.settings = kiln::Settings().with("winograd_tile", "2")});
  bool found = false;
  for (const kiln::graph::Node& node : piped.graph.nodes())
    if (node.op == "WinogradInput") found = node.attrs.get_int("output_tile", 0) == 2;
  BOOST_TEST(found);
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
      BOOST_TEST(passes::winograd(kiln::internal::graph(model)).report.changes == 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(switch_turns_the_pass_off) {
  const kiln::Model model = conv_model(find_case("f4_pad1_bias_relu"));
  const kiln::Settings off = kiln::Settings::resolve(kiln::Mode::default_, {{"winograd", "off"}});
  const passes::PipelineResult result = passes::run_compile_passes(kiln::internal::graph(model), {.settings = off});
  for (const kiln::graph::Node& node : result.graph.nodes()) BOOST_TEST(node.op != "WinogradInput");
  const auto report = std::find_if(result.reports.begin(), result.reports.end(),
                                   [](const passes::PassReport& r) { return r.pass == "winograd"; });
  BOOST_REQUIRE(report != result.reports.end());
  BOOST_TEST(report->changes == 0);
  BOOST_TEST(report->details.at(0) == "off: setting winograd=off (CompileOptions::settings)");
}

BOOST_AUTO_TEST_CASE(pipeline_runs_it_before_pack_weights) {
  const passes::PipelineResult result = passes::run_compile_passes(kiln::internal::graph(conv_model(find_case("f4_pad1_bias_relu"))));
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

BOOST_AUTO_TEST_CASE(weight_op_reference_is_the_compile_time_transform) {
  for (const char* name : {"batch2_odd", "f4_pad1_bias_relu"}) {
    BOOST_TEST_CONTEXT(name) {
      const kiln::Model model = conv_model(find_case(name));
      const kiln::graph::Graph compiled = winograd_graph(kiln::internal::graph(model));
      const Tensor& folded = *compiled.value(compiled.node(1).inputs[0]).constant;
      const kiln::graph::Graph eager = eager_graph(kiln::internal::graph(model));
      const auto& transform = eager.node(1);
      BOOST_REQUIRE(transform.op == "WinogradWeight");
      const Tensor weight = *eager.value(transform.inputs[0]).constant;
      const std::vector<Tensor> computed = kiln::graph::find_op("WinogradWeight")->reference(transform, {&weight, 1});
      BOOST_TEST(computed.at(0).shape() == folded.shape());
      BOOST_TEST(kiln::max_abs_diff(computed.at(0), folded) == 0.0f);
    }
  }
}

BOOST_AUTO_TEST_CASE(weight_transform_of_an_all_ones_filter_is_an_outer_product) {
  // G 1 is the vector of G's row sums r, so G 1 1^T G^T = r r^T: F(2x2)'s G
  // sums to (1, 3/2, 1/2, 1), F(4x4)'s to (1/4, -1/2, -1/6, 7/24, 1/8, 1).
  const std::vector<std::pair<std::int64_t, std::vector<double>>> sums = {
      {2, {1, 1.5, 0.5, 1}}, {4, {0.25, -0.5, -1.0 / 6, 7.0 / 24, 0.125, 1}}};
  Tensor ones(DType::f32, {2, 3, 3, 3});
  for (float& v : ones.values<float>()) v = 1.0f;
  for (const auto& [tile, r] : sums) {
    BOOST_TEST_CONTEXT("F(" << tile << "x" << tile << ")") {
      const Tensor u = kiln::graph::winograd_transform_weight(ones, tile);
      const auto n = r.size();
      BOOST_REQUIRE((u.shape() == Shape{static_cast<std::int64_t>(n * n), 2, 3}));
      for (std::size_t xi = 0; xi < n; ++xi)
        for (std::size_t nu = 0; nu < n; ++nu)
          for (std::size_t filter = 0; filter < 6; ++filter)
            BOOST_TEST(u.values<float>()[(xi * n + nu) * 6 + filter] == r[xi] * r[nu],
                       boost::test_tools::tolerance(1e-6));
    }
  }
}

BOOST_AUTO_TEST_CASE(eager_graph_transforms_the_weight_every_call) {
  for (const ConvCase& c : kCases) {
    BOOST_TEST_CONTEXT(c.name) {
      const kiln::Model model = conv_model(c);
      const passes::PipelineResult result = passes::run_eager_passes(kiln::internal::graph(model));
      BOOST_REQUIRE(result.reports.size() == 1u);
      BOOST_TEST(result.reports[0].changes == 1);
      // No fusion: the Relu stays a node of its own; no fold: the only
      // constants are the model's own (no transformed weight).
      std::vector<std::string> expected = {"WinogradInput", "WinogradWeight", "MatMul", "WinogradOutput"};
      if (c.relu) expected.push_back("Relu");
      BOOST_REQUIRE(ops_of(result.graph) == expected);
      BOOST_TEST(constant_names(result.graph) == constant_names(kiln::internal::graph(model)));
      BOOST_TEST(result.graph.node(1).attrs.get_int("output_tile", 0) == c.tile);
      BOOST_TEST(result.graph.node(0).attrs.get_int("output_tile", 0) == c.tile);
      // The same F(m x m) and GEMM shape as compile() picks.
      const kiln::graph::Graph compiled = winograd_graph(kiln::internal::graph(model));
      const auto gemm_shape = [](const kiln::graph::Graph& g) {
        for (const auto& node : g.nodes())
          if (node.op == "MatMul") return Shape(g.value(node.outputs[0]).type.shape);
        return Shape{};
      };
      BOOST_TEST(gemm_shape(result.graph) == gemm_shape(compiled));

      const std::vector<Tensor> inputs = {random_tensor(model.inputs()[0].shape, 3)};
      const Tensor expected_y = kiln::graph::run_reference(kiln::internal::graph(model), inputs)[0];
      const double diff = relative_difference(kiln::graph::run_reference(result.graph, inputs)[0], expected_y);
      BOOST_TEST(diff < tolerance(c.tile));
    }
  }
}

BOOST_AUTO_TEST_CASE(eager_switch_keeps_the_direct_convolution) {
  const kiln::Model model = conv_model(find_case("f4_pad1_bias_relu"));
  const passes::PipelineResult result = passes::run_eager_passes(kiln::internal::graph(model), {.eager_winograd = false});
  BOOST_TEST((ops_of(result.graph) == std::vector<std::string>{"Conv", "Relu"}));
  BOOST_REQUIRE(result.reports.size() == 1u);
  BOOST_TEST(result.reports[0].changes == 0);
  BOOST_TEST(result.reports[0].details.at(0) == "off: EagerPassOptions::eager_winograd=false");
}

BOOST_AUTO_TEST_CASE(eager_passes_leave_other_ops_alone) {
  // A strided 3x3, a 1x1, a BatchNormalization and a Relu: nothing for
  // Winograd, and nothing else (no folding, no fusion, not even value ids)
  // may change.
  kiln::Builder b("no_winograd");
  auto x = b.input("x", DType::f32, {1, 64, 32, 32});
  auto y = b.conv2d(x, b.constant("w", random_tensor({64, 64, 3, 3}, 14)), std::nullopt,
                    {.stride = {2, 2}, .padding = {1, 1, 1, 1}});
  Tensor variance = random_tensor({64}, 18);
  for (float& v : variance.values<float>()) v = 1.0f + 0.5f * v;  // positive
  y = b.batch_norm(y, b.constant("scale", random_tensor({64}, 15)), b.constant("shift", random_tensor({64}, 16)),
                   b.constant("mean", random_tensor({64}, 17)), b.constant("var", variance));
  y = b.conv2d(b.relu(y), b.constant("w1", random_tensor({64, 64, 1, 1}, 19)), std::nullopt);
  const kiln::Model model = b.build({y});
  const passes::PipelineResult result = passes::run_eager_passes(kiln::internal::graph(model));
  BOOST_TEST(result.reports.at(0).changes == 0);
  BOOST_TEST(result.graph.to_string() == kiln::internal::graph(model).to_string());
}

BOOST_AUTO_TEST_CASE(ops_reject_shapes_that_do_not_fit) {
  kiln::graph::Graph g;
  const auto m = g.add_input("m", {DType::f32, {16, 8, 7}});
  kiln::graph::Attributes attrs;
  attrs.set("output_shape", std::vector<std::int64_t>{2, 8, 4, 4});  // 2 images of 4 tiles: 7 columns are too few
  BOOST_CHECK_THROW(g.add_node("WinogradOutput", {m}, attrs), kiln::Error);
  const auto x = g.add_input("x", {DType::f32, {1, 8, 2, 2}});
  BOOST_CHECK_THROW(g.add_node("WinogradInput", {x}, {}), kiln::Error);  // 2x2 is smaller than the 3x3 window
  // F(4x4) reads 36 planes, not 16.
  const auto m16 = g.add_input("m16", {DType::f32, {16, 8, 8}});
  attrs.set("output_tile", std::int64_t{4});
  BOOST_CHECK_THROW(g.add_node("WinogradOutput", {m16}, attrs), kiln::Error);
  const auto m36 = g.add_input("m36", {DType::f32, {36, 8, 2}});  // 2 images of one 4x4 tile
  BOOST_CHECK_NO_THROW(g.add_node("WinogradOutput", {m36}, attrs));
  // Only F(2x2) and F(4x4) exist.
  const auto big = g.add_input("big", {DType::f32, {1, 8, 8, 8}});
  kiln::graph::Attributes tile3;
  tile3.set("output_tile", std::int64_t{3});
  BOOST_CHECK_THROW(g.add_node("WinogradInput", {big}, tile3), kiln::Error);
  // WinogradWeight transforms 3x3 f32 filters only, into 16 or 36 planes.
  const auto w5 = g.add_input("w5", {DType::f32, {8, 8, 5, 5}});
  BOOST_CHECK_THROW(g.add_node("WinogradWeight", {w5}, {}), kiln::Error);
  const auto w3 = g.add_input("w3", {DType::f32, {8, 4, 3, 3}});
  BOOST_CHECK_THROW(g.add_node("WinogradWeight", {w3}, tile3), kiln::Error);
  kiln::graph::Attributes tile4;
  tile4.set("output_tile", std::int64_t{4});
  const auto u = g.add_node("WinogradWeight", {w3}, tile4)[0];
  BOOST_TEST((g.value(u).type.shape == Shape{36, 8, 4}));
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
  const kiln::graph::Graph passed = passes::run_compile_passes(kiln::internal::graph(model)).graph;
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
      const Tensor expected = kiln::graph::run_reference(kiln::internal::graph(model), inputs)[0];
      kiln::CompiledModel compiled = kiln::compile(model, {.backend = kiln::testing::test_backend()});
      const double diff = relative_difference(compiled(inputs)[0], expected);
      BOOST_TEST_MESSAGE(c.name << ": relative difference on Vulkan " << diff);
      BOOST_TEST(diff < tolerance(c.tile));
      BOOST_TEST(compiled.stats().dispatches_per_run == 3);  // input transform, GEMM, output transform
    }
  }
}

BOOST_AUTO_TEST_CASE(residual_add_and_relu_fuse_into_the_output_transform) {
  // ResNet's block tail: conv (bias) -> + x -> Relu, with F(4x4) (16x16 map)
  // and with F(2x2) forced.
  kiln::Builder b("winograd_residual");
  auto x = b.input("x", DType::f32, {1, 64, 16, 16});
  auto y = b.conv2d(x, b.constant("w", random_tensor({64, 64, 3, 3}, 6)), b.constant("bias", random_tensor({64}, 7)),
                    {.padding = {1, 1, 1, 1}});
  const kiln::Model model = b.build({b.relu(b.add(y, x))});
  const std::vector<Tensor> inputs = {random_tensor({1, 64, 16, 16}, 8)};
  const Tensor expected = kiln::graph::run_reference(kiln::internal::graph(model), inputs)[0];

  for (const std::int64_t tile : {4, 2}) {
    BOOST_TEST_CONTEXT("F(" << tile << "x" << tile << ")") {
      const kiln::Settings settings = kiln::Settings().with("winograd_tile", tile == 2 ? "2" : "auto");
      const kiln::graph::Graph passed = passes::run_compile_passes(kiln::internal::graph(model), {.settings = settings}).graph;
      kiln::fuse::PlanOptions options;
      options.fuse = true;
      const kiln::fuse::KernelPlan plan = kiln::fuse::plan_kernels(passed, options);
      BOOST_REQUIRE(plan.steps.size() == 3u);
      BOOST_TEST(passed.node(plan.steps[0].nodes.at(0)).attrs.get_int("output_tile", 0) == tile);
      std::vector<std::string> last;
      for (auto id : plan.steps[2].nodes) last.push_back(passed.node(id).op);
      BOOST_TEST((last == std::vector<std::string>{"WinogradOutput", "Add", "Relu"}));
      // The transformed products are one batched GEMM kernel.
      BOOST_TEST(plan.steps[1].nodes.size() == 1u);
      BOOST_TEST(plan.steps[1].kernel->kernel.name.rfind("matmul_", 0) == 0u);

      kiln::CompiledModel compiled = kiln::compile(model, {.backend = kiln::testing::test_backend()});
      const double diff = relative_difference(compiled(inputs)[0], expected);
      BOOST_TEST_MESSAGE("residual block: relative difference on Vulkan " << diff);
      BOOST_TEST(diff < tolerance(tile));
      BOOST_TEST(compiled.stats().dispatches_per_run == 3);
    }
  }
}

BOOST_AUTO_TEST_CASE(weight_kernel_matches_the_compile_time_transform) {
  // fp32 on the device against the pass's double transform rounded once:
  // a few units in the last place. 72 x 65 filters: the last workgroup of
  // 64 invocations is partly past the end.
  for (const std::int64_t tile : {2, 4}) {
    BOOST_TEST_CONTEXT("F(" << tile << "x" << tile << ")") {
      const Tensor weight = random_tensor({72, 65, 3, 3}, 20);
      kiln::EagerModel eager = kiln::eager(weight_transform_model(weight.shape(), tile), {.backend = kiln::testing::test_backend()});
      const Tensor got = eager({weight})[0];
      const double diff = relative_difference(got, kiln::graph::winograd_transform_weight(weight, tile));
      BOOST_TEST_MESSAGE("WinogradWeight F(" << tile << "x" << tile << ") on Vulkan: relative difference " << diff);
      BOOST_TEST(diff < 1e-6);
      BOOST_TEST(eager.stats().dispatches_per_run == 1);
    }
  }
}

BOOST_AUTO_TEST_CASE(eager_convolutions_run_as_four_dispatches_and_match_the_reference) {
  for (const ConvCase& c : kCases) {
    BOOST_TEST_CONTEXT(c.name) {
      const kiln::Model model = conv_model(c);
      const std::vector<Tensor> inputs = {random_tensor(model.inputs()[0].shape, 5)};
      const Tensor expected = kiln::graph::run_reference(kiln::internal::graph(model), inputs)[0];
      kiln::EagerModel eager = kiln::eager(model, {.backend = kiln::testing::test_backend()});
      const double diff = relative_difference(eager(inputs)[0], expected);
      BOOST_TEST_MESSAGE(c.name << ": relative difference in eager mode on Vulkan " << diff);
      BOOST_TEST(diff < tolerance(c.tile));
      // Weight transform, input transform, GEMM, output transform (with the
      // bias); eager fuses nothing, so a Relu is one more.
      std::vector<std::string> kernels;
      for (const auto& d : kiln::internal::engine(eager).dispatches()) kernels.push_back(d.kernel_name);
      BOOST_REQUIRE(kernels.size() == (c.relu ? 5u : 4u));
      const std::string f = c.tile == 4 ? "winograd4_" : "winograd_";
      BOOST_TEST(kernels[0] == f + "input");
      BOOST_TEST(kernels[1] == f + "weight");
      BOOST_TEST(kernels[2].rfind("matmul_", 0) == 0u);
      BOOST_TEST(kernels[3] == f + "output");
      BOOST_TEST(eager.stats().dispatches_per_run == static_cast<int>(kernels.size()));
    }
  }
}

BOOST_AUTO_TEST_CASE(eager_keeps_the_direct_convolution_where_winograd_does_not_apply) {
  // Strided: the winograd pass declines, and eager runs the Conv as one dispatch.
  kiln::Builder b("strided");
  auto x = b.input("x", DType::f32, {1, 64, 64, 64});
  auto y = b.conv2d(x, b.constant("w", random_tensor({64, 64, 3, 3}, 21)), std::nullopt,
                    {.stride = {2, 2}, .padding = {1, 1, 1, 1}});
  const kiln::Model model = b.build({y});
  const std::vector<Tensor> inputs = {random_tensor({1, 64, 64, 64}, 22)};
  kiln::EagerModel eager = kiln::eager(model, {.backend = kiln::testing::test_backend()});
  const double diff = relative_difference(eager(inputs)[0], kiln::graph::run_reference(kiln::internal::graph(model), inputs)[0]);
  BOOST_TEST(diff < 1e-5);
  BOOST_TEST(eager.stats().dispatches_per_run == 1);
  BOOST_TEST((ops_of(kiln::internal::engine(eager).planned_graph()) == std::vector<std::string>{"Conv"}));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(codegen)

BOOST_AUTO_TEST_CASE(kernels_compile_for_every_offline_cuda_and_hip_target) {
  // The F(2x2) and F(4x4) transforms (with and without padding columns,
  // dilation 1 and 2; eager mode's weight transforms), the batched GEMM and
  // the output transform with a fused residual Add + Relu.
  kiln::Builder b("winograd_residual");
  auto x = b.input("x", DType::f32, {1, 64, 16, 16});
  auto y = b.conv2d(x, b.constant("w", random_tensor({64, 64, 3, 3}, 11)), std::nullopt, {.padding = {1, 1, 1, 1}});
  std::vector<kiln::graph::Graph> graphs = {passes::run_compile_passes(kiln::internal::graph(b.build({b.relu(b.add(y, x))}))).graph};
  // F(2x2) with padding columns, with dilation 2; F(4x4) with dilation (2, 1) and with batch 2 and padding columns.
  for (const char* name : {"batch2_odd", "batch2_dilation2_relu", "f4_asymmetric_dilation2x1", "f4_batch2_odd"})
    graphs.push_back(passes::run_compile_passes(kiln::internal::graph(conv_model(find_case(name)))).graph);
  // Eager mode's weight transforms, F(2x2) and F(4x4).
  for (const std::int64_t tile : {2, 4}) graphs.push_back(kiln::internal::graph(weight_transform_model({72, 64, 3, 3}, tile)));

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

// With a weight memo (a model's shape sets share one), the transform of a
// weight is computed once: the same weights at another input size, even
// copied (a pass that rewrote them anew per plan), take the memo's tensor;
// other weights and the other tile get entries of their own.
BOOST_AUTO_TEST_CASE(a_weight_memo_transforms_each_weight_once) {
  auto memo = std::make_shared<passes::WeightMemo>();
  auto transformed = [&](const ConvCase& c, std::uint64_t weight_seed) {
    kiln::Builder b(c.name);
    auto x = b.input("x", DType::f32, {c.batch, c.in_channels, c.height, c.width});
    auto w = b.constant("w", random_tensor({c.out_channels, c.in_channels, 3, 3}, weight_seed));
    const kiln::graph::Graph g = kiln::internal::graph(b.build({b.conv2d(x, w, std::nullopt, {.padding = c.padding})}));
    const kiln::graph::Graph rewritten = passes::winograd(g, {.weight_memo = memo}).graph;
    for (const kiln::graph::Value& v : rewritten.values())
      if (v.name == "w.winograd") return *v.constant;
    BOOST_FAIL("no transformed weight");
    return kiln::Tensor();
  };
  ConvCase f2 = find_case("batch2_odd");
  const kiln::Tensor first = transformed(f2, 1);
  BOOST_TEST(memo->size() == 1u);
  ConvCase taller = f2;
  taller.height += 2;  // another extent, the same weights (a copy: another storage)
  const kiln::Tensor again = transformed(taller, 1);
  BOOST_TEST(memo->size() == 1u);
  BOOST_TEST((again.bytes().data() == first.bytes().data()));
  // Without the memo, the same transform: the memo only shares it.
  const kiln::graph::Graph plain = passes::winograd(kiln::internal::graph(conv_model(f2))).graph;
  const auto unshared = std::find_if(plain.values().begin(), plain.values().end(),
                                     [](const kiln::graph::Value& v) { return v.name == "w.winograd"; });
  BOOST_TEST_REQUIRE((unshared != plain.values().end()));
  BOOST_TEST(kiln::max_abs_diff(*unshared->constant, first) == 0.0f);
  transformed(f2, 7);  // other weights
  BOOST_TEST(memo->size() == 2u);
  transformed(find_case("f4_pad1_bias_relu"), 1);  // F(4x4), other channels
  BOOST_TEST(memo->size() == 3u);
}

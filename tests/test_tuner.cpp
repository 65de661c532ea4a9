// The autotuner's core: knob text both ways, tuning sites recorded by
// lowering, overrides, candidates filtered by capabilities, the choice rule,
// and tune_site on the Vulkan device with candidates made wrong, crashing or
// hanging through the worker's test hook (KILN_TUNE_FAULT).
#define BOOST_TEST_MODULE tuner
#include <boost/test/unit_test.hpp>

#include "backends/registry.h"
#include "graph/ir.h"
#include "graph/op_registry.h"
#include "graph/passes/passes.h"
#include "shaders/attention_template.h"
#include "shaders/conv_template.h"
#include "shaders/gemm_shared.h"
#include "shaders/heuristic.h"
#include "shaders/knobs.h"
#include "src/base/log.h"
#include "src/fuse/schedule.h"
#include "src/lower/lower.h"
#include "src/lower/target_policy.h"
#include "src/lower/workgroup_site.h"
#include "src/tune/candidates.h"
#include "src/tune/choice.h"
#include "src/tune/graph_site.h"
#include "src/tune/measure.h"
#include "src/tune/protocol.h"
#include "src/tune/search.h"
#include "src/tune/site.h"

#include <cmath>
#include <limits>
#include "src/tune/tuner.h"

#include <kiln/error.h>

#include "tensor_checks.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <set>
#include <cstdlib>
#include <string>
#include <vector>

namespace sh = kiln::shaders;
namespace tn = kiln::tune;
namespace kb = kiln::backend;
using kiln::DType;
using kiln::Error;
using kiln::ErrorKind;
using kiln::graph::Graph;
using kiln::graph::TensorType;
using kiln::lower::LowerTarget;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The InvalidArgument message `parse` throws for `text`.
template <class Parse>
std::string parse_error(Parse parse, const std::string& text) {
  try {
    parse(text);
  } catch (const Error& error) {
    BOOST_TEST((error.kind() == ErrorKind::InvalidArgument), text << ": " << error.what());
    return error.what();
  }
  BOOST_ERROR("'" << text << "' parsed");
  return "";
}

// Warnings logged while alive.
class WarningLog {
 public:
  WarningLog() {
    previous_ = kiln::base::set_log_sink([this](kiln::base::LogLevel level, const std::string& message) {
      if (level == kiln::base::LogLevel::warning) messages_.push_back(message);
    });
  }
  ~WarningLog() { kiln::base::set_log_sink(previous_); }
  const std::vector<std::string>& messages() const { return messages_; }

 private:
  kiln::base::LogSink previous_;
  std::vector<std::string> messages_;
};

// A graph of one MatMul [m, k] x [k, n].
Graph matmul_graph(std::int64_t m, std::int64_t n, std::int64_t k) {
  Graph g;
  const auto a = g.add_input("a", {DType::f32, {m, k}});
  const auto b = g.add_input("b", {DType::f32, {k, n}});
  g.set_outputs(g.add_node("MatMul", {a, b}, {}, "mm"));
  return g;
}

// A graph of one 3x3 convolution (padding 1) with a bias, then a Relu.
Graph conv_relu_graph() {
  Graph g;
  const auto x = g.add_input("x", {DType::f32, {1, 8, 10, 10}});
  const auto w = g.add_input("w", {DType::f32, {16, 8, 3, 3}});
  const auto bias = g.add_input("bias", {DType::f32, {16}});
  kiln::graph::Attributes attrs;
  attrs.set("pads", std::vector<std::int64_t>{1, 1, 1, 1});
  const auto y = g.add_node("Conv", {x, w, bias}, attrs, "conv");
  g.set_outputs(g.add_node("Relu", y, {}, "relu"));
  return g;
}

// A graph of one Attention over [2, lq, d] heads with a mask broadcast over the heads.
Graph attention_graph(std::int64_t lq, std::int64_t lk, std::int64_t d, std::int64_t dv) {
  Graph g;
  const auto q = g.add_input("q", {DType::f32, {2, lq, d}});
  const auto k = g.add_input("k", {DType::f32, {2, lk, d}});
  const auto v = g.add_input("v", {DType::f32, {2, lk, dv}});
  const auto mask = g.add_input("mask", {DType::f32, {lq, lk}});
  g.set_outputs(g.add_node("Attention", {q, k, v, mask}, {}, "attn"));
  return g;
}

tn::Site only_site(const Graph& g, const LowerTarget& target = {}) {
  const std::vector<tn::Site> sites = tn::sites_of(g, target);
  BOOST_TEST_REQUIRE(sites.size() == 1u);
  return sites.front();
}

kiln::kir::Kernel lower_first(const Graph& g, const LowerTarget& target) {
  const kiln::graph::Node& node = g.nodes().front();
  std::vector<TensorType> inputs, outputs;
  for (auto id : node.inputs) inputs.push_back(g.value(id).type);
  for (auto id : node.outputs) outputs.push_back(g.value(id).type);
  return *kiln::lower::lower_node(node, inputs, outputs, target).kernel;
}

LowerTarget with_override(LowerTarget target, const std::string& problem, const std::string& knobs) {
  target.knob_overrides = std::make_shared<kiln::lower::KnobOverrides>(kiln::lower::KnobOverrides{{problem, knobs}});
  return target;
}

// A GPU-like capability record with `shared_bytes` of shared memory.
kb::TargetDesc gpu_target(std::uint64_t shared_bytes, std::uint32_t invocations = 1024) {
  kb::TargetDesc t;
  t.backend = "null";
  t.device_name = "test gpu";
  t.device_type = "discrete-gpu";
  t.discrete_gpu = true;
  t.subgroup_size = 32;
  t.max_workgroup_size = {invocations, invocations, 64};
  t.max_workgroup_invocations = invocations;
  t.max_workgroup_count = {65535, 65535, 65535};
  t.max_shared_memory_bytes = shared_bytes;
  t.max_buffer_bytes = 1ull << 30;
  return t;
}

tn::CandidateResult measured(const std::string& knobs, double median, double spread = 0.01) {
  tn::CandidateResult r;
  r.knobs = knobs;
  r.status = tn::CandidateStatus::ok;
  r.median_ms = median;
  r.spread = spread;
  r.times_ms = {median};
  return r;
}

tn::CandidateResult failed(const std::string& knobs, tn::CandidateStatus status) {
  tn::CandidateResult r;
  r.knobs = knobs;
  r.status = status;
  return r;
}

// Sets KILN_TUNE_FAULT for the workers started while alive.
struct FaultInjection {
  explicit FaultInjection(const std::string& spec) { setenv(tn::kFaultVariable, spec.c_str(), 1); }
  ~FaultInjection() { unsetenv(tn::kFaultVariable); }
};

bool vulkan_available() { return !kb::get_backend("vulkan").unavailable_reason().has_value(); }

// The site's candidates on the first Vulkan device, in list order (the heuristic's first).
std::vector<std::string> vulkan_candidates(const tn::Site& site) {
  const kb::Backend& vulkan = kb::get_backend("vulkan");
  return tn::candidates(site, vulkan, vulkan.enumerate_devices().at(0).target).knobs;
}

// Small and quick: few repeats, a short time cap.
tn::TuneOptions quick_options() {
  tn::TuneOptions options;
  options.budget_s = 120;
  options.candidate_limit_s = 60;
  options.measure.min_repeats = 3;
  options.measure.max_repeats = 10;
  options.measure.time_cap_s = 0.2;
  options.measure.rotate_bytes = 1 << 20;
  return options;
}

// A graph with two 3x3 convolutions the Winograd ops compute (the first big
// enough for the rule, the second not), a 1x1 one they do not, a MatMul with
// a packable constant B and one whose N is not a multiple of 16.
Graph graph_choices_graph() {
  Graph g;
  const auto x = g.add_input("x", {DType::f32, {1, 64, 20, 20}});
  kiln::graph::Attributes pad1;
  pad1.set("pads", std::vector<std::int64_t>{1, 1, 1, 1});
  const auto big = g.add_node("Conv",
                              {x, g.add_constant("w_big", tensor_checks::random_tensor({64, 64, 3, 3}, 1)),
                               g.add_constant("b_big", tensor_checks::random_tensor({64}, 2))},
                              pad1, "conv_big")[0];
  const auto small =
      g.add_node("Conv", {big, g.add_constant("w_small", tensor_checks::random_tensor({8, 64, 3, 3}, 3))}, pad1,
                 "conv_small")[0];
  const auto pointwise =
      g.add_node("Conv", {small, g.add_constant("w_1x1", tensor_checks::random_tensor({16, 8, 1, 1}, 4))}, {},
                 "conv_1x1")[0];
  kiln::graph::Attributes to_rows;
  to_rows.set("shape", std::vector<std::int64_t>{80, 80});
  const auto rows = g.add_node("Reshape", {pointwise}, to_rows, "rows")[0];
  const auto packable =
      g.add_node("MatMul", {rows, g.add_constant("w_mm", tensor_checks::random_tensor({80, 32}, 5))}, {}, "mm")[0];
  g.set_outputs(
      g.add_node("MatMul", {packable, g.add_constant("w_odd", tensor_checks::random_tensor({32, 20}, 6))}, {}, "mm_odd"));
  return g;
}

std::vector<std::string> ops_of(const Graph& g) {
  std::vector<std::string> ops;
  for (const auto& node : g.nodes()) ops.push_back(node.op);
  return ops;
}

int count_op(const Graph& g, const std::string& op) {
  const std::vector<std::string> ops = ops_of(g);
  return static_cast<int>(std::count(ops.begin(), ops.end(), op));
}

}  // namespace

// ---- graph-level choices -------------------------------------------------------

BOOST_AUTO_TEST_CASE(the_passes_ask_the_chooser_for_each_qualifying_conv_and_matmul) {
  namespace passes = kiln::graph::passes;
  const Graph g = graph_choices_graph();
  const std::vector<kiln::Tensor> inputs = {tensor_checks::random_tensor({1, 64, 20, 20}, 7)};
  const kiln::Tensor want = kiln::graph::run_reference(g, inputs)[0];
  const kiln::Settings settings = kiln::Settings::resolve(kiln::Mode::default_, {}, [](const char*) -> const char* {
    return nullptr;
  });

  // Without a chooser: the rules (GPU-like device: Winograd for the big conv only, nothing packed).
  const passes::PipelineResult ruled = passes::run_compile_passes(g, {.cpu_device = false, .settings = settings});
  BOOST_TEST(count_op(ruled.graph, "WinogradInput") == 1);

  // A chooser that keeps everything plain: it is asked once per qualifying node, with the rule's choice.
  std::map<std::string, kiln::graph::passes::GraphChoice> asked;
  const passes::PipelineResult plain = passes::run_compile_passes(
      g, {.cpu_device = false, .settings = settings, .chooser = [&](const passes::GraphChoice& c) {
            BOOST_TEST(asked.count(c.node->name) == 0u, c.node->name << " asked twice");
            asked[c.node->name] = c;
            return std::string(c.pass == "winograd" ? "direct" : "plain");
          }});
  BOOST_TEST_REQUIRE(asked.size() == 3u);
  BOOST_TEST(asked.at("conv_big").pass == "winograd");
  BOOST_TEST(asked.at("conv_big").rule != "direct");
  BOOST_TEST((asked.at("conv_big").options == std::vector<std::string>{"direct", "f2", "f4"}));
  BOOST_TEST(asked.at("conv_small").rule == "direct");  // under the rule's thresholds, but offered
  BOOST_TEST(asked.at("mm").pass == "pack_matmul_weights");
  BOOST_TEST(asked.at("mm").rule == "plain");  // not a CPU device
  BOOST_TEST((asked.at("mm").options == std::vector<std::string>{"plain", "packed"}));
  BOOST_TEST(count_op(plain.graph, "WinogradInput") == 0);
  BOOST_TEST(count_op(plain.graph, "Conv") == 3);
  for (const auto& node : plain.graph.nodes())
    if (node.op == "MatMul") BOOST_TEST(!node.attrs.has("weight_layout"), node.name);
  BOOST_TEST(tensor_checks::relative_difference(kiln::graph::run_reference(plain.graph, inputs)[0], want) < 1e-5);

  // Against the rules: F(2x2) for the small conv, the packable MatMul packed on a GPU; "" keeps the rule.
  const passes::PipelineResult chosen = passes::run_compile_passes(
      g, {.cpu_device = false, .settings = settings, .chooser = [&](const passes::GraphChoice& c) {
            if (c.node->name == "conv_small") return std::string("f2");
            if (c.node->name == "mm") return std::string("packed");
            return std::string();
          }});
  BOOST_TEST(count_op(chosen.graph, "WinogradInput") == 2);
  int packed = 0;
  for (const auto& node : chosen.graph.nodes()) {
    if (node.op == "WinogradInput" && node.name == "conv_small.winograd_input")
      BOOST_TEST(node.attrs.get_int("output_tile", 0) == 2);
    if (node.op == "MatMul" && node.attrs.has("weight_layout")) {
      BOOST_TEST(node.name == "mm");
      ++packed;
    }
  }
  BOOST_TEST(packed == 1);
  BOOST_TEST(tensor_checks::relative_difference(kiln::graph::run_reference(chosen.graph, inputs)[0], want) < 1e-4);
  bool reported = false;
  for (const passes::PassReport& report : chosen.reports)
    for (const std::string& line : report.details) reported |= contains(line, "by the chooser");
  BOOST_TEST(reported);

  // On a CPU device the rule packs; a chooser answering "plain" keeps B as it is.
  std::string cpu_rule;
  const passes::PipelineResult cpu_plain = passes::run_compile_passes(
      g, {.cpu_device = true, .settings = settings, .chooser = [&](const passes::GraphChoice& c) {
            if (c.pass == "pack_matmul_weights") cpu_rule = c.rule;
            return std::string(c.pass == "pack_matmul_weights" ? "plain" : "");
          }});
  BOOST_TEST(cpu_rule == "packed");
  for (const auto& node : cpu_plain.graph.nodes())
    if (node.op == "MatMul") BOOST_TEST(!node.attrs.has("weight_layout"), node.name);
  const passes::PipelineResult cpu_ruled = passes::run_compile_passes(g, {.cpu_device = true, .settings = settings});
  int cpu_packed = 0;
  for (const auto& node : cpu_ruled.graph.nodes()) cpu_packed += node.op == "MatMul" && node.attrs.has("weight_layout");
  BOOST_TEST(cpu_packed == 1);

  // An answer outside the options keeps the rule; with winograd off nothing is asked about Convs.
  const passes::PipelineResult odd = passes::run_compile_passes(
      g, {.cpu_device = false, .settings = settings, .chooser = [](const passes::GraphChoice&) { return std::string("f9"); }});
  BOOST_TEST((ops_of(odd.graph) == ops_of(ruled.graph)));
  int winograd_asked = 0;
  passes::run_compile_passes(g, {.cpu_device = false, .settings = settings.with("winograd", "off"),
                                 .chooser = [&](const passes::GraphChoice& c) {
                                   winograd_asked += c.pass == "winograd";
                                   return c.rule;
                                 }});
  BOOST_TEST(winograd_asked == 0);
}

// The graph-level sites of graph_choices_graph() on a GPU-like device, by node name.
std::map<std::string, tn::Site> graph_sites_by_node() {
  namespace passes = kiln::graph::passes;
  std::map<std::string, tn::Site> sites;
  const kiln::Settings settings = kiln::Settings::resolve(kiln::Mode::default_, {}, [](const char*) -> const char* {
    return nullptr;
  });
  passes::run_compile_passes(graph_choices_graph(),
                             {.cpu_device = false, .settings = settings, .chooser = [&](const passes::GraphChoice& c) {
                                if (auto site = tn::graph_site_of(c)) sites.emplace(c.node->name, *site);
                                return c.rule;
                              }});
  return sites;
}

BOOST_AUTO_TEST_CASE(graph_choice_sites_name_their_options_and_rebuild_their_node) {
  const std::map<std::string, tn::Site> sites = graph_sites_by_node();
  BOOST_TEST_REQUIRE(sites.size() == 3u);
  const tn::Site& small = sites.at("conv_small");
  BOOST_TEST(tn::is_graph_site(small));
  BOOST_TEST(!tn::is_graph_site(only_site(matmul_graph(8, 8, 8))));
  BOOST_TEST(small.id.template_name == "winograd");
  BOOST_TEST(small.id.knobs == "direct");
  BOOST_TEST(contains(small.id.problem, "conv batch=1 in=64x20x20 out=8x20x20"), small.id.problem);
  BOOST_TEST(contains(small.id.problem, " choices=direct|f2|f4"), small.id.problem);
  const tn::Site& big = sites.at("conv_big");
  BOOST_TEST((tn::graph_site_candidates(big) == std::vector<std::string>{big.id.knobs, "direct",
                                                                         big.id.knobs == "f4" ? "f2" : "f4"}));
  const tn::Site& mm = sites.at("mm");
  BOOST_TEST(mm.id.template_name == "pack_matmul_weights");
  BOOST_TEST(mm.id.problem == "gemm batch=1 m=80 n=32 k=80 a=row b=row choices=plain|packed");
  BOOST_TEST((tn::graph_site_candidates(mm) == std::vector<std::string>{"plain", "packed"}));
  // Through the worker protocol and back.
  const tn::Site again = tn::site_from_json(tn::to_json(small));
  BOOST_TEST((again.id == small.id));
  BOOST_TEST((tn::graph_site_candidates(again) == tn::graph_site_candidates(small)));
  // The node alone: a graph input, then made-up constants of the weight's type.
  const Graph alone = tn::graph_site_graph(small, 1);
  BOOST_TEST_REQUIRE(alone.nodes().size() == 1u);
  BOOST_TEST(alone.inputs().size() == 1u);
  BOOST_TEST(alone.nodes()[0].name == "conv_small");
  BOOST_TEST(alone.value(alone.nodes()[0].inputs[1]).constant.has_value());
  BOOST_TEST((alone.value(alone.outputs()[0]).type == small.outputs[0]));
}

BOOST_AUTO_TEST_CASE(a_graph_choice_site_tunes_verifies_and_rejects_a_wrong_option) {
  BOOST_TEST_REQUIRE(vulkan_available());
  const std::map<std::string, tn::Site> sites = graph_sites_by_node();
  const tn::Site& small = sites.at("conv_small");
  FaultInjection fault("wrong=f4;crash=packed");
  const tn::Record record = tn::tune_site(small, {"vulkan", 0}, quick_options());
  BOOST_TEST(record.key.template_name == "winograd");
  BOOST_TEST(record.key.template_version == tn::kGraphChoiceVersion);
  BOOST_TEST(record.key.kernel == small.id.problem);
  BOOST_TEST(record.heuristic_knobs == "direct");
  BOOST_TEST_REQUIRE(record.candidates.size() == 3u);
  BOOST_TEST(record.candidates[0].knobs == "direct");
  BOOST_TEST((record.candidates[0].status == tn::CandidateStatus::ok), record.candidates[0].detail);
  BOOST_TEST(record.candidates[1].knobs == "f2");
  BOOST_TEST((record.candidates[1].status == tn::CandidateStatus::ok), record.candidates[1].detail);
  BOOST_TEST(record.candidates[2].knobs == "f4");
  BOOST_TEST((record.candidates[2].status == tn::CandidateStatus::wrong_result), record.candidates[2].detail);
  BOOST_TEST(contains(record.candidates[2].detail, "expected"), record.candidates[2].detail);
  BOOST_TEST(record.winner_knobs != "f4");
  for (std::size_t i = 0; i < 2; ++i) BOOST_TEST(record.candidates[i].median_ms > 0);
  BOOST_TEST(record.heuristic_ms > 0);

  // Packed or plain: a worker that dies measuring "packed" costs that candidate only.
  const tn::Record packing = tn::tune_site(sites.at("mm"), {"vulkan", 0}, quick_options());
  BOOST_TEST_REQUIRE(packing.candidates.size() == 2u);
  BOOST_TEST(packing.candidates[0].knobs == "plain");
  BOOST_TEST((packing.candidates[0].status == tn::CandidateStatus::ok), packing.candidates[0].detail);
  BOOST_TEST((packing.candidates[1].status == tn::CandidateStatus::crashed), packing.candidates[1].detail);
  BOOST_TEST(packing.winner_knobs == "plain");
}

// ---- knob text ---------------------------------------------------------------

BOOST_AUTO_TEST_CASE(a_candidates_error_is_judged_against_its_outputs_scale) {
  using kiln::tune::output_error;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  // 0.001 off an element of 0.08 in an output whose largest element is 4: 0.00025 of its scale.
  const std::vector<double> want = {0.08, -4.0, 1.5};
  const std::vector<float> close = {0.081f, -4.0f, 1.5f};
  BOOST_TEST(output_error(close, want).error == 0.001 / 4.0, boost::test_tools::tolerance(1e-4));
  BOOST_TEST(output_error(close, want).at == 0u);
  // Below a scale of 1 the error is absolute; the worst element is named.
  const std::vector<double> small = {0.1, 0.2};
  const std::vector<float> off = {0.1f, 0.205f};
  BOOST_TEST(output_error(off, small).error == 0.005, boost::test_tools::tolerance(1e-4));
  BOOST_TEST(output_error(off, small).at == 1u);
  // A NaN where the reference has a number is the worst error; the same NaN or infinity is right.
  const std::vector<float> with_nan = {0.08f, std::numeric_limits<float>::quiet_NaN(), 1.5f};
  BOOST_TEST(std::isnan(output_error(with_nan, want).error));
  BOOST_TEST(output_error(with_nan, want).at == 1u);
  const std::vector<double> domain = {nan, inf, 2.0};
  const std::vector<float> same = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), 2.0f};
  BOOST_TEST(output_error(same, domain).error == 0.0);
}

BOOST_AUTO_TEST_CASE(gemm_and_conv_knob_text_round_trips) {
  const LowerTarget lavapipe{"vulkan", 8, 1024, 32768, kiln::lower::DeviceClass::emulated_gpu};
  std::vector<sh::GemmKnobs> gemms = sh::gemm_knob_space(LowerTarget{});
  for (const sh::GemmKnobs& k : sh::gemm_knob_space(lavapipe)) gemms.push_back(k);
  sh::GemmKnobs odd;  // every field away from its default
  odd.tile_m = 16, odd.tile_n = 3, odd.k_unroll = 7, odd.workgroup_size = 512, odd.panel_width = 64;
  odd.vector_width = 1, odd.shared_k_tile = 32, odd.split_k = 4, odd.workgroup_n = 2;
  gemms.push_back(odd);
  for (const sh::GemmKnobs& knobs : gemms) {
    const std::string text = sh::to_string(knobs);
    BOOST_TEST((sh::parse_gemm_knobs(text) == knobs), text);
  }
  BOOST_TEST(sh::to_string(odd) == "16x3_k7_p64_wg512_v1_s32_sk4_wn2");
  for (const LowerTarget& target : {LowerTarget{}, lavapipe})
    for (const sh::ConvPlan& plan : sh::conv_plan_space(target)) {
      const std::string text = sh::to_string(plan);
      BOOST_TEST((sh::parse_conv_plan(text) == plan), text);
    }
  BOOST_TEST(sh::to_string(sh::ConvPlan{sh::ConvAlgorithm::direct, {}, {8, 4, 64}}) == "direct:c8_w4_wg64");
  for (std::uint32_t rows : {1u, 4u, 8u})
    for (std::uint32_t columns : {1u, 12u, 128u}) {
      sh::AttentionKnobs knobs;
      knobs.rows = rows, knobs.columns = columns, knobs.key_block = 16, knobs.vector_width = 1;
      BOOST_TEST((sh::parse_attention_knobs(sh::to_string(knobs)) == knobs), sh::to_string(knobs));
    }
}

BOOST_AUTO_TEST_CASE(malformed_knob_text_names_the_field) {
  auto gemm = [](const std::string& t) { return sh::parse_gemm_knobs(t); };
  auto plan = [](const std::string& t) { return sh::parse_conv_plan(t); };
  BOOST_TEST(contains(parse_error(gemm, "8x8_k4_p8_wg64"), "vector_width"));
  BOOST_TEST(contains(parse_error(gemm, "8x8_k4_p8_wg64_v4_q3"), "unknown field 'q3'"));
  BOOST_TEST(contains(parse_error(gemm, "8x8_k9_p8_wg64_v4"), "k_unroll"));
  BOOST_TEST(contains(parse_error(gemm, "8x8_k4_k4_p8_wg64_v4"), "k_unroll is given twice"));
  BOOST_TEST(contains(parse_error(gemm, "8y8_k4_p8_wg64_v4"), "tile_m x tile_n"));
  BOOST_TEST(contains(parse_error(gemm, "8x8_k_p8_wg64_v4"), "k_unroll"));
  BOOST_TEST(contains(parse_error(gemm, "8x8_k4_p8_wg64_v3"), "vector_width"));
  BOOST_TEST(contains(parse_error(gemm, "4x4_k1_p1_wg256_v4_s16_sk3"), "split_k"));
  BOOST_TEST(contains(parse_error(gemm, ""), "tile_m x tile_n"));
  BOOST_TEST(contains(parse_error(plan, "winograd:c8_w8_wg64"), "winograd"));
  BOOST_TEST(contains(parse_error(plan, "c8_w8_wg64"), "algorithm:knobs"));
  BOOST_TEST(contains(parse_error(plan, "direct:c8_w8"), "workgroup_size"));
  BOOST_TEST(contains(parse_error(plan, "implicit_gemm:c8_w8_wg64"), "tile_m x tile_n"));
  auto attention = [](const std::string& t) { return sh::parse_attention_knobs(t); };
  BOOST_TEST(contains(parse_error(attention, "r2c64k4"), "vector_width"));
  BOOST_TEST(contains(parse_error(attention, "r2c64k4v4x1"), "unknown field 'x1'"));
  BOOST_TEST(contains(parse_error(attention, "r0c64k4v4"), "rows"));
  BOOST_TEST(contains(parse_error(attention, "r2c256k4v4"), "range"));
}

// ---- sites and overrides -----------------------------------------------------

BOOST_AUTO_TEST_CASE(lowering_records_the_site_and_fusion_keeps_it) {
  const Graph g = matmul_graph(40, 24, 36);
  const kiln::kir::Kernel kernel = lower_first(g, LowerTarget{});
  BOOST_TEST_REQUIRE(kernel.tuning_site.has_value());
  BOOST_TEST(kernel.tuning_site->template_name == "gemm");
  BOOST_TEST(kernel.tuning_site->template_version == sh::kGemmTemplateVersion);
  BOOST_TEST(kernel.tuning_site->problem == "gemm batch=1 m=40 n=24 k=36 a=row b=row");
  BOOST_TEST(kernel.tuning_site->knobs == sh::to_string(sh::choose_gemm_knobs(1, 40, 24, 36, LowerTarget{})));
  BOOST_TEST(!kernel.tuning_site->overridden);

  // Compiled mode fuses the Relu into the convolution: the fused kernel keeps the site.
  kiln::fuse::PlanOptions options;
  options.fuse = true;
  const kiln::fuse::KernelPlan plan = kiln::fuse::plan_kernels(conv_relu_graph(), options);
  BOOST_TEST_REQUIRE(plan.steps.size() == 1u);
  const auto& fused = plan.steps.front().kernel->kernel;
  BOOST_TEST_REQUIRE(fused.tuning_site.has_value());
  BOOST_TEST(fused.tuning_site->template_name == "conv");
  BOOST_TEST(contains(fused.tuning_site->problem, "kernel=3x3"));

  // One site per distinct problem; the Relu has none.
  Graph twice = matmul_graph(40, 24, 36);
  const auto a = twice.add_input("a2", {DType::f32, {40, 36}});
  const auto b = twice.add_input("b2", {DType::f32, {36, 24}});
  twice.add_node("MatMul", {a, b}, {}, "mm2");
  BOOST_TEST(tn::sites_of(twice, LowerTarget{}).size() == 1u);
  BOOST_TEST(tn::sites_of(conv_relu_graph(), LowerTarget{}).size() == 1u);
}

BOOST_AUTO_TEST_CASE(an_override_changes_the_kernel_and_an_invalid_one_is_ignored) {
  const Graph g = matmul_graph(40, 24, 36);
  const std::string problem = "gemm batch=1 m=40 n=24 k=36 a=row b=row";
  const kiln::kir::Kernel plain = lower_first(g, LowerTarget{});
  const std::string chosen = "2x4_k1_p2_wg32_v1";
  BOOST_TEST_REQUIRE(plain.tuning_site->knobs != chosen);
  {
    WarningLog log;
    const kiln::kir::Kernel tuned = lower_first(g, with_override({}, problem, chosen));
    BOOST_TEST(tuned.tuning_site->knobs == chosen);
    BOOST_TEST(tuned.tuning_site->overridden);
    BOOST_TEST(tuned.name == "matmul_" + chosen);
    BOOST_TEST(tuned.workgroup_size == 32u);
    BOOST_TEST(log.messages().empty());
  }
  // An override for another problem leaves this one alone.
  BOOST_TEST(lower_first(g, with_override({}, "gemm batch=1 m=1 n=1 k=1 a=row b=row", chosen)).name == plain.name);
  for (const std::string& bad : {std::string("garbage"), std::string("8x8_k4_p8_wg2048_v4"),
                                 std::string("4x4_k1_p1_wg256_v4_s16")}) {
    WarningLog log;
    LowerTarget small{"vulkan", 32, 1024, 4096};  // 4 KiB of shared memory: the shared tiling needs more
    const kiln::kir::Kernel kernel = lower_first(g, with_override(small, problem, bad));
    BOOST_TEST(!kernel.tuning_site->overridden, bad);
    BOOST_TEST(kernel.tuning_site->knobs == lower_first(g, small).tuning_site->knobs, bad);
    BOOST_TEST_REQUIRE(log.messages().size() == 1u, bad);
    BOOST_TEST(contains(log.messages().front(), "'" + bad + "'"), log.messages().front());
    BOOST_TEST(contains(log.messages().front(), "ignored"), log.messages().front());
  }
  // Matrix units: an f32 node never takes them (its operands would be
  // rounded), nor a target without the instruction.
  for (const std::string& bad : {std::string("2x4_k1_p1_wg128_v4_s32_mma16x8x16f16l32"),
                                 std::string("2x4_k1_p1_wg128_v4_s32_mma16x8x8tf32l32")}) {
    WarningLog log;
    LowerTarget tensor_cores{"cuda", 32, 1024, 49152};
    tensor_cores.matrix_units = {{"tf32", 16, 8, 8, 32}, {"f16", 16, 8, 16, 32}};
    const kiln::kir::Kernel kernel = lower_first(g, with_override(tensor_cores, problem, bad));
    BOOST_TEST(!kernel.tuning_site->overridden, bad);
    BOOST_TEST(kernel.fragments.empty(), bad);
    BOOST_TEST_REQUIRE(log.messages().size() == 1u, bad);
    BOOST_TEST(contains(log.messages().front(), "matrix units with"), log.messages().front());
  }
  // Convolutions: another algorithm that applies, and one that does not (gemm_1x1 on a 3x3 window).
  const Graph conv = conv_relu_graph();
  const tn::Site site = only_site(conv);
  const kiln::kir::Kernel implicit = lower_first(conv, with_override({}, site.id.problem, "implicit_gemm:4x4_k4_p8_wg64_v4"));
  BOOST_TEST(implicit.tuning_site->overridden);
  BOOST_TEST(contains(implicit.name, "conv2d_implicit_gemm_4x4"));
  WarningLog log;
  const kiln::kir::Kernel refused = lower_first(conv, with_override({}, site.id.problem, "gemm_1x1:4x4_k4_p8_wg64_v4"));
  BOOST_TEST(!refused.tuning_site->overridden);
  BOOST_TEST(refused.tuning_site->knobs == site.id.knobs);
  BOOST_TEST(log.messages().size() == 1u);
}

// A shape set's pinned knobs: taken where they fit, dropped without a
// warning where they do not (the user set none), and a user's override wins.
BOOST_AUTO_TEST_CASE(pinned_knobs_apply_quietly_and_yield_to_overrides) {
  const Graph g = matmul_graph(40, 24, 36);
  const std::string problem = "gemm batch=1 m=40 n=24 k=36 a=row b=row";
  const auto pinned = [&](LowerTarget target, const std::string& knobs) {
    target.knob_pins = std::make_shared<kiln::lower::KnobOverrides>(kiln::lower::KnobOverrides{{problem, knobs}});
    return target;
  };
  const std::string pin = "2x4_k1_p2_wg32_v1";
  const std::string user = "4x4_k1_p1_wg64_v4";
  WarningLog log;
  BOOST_TEST(lower_first(g, pinned({}, pin)).tuning_site->knobs == pin);
  BOOST_TEST(lower_first(g, pinned(with_override({}, problem, user), pin)).tuning_site->knobs == user);
  LowerTarget small{"vulkan", 32, 1024, 4096};
  const kiln::kir::Kernel dropped = lower_first(g, pinned(small, "4x4_k1_p1_wg256_v4_s16"));
  BOOST_TEST(dropped.tuning_site->knobs == lower_first(g, small).tuning_site->knobs);
  BOOST_TEST(log.messages().empty());
}

BOOST_AUTO_TEST_CASE(attention_records_its_site_and_takes_overrides) {
  const Graph g = attention_graph(10, 12, 8, 8);
  const tn::Site site = only_site(g);
  BOOST_TEST(site.id.template_name == "attention");
  BOOST_TEST(site.id.template_version == sh::kAttentionTemplateVersion);
  BOOST_TEST(site.id.problem == "attention heads=2 lq=10 lk=12 d=8 dv=8 k=k mask=s12.1");
  BOOST_TEST(site.id.knobs == lower_first(g, {}).tuning_site->knobs);
  const std::string chosen = site.id.knobs == "r1c8k2v1" ? "r2c8k2v1" : "r1c8k2v1";
  const kiln::kir::Kernel tuned = lower_first(g, with_override({}, site.id.problem, chosen));
  BOOST_TEST(tuned.tuning_site->overridden);
  BOOST_TEST(tuned.name == "attention_" + chosen);
  WarningLog log;
  BOOST_TEST(!lower_first(g, with_override({}, site.id.problem, "r2c8")).tuning_site->overridden);
  BOOST_TEST(log.messages().size() == 1u);
}

BOOST_AUTO_TEST_CASE(site_json_round_trips) {
  const tn::Site site = only_site(conv_relu_graph());
  const tn::Site back = tn::site_from_json(tn::to_json(site));
  BOOST_TEST((back.id == site.id));
  BOOST_TEST(back.node.op == "Conv");
  BOOST_TEST((back.node.attrs == site.node.attrs));
  BOOST_TEST((back.inputs == site.inputs));
  BOOST_TEST((back.outputs == site.outputs));
  BOOST_TEST(tn::to_json(back) == tn::to_json(site));
  BOOST_CHECK_THROW(tn::site_from_json("{\"template\": 3}"), Error);
}

// ---- candidates ----------------------------------------------------------------

BOOST_AUTO_TEST_CASE(swapped_operands_are_offered_only_where_y_has_more_rows_than_columns) {
  // A CPU device with subgroups of 8 that broadcast and texel buffers, as lavapipe.
  kb::TargetDesc cpu = gpu_target(65536);
  cpu.device_type = "cpu";
  cpu.cpu_cores = true;
  cpu.subgroup_size = 8;
  cpu.subgroup_basic = cpu.subgroup_broadcast = true;
  cpu.texel_r32f = cpu.texel_rgba32f = true;
  cpu.max_texel_buffer_elements = 1u << 27;
  const kb::Backend& null = kb::get_backend("null");
  auto swapped = [](const tn::CandidateList& list) {
    return std::count_if(list.knobs.begin(), list.knobs.end(),
                         [](const std::string& k) { return sh::parse_gemm_knobs(k).swap_operands; });
  };
  const tn::CandidateList tall = tn::candidates(only_site(matmul_graph(512, 48, 64)), null, cpu);
  BOOST_TEST(swapped(tall) >= 2);
  const tn::CandidateList wide = tn::candidates(only_site(matmul_graph(48, 512, 64)), null, cpu);
  BOOST_TEST_REQUIRE(!wide.knobs.empty());
  BOOST_TEST(swapped(wide) == 0);
  BOOST_TEST(std::any_of(wide.filtered.begin(), wide.filtered.end(),
                         [](const auto& f) { return contains(f.second, "no more rows than columns"); }));
}

// A node's matrix instructions are part of its knob space: an f32 MatMul
// whose products may be TF32 (the precision settings' attribute) is offered
// TF32 knobs, its problem says so, and without the attribute none; a 16-bit
// node is offered its own type's.
BOOST_AUTO_TEST_CASE(matrix_knobs_are_candidates_where_the_node_may_use_them) {
  kb::TargetDesc tensor_cores = gpu_target(49152);
  tensor_cores.matrix_shapes = {{"tf32", 16, 8, 8, 32}, {"f16", 16, 8, 16, 32}, {"bf16", 16, 8, 16, 32}};
  tensor_cores.subgroup_basic = true;  // the fragments' lanes are a subgroup's
  const kb::Backend& null = kb::get_backend("null");
  auto offered = [](const tn::CandidateList& list, const std::string& instruction) {
    return std::count_if(list.knobs.begin(), list.knobs.end(),
                         [&](const std::string& k) { return contains(k, instruction); });
  };
  Graph tf32;
  {
    const auto a = tf32.add_input("a", {DType::f32, {256, 128}});
    const auto b = tf32.add_input("b", {DType::f32, {128, 256}});
    kiln::graph::Attributes attrs;
    attrs.set("f32_products", std::string("tf32"));
    tf32.set_outputs(tf32.add_node("MatMul", {a, b}, attrs, "mm"));
  }
  const tn::Site site = only_site(tf32, kiln::lower::target_policy(tensor_cores).lower);
  BOOST_TEST(contains(site.id.problem, " products=tf32"), site.id.problem);
  const tn::CandidateList with = tn::candidates(site, null, tensor_cores);
  BOOST_TEST_REQUIRE(!with.knobs.empty());
  BOOST_TEST(contains(with.knobs.front(), "mma16x8x8tf32l32"), with.knobs.front());  // the heuristic's
  BOOST_TEST(offered(with, "tf32") >= 1);
  BOOST_TEST(offered(with, "mma16x8x16") == 0);

  const tn::CandidateList without = tn::candidates(only_site(matmul_graph(256, 256, 128)), null, tensor_cores);
  BOOST_TEST(offered(without, "mma") == 0);
  // A 1x1 convolution: both GEMM algorithms apply, each offered on TF32.
  Graph pointwise;
  {
    const auto x = pointwise.add_input("x", {DType::f32, {1, 64, 16, 16}});
    const auto w = pointwise.add_input("w", {DType::f32, {64, 64, 1, 1}});
    kiln::graph::Attributes attrs;
    attrs.set("f32_products", std::string("tf32"));
    pointwise.set_outputs(pointwise.add_node("Conv", {x, w}, attrs, "conv"));
  }
  const tn::CandidateList convs = tn::candidates(only_site(pointwise), null, tensor_cores);
  BOOST_TEST(offered(convs, "gemm_1x1:2x4_k1_p1_wg128_v4_s32_mma16x8x8tf32l32") == 1);
  BOOST_TEST(offered(convs, "implicit_gemm:2x4_k1_p1_wg128_v4_s32_mma16x8x8tf32l32") == 1);

  Graph half;
  {
    const auto a = half.add_input("a", {DType::f16, {256, 128}});
    const auto b = half.add_input("b", {DType::f16, {128, 256}});
    half.set_outputs(half.add_node("MatMul", {a, b}, {}, "mm"));
  }
  const tn::CandidateList sixteen = tn::candidates(only_site(half), null, tensor_cores);
  BOOST_TEST(offered(sixteen, "mma16x8x16f16l32") >= 1);
  BOOST_TEST(offered(sixteen, "tf32") == 0);
}

BOOST_AUTO_TEST_CASE(candidates_are_filtered_by_the_capability_record) {
  const tn::Site site = only_site(matmul_graph(256, 256, 512));
  const kb::Backend& null = kb::get_backend("null");
  auto needs_shared = [](const std::string& knobs) { return sh::parse_gemm_knobs(knobs).shared_k_tile != 0; };

  const tn::CandidateList roomy = tn::candidates(site, null, gpu_target(65536));
  int shared = 0;
  for (const std::string& knobs : roomy.knobs) shared += needs_shared(knobs) ? 1 : 0;
  BOOST_TEST(shared > 0);

  const kb::TargetDesc small = gpu_target(4096);
  const tn::CandidateList list = tn::candidates(site, null, small);
  BOOST_TEST_REQUIRE(!list.knobs.empty());
  for (const std::string& knobs : list.knobs) {
    const sh::GemmKnobs k = sh::parse_gemm_knobs(knobs);
    BOOST_TEST((k.shared_k_tile == 0 || sh::detail::shared_gemm_bytes(k) <= 4096u), knobs);
  }
  BOOST_TEST(!list.filtered.empty());
  for (const auto& [knobs, why] : list.filtered) BOOST_TEST(contains(why, "shared memory"), knobs << ": " << why);
  // The heuristic's choice comes first, then one head of each other family
  // (search.h), then its neighbours (one field away).
  BOOST_TEST(list.knobs.front() == sh::to_string(sh::choose_gemm_knobs(1, 256, 256, 512, kiln::lower::target_policy(small).lower)));
  std::set<std::string> families = {tn::knob_family(roomy.knobs[0])};
  std::size_t first_neighbour = 1;
  // (A head may be one field from the first: double-buffered or not.)
  while (first_neighbour < roomy.knobs.size() && families.insert(tn::knob_family(roomy.knobs[first_neighbour])).second)
    ++first_neighbour;
  BOOST_TEST(families.size() > 2u);  // the shared tilings' families and the register path
  BOOST_TEST_REQUIRE(first_neighbour < roomy.knobs.size());
  for (std::size_t i = first_neighbour + 1; i < roomy.knobs.size(); ++i)
    BOOST_TEST(families.count(tn::knob_family(roomy.knobs[i])) == 1u, roomy.knobs[i]);
  BOOST_TEST(tn::knob_family("8x16_k1_p1_wg64_v4_sg8_tex") == "k m n p sg tex v wg");
  BOOST_TEST(tn::knob_family("direct:c8_w8_wg64") == "algorithm=direct c w wg");
  BOOST_TEST(tn::knob_distance("8x8_k4_p8_wg64_v4", "8x4_k4_p8_wg64_v4") == 1);
  BOOST_TEST(tn::knob_distance("direct:c8_w8_wg64", "depthwise:c1_w8_wg64") == 2);

  // A CPU device gets no shared-memory tiling, and the filtered list says why.
  kb::TargetDesc cpu = gpu_target(65536);
  cpu.device_type = "cpu";
  cpu.cpu_cores = true;
  const tn::CandidateList on_cpu = tn::candidates(site, null, cpu);
  BOOST_TEST_REQUIRE(!on_cpu.knobs.empty());
  for (const std::string& knobs : on_cpu.knobs) BOOST_TEST(!needs_shared(knobs), knobs);
  BOOST_TEST(std::any_of(on_cpu.filtered.begin(), on_cpu.filtered.end(),
                         [](const auto& f) { return contains(f.second, "CPU device"); }));

  // Few invocations per workgroup: nothing larger.
  for (const std::string& knobs : tn::candidates(site, null, gpu_target(65536, 32)).knobs)
    BOOST_TEST(sh::parse_gemm_knobs(knobs).workgroup_size <= 32u, knobs);

  // The same order every time; another seed shuffles the rest.
  BOOST_TEST((tn::candidates(site, null, small).knobs == list.knobs));
  const std::vector<std::string> reseeded = tn::candidates(site, null, small, 7).knobs;
  BOOST_TEST(reseeded.front() == list.knobs.front());
  BOOST_TEST((reseeded != list.knobs));

  // A tensor larger than the target's buffers: no candidate at all, and the error says why.
  kb::TargetDesc tiny_buffers = small;
  tiny_buffers.max_buffer_bytes = 1024;
  try {
    tn::candidates(site, null, tiny_buffers);
    BOOST_ERROR("a 256 KiB operand fit 1 KiB buffers");
  } catch (const Error& error) {
    BOOST_TEST((error.kind() == ErrorKind::Unsupported));
    BOOST_TEST(contains(error.what(), "binds at most 1024"), error.what());
  }

  // Convolutions: only algorithms that apply (no gemm_1x1 for a 3x3 window).
  const tn::CandidateList conv = tn::candidates(only_site(conv_relu_graph()), null, small);
  BOOST_TEST_REQUIRE(!conv.knobs.empty());
  for (const std::string& plan : conv.knobs) BOOST_TEST(!contains(plan, "gemm_1x1"), plan);
}

// ---- the choice ---------------------------------------------------------------

BOOST_AUTO_TEST_CASE(the_choice_rule_is_deterministic_and_keeps_ties_with_the_heuristic) {
  using tn::choose;
  // Faster, but within the noise floor (2%): the heuristic's stays.
  std::vector<tn::CandidateResult> r = {measured("h", 1.00), measured("a", 0.99)};
  BOOST_TEST(choose(r).index == 0u);
  // Faster by more than the floor and the spreads: the candidate wins.
  r = {measured("h", 1.00), measured("a", 0.90)};
  BOOST_TEST(choose(r).index == 1u);
  // ... unless a spread says the difference is noise.
  r = {measured("h", 1.00, 0.15), measured("a", 0.90)};
  BOOST_TEST(choose(r).index == 0u);
  // Two candidates tie within the noise: the first in search order wins, whichever measured faster.
  r = {measured("h", 1.00), measured("a", 0.505), measured("b", 0.500)};
  BOOST_TEST(choose(r).index == 1u);
  r = {measured("h", 1.00), measured("a", 0.500), measured("b", 0.505)};
  BOOST_TEST(choose(r).index == 1u);
  // A tie group's first member must itself beat the heuristic beyond the noise.
  r = {measured("h", 1.030), measured("a", 1.015), measured("b", 1.000)};
  BOOST_TEST(choose(r).index == 0u);
  // A candidate that scatters widely does not tie with a clear best by its own
  // scatter (and then lose to the heuristic in the best's stead).
  r = {measured("h", 74.0, 0.03), measured("a", 66.0, 0.30), measured("b", 56.6, 0.02)};
  BOOST_TEST(choose(r).index == 2u);
  // Failed candidates are never chosen, however fast they claim to be.
  r = {measured("h", 1.0), failed("wrong", tn::CandidateStatus::wrong_result), measured("c", 0.5)};
  r[1].median_ms = 0.01;
  BOOST_TEST(choose(r).index == 2u);
  // A heuristic that failed loses to anything ok; with nothing ok it stays.
  r = {failed("h", tn::CandidateStatus::crashed), measured("a", 2.0), measured("b", 1.0)};
  BOOST_TEST(choose(r).index == 2u);
  r = {failed("h", tn::CandidateStatus::timed_out), failed("a", tn::CandidateStatus::not_measured)};
  BOOST_TEST(choose(r).index == 0u);
  // The same timings choose the same, every time.
  r = {measured("h", 1.0, 0.05), measured("a", 0.7, 0.03), measured("b", 0.69, 0.2), measured("c", 0.71)};
  const std::size_t first = choose(r).index;
  for (int i = 0; i < 10; ++i) BOOST_TEST(choose(r).index == first);
  BOOST_TEST(first == 1u);
}

BOOST_AUTO_TEST_CASE(the_search_tries_every_family_then_climbs_and_explores_near_the_best) {
  // [0] the heuristic; [1] two new values, two fields away; [2] and [3] its
  // neighbours; [4] a neighbour of [2] and [3]; [5] another family (sg).
  const std::vector<std::string> knobs = {"4x4_k4_v4", "4x4_k8_v1", "4x8_k4_v4",
                                          "8x4_k4_v4", "8x8_k4_v4", "16x16_k16_v2_sg8"};
  const std::map<std::size_t, std::optional<double>> timings = {
      {0, 1.0}, {1, std::nullopt}, {2, 1.2}, {3, 0.8}, {4, 0.9}, {5, 1.1}};
  // The heuristic; the other family ([5]); climbing: the best's (still the
  // heuristic's) first unmeasured neighbour ([2]); exploring: a new value
  // nearest to the best ([3], one field away, before [1] with two new values
  // two fields away); climbing: [4], the neighbour of [3], now the best;
  // what is left ([1], which fails: a failure never becomes the best).
  const std::vector<std::size_t> path = {0, 5, 2, 3, 4, 1};
  for (int run = 0; run < 2; ++run) {  // the same timings give the same path
    tn::CandidateSearch search(knobs);
    for (std::size_t expected : path) {
      const std::optional<std::size_t> next = search.next();
      BOOST_TEST_REQUIRE(next.has_value());
      BOOST_TEST(*next == expected);
      search.measured(*next, timings.at(*next));
    }
    BOOST_TEST(!search.next().has_value());
    BOOST_TEST(*search.best() == 3u);
  }
  BOOST_TEST(!tn::CandidateSearch({}).next().has_value());
}

BOOST_AUTO_TEST_CASE(a_site_gets_its_share_of_the_budget_within_a_floor_and_what_is_left) {
  // 30% of the remaining device time: 30% of what is left.
  BOOST_TEST(tn::site_budget(600, 30, 100, 15) == 180.0);
  // A small share still gets the floor ...
  BOOST_TEST(tn::site_budget(600, 1, 100, 15) == 15.0);
  // ... but never more than is left.
  BOOST_TEST(tn::site_budget(10, 1, 100, 15) == 10.0);
  BOOST_TEST(tn::site_budget(0, 50, 100, 15) == 0.0);
  // The last site (or one with no weights at all) takes all that is left.
  BOOST_TEST(tn::site_budget(120, 5, 5, 15) == 120.0);
  BOOST_TEST(tn::site_budget(120, 0, 0, 15) == 120.0);
}

BOOST_AUTO_TEST_CASE(summaries_and_protocol_text) {
  const tn::TimeSummary s = tn::summarize({4, 1, 3, 2, 5});
  BOOST_TEST(s.median == 3.0);
  BOOST_TEST(s.spread == (4.0 - 2.0) / 3.0, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(tn::summarize({}).median == 0.0);
  for (auto status : {tn::CandidateStatus::ok, tn::CandidateStatus::wrong_result, tn::CandidateStatus::compile_failed,
                      tn::CandidateStatus::crashed, tn::CandidateStatus::timed_out, tn::CandidateStatus::out_of_memory,
                      tn::CandidateStatus::not_measured})
    BOOST_TEST((tn::status_from_text(tn::status_text(status)) == status));
  tn::CandidateResult r = measured("4x4_k4_p8_wg64_v4", 1.25, 0.125);
  r.times_ms = {1.0, 1.25, 1.5};
  const tn::CandidateResult back = tn::result_from_json(tn::result_json(r));
  BOOST_TEST(back.knobs == r.knobs);
  BOOST_TEST((back.times_ms == r.times_ms));
  BOOST_TEST(back.spread == r.spread);
  BOOST_CHECK_THROW(tn::status_from_text("fine"), Error);
}

// ---- tuning on the device -------------------------------------------------------

BOOST_AUTO_TEST_CASE(a_wrong_candidate_is_rejected_and_never_chosen) {
  BOOST_TEST_REQUIRE(vulkan_available());
  const tn::Site site = only_site(matmul_graph(64, 48, 40));
  const std::vector<std::string> order = vulkan_candidates(site);
  BOOST_TEST_REQUIRE(order.size() >= 3u);
  // The wrong candidate claims to be fast: it must still lose.
  FaultInjection fault("wrong=" + order[1]);
  tn::TuneOptions options = quick_options();
  options.max_candidates = 3;
  const tn::Record record = tn::tune_site(site, {"vulkan", 0}, options);
  BOOST_TEST_REQUIRE(record.candidates.size() == 3u);
  BOOST_TEST(record.key.kernel == site.id.problem);
  BOOST_TEST(record.key.template_name == "gemm");
  BOOST_TEST(record.key.device.backend == "vulkan");
  BOOST_TEST(!record.key.device.driver.empty());
  BOOST_TEST(record.heuristic_knobs == order[0]);
  BOOST_TEST((record.candidates[0].status == tn::CandidateStatus::ok), record.candidates[0].detail);
  BOOST_TEST((record.candidates[1].status == tn::CandidateStatus::wrong_result));
  BOOST_TEST(contains(record.candidates[1].detail, "expected"), record.candidates[1].detail);
  BOOST_TEST((record.candidates[2].status == tn::CandidateStatus::ok), record.candidates[2].detail);
  BOOST_TEST(record.winner_knobs != order[1]);
  BOOST_TEST(record.heuristic_ms > 0);
  BOOST_TEST(record.winner_ms > 0);
  for (const tn::CandidateResult& c : record.candidates)
    if (c.status == tn::CandidateStatus::ok) {
      BOOST_TEST(c.times_ms.size() >= 1u);
      BOOST_TEST(c.median_ms > 0);
    }
  BOOST_TEST(record.provenance.kiln_version == tn::kiln_version());
  BOOST_TEST(!record.provenance.host.empty());
  BOOST_TEST(record.provenance.date.size() == 20u);
  BOOST_TEST(record.provenance.budget_s == options.budget_s);
}

// A 16-bit kernel is a tuning problem of its own: its site says its storage
// type, an override keyed by that text reaches it (and not the f32 twin's),
// and its candidates are measured on 16-bit buffers against the reference's
// 16-bit rule.
BOOST_AUTO_TEST_CASE(sixteen_bit_kernels_are_tuning_problems_of_their_own) {
  Graph half;
  const auto a = half.add_input("a", {DType::f16, {64, 40}});
  const auto b = half.add_input("b", {DType::f16, {40, 48}});
  half.set_outputs(half.add_node("MatMul", {a, b}, {}, "mm"));
  const tn::Site site = only_site(half);
  BOOST_TEST(site.id.problem == "gemm batch=1 m=64 n=48 k=40 a=row b=row storage=f16");
  BOOST_TEST(only_site(matmul_graph(64, 48, 40)).id.problem == "gemm batch=1 m=64 n=48 k=40 a=row b=row");
  const std::string chosen = "2x4_k1_p2_wg32_v1";
  BOOST_TEST(lower_first(half, with_override({}, site.id.problem, chosen)).tuning_site->knobs == chosen);
  BOOST_TEST(lower_first(matmul_graph(64, 48, 40), with_override({}, site.id.problem, chosen)).tuning_site->knobs !=
             chosen);
  BOOST_TEST_REQUIRE(vulkan_available());
  tn::TuneOptions options = quick_options();
  options.max_candidates = 3;
  const tn::Record record = tn::tune_site(site, {"vulkan", 0}, options);
  BOOST_TEST(record.key.kernel == site.id.problem);
  BOOST_TEST_REQUIRE(record.candidates.size() == 3u);
  for (const tn::CandidateResult& c : record.candidates)
    BOOST_TEST((c.status == tn::CandidateStatus::ok), c.knobs << ": " << c.detail);
}

BOOST_AUTO_TEST_CASE(a_winner_is_timed_again_against_the_heuristic_before_it_replaces_it) {
  BOOST_TEST_REQUIRE(vulkan_available());
  const tn::Site site = only_site(matmul_graph(64, 48, 40));
  const std::vector<std::string> order = vulkan_candidates(site);
  BOOST_TEST_REQUIRE(order.size() >= 3u);
  // The heuristic's first timing is ten times too slow (a burst of load):
  // every other candidate beats it in the search, so one becomes the winner
  // and must then be timed again, alternately, against the heuristic.
  FaultInjection fault("slow_first=" + order[0]);
  tn::TuneOptions options = quick_options();
  options.max_candidates = 3;
  std::vector<double> search_ms;  // each candidate's median in the search, in measuring order
  options.on_result = [&](const tn::CandidateResult& r) { search_ms.push_back(r.median_ms); };
  const tn::Record record = tn::tune_site(site, {"vulkan", 0}, options);
  BOOST_TEST_REQUIRE(search_ms.size() == 3u);
  const tn::CandidateResult& heuristic = record.candidates[0];
  BOOST_TEST((heuristic.status == tn::CandidateStatus::ok), heuristic.detail);
  BOOST_TEST(contains(heuristic.detail, "timed again"), heuristic.detail);
  BOOST_TEST(heuristic.times_ms.size() >= 3u);
  // The record holds the alternate rounds' timing, not the slow one.
  BOOST_TEST(record.heuristic_ms < search_ms[0] / 3, record.heuristic_ms << " ms against " << search_ms[0] << " ms");
  // A winner other than the heuristic was confirmed by those rounds.
  if (record.winner_knobs != record.heuristic_knobs) BOOST_TEST(record.winner_ms * 1.02 < record.heuristic_ms);
}

BOOST_AUTO_TEST_CASE(a_crash_or_a_hang_costs_one_candidate) {
  BOOST_TEST_REQUIRE(vulkan_available());
  const tn::Site site = only_site(conv_relu_graph());
  const std::vector<std::string> order = vulkan_candidates(site);
  BOOST_TEST_REQUIRE(order.size() >= 4u);
  FaultInjection fault("crash=" + order[1] + ";hang=" + order[2]);
  tn::TuneOptions options = quick_options();
  options.max_candidates = 4;
  options.candidate_limit_s = 3;
  const tn::Record record = tn::tune_site(site, {"vulkan", 0}, options);
  BOOST_TEST_REQUIRE(record.candidates.size() == 4u);
  BOOST_TEST((record.candidates[0].status == tn::CandidateStatus::ok), record.candidates[0].detail);
  BOOST_TEST((record.candidates[1].status == tn::CandidateStatus::crashed), record.candidates[1].detail);
  BOOST_TEST(contains(record.candidates[1].detail, "signal"), record.candidates[1].detail);
  BOOST_TEST((record.candidates[2].status == tn::CandidateStatus::timed_out), record.candidates[2].detail);
  BOOST_TEST((record.candidates[3].status == tn::CandidateStatus::ok), record.candidates[3].detail);
  BOOST_TEST(record.winner_knobs != order[1]);
  BOOST_TEST(record.winner_knobs != order[2]);
}

// Candidates compiled in parallel ahead of their measurement: a compiler
// crash beside the heuristic's candidate does not cost the heuristic (it is
// measured again, alone, in a fresh worker), and the candidate whose compile
// crashes is the one marked crashed.
BOOST_AUTO_TEST_CASE(compiling_ahead_keeps_a_crash_the_candidates_own) {
  BOOST_TEST_REQUIRE(vulkan_available());
  const tn::Site site = only_site(conv_relu_graph());
  const std::vector<std::string> order = vulkan_candidates(site);
  BOOST_TEST_REQUIRE(order.size() >= 4u);
  tn::TuneOptions options = quick_options();
  options.max_candidates = 4;
  options.compile_threads = 4;  // the heuristic's request compiles all four
  auto one_at_a_time = [](const WarningLog& log) {
    return std::ranges::count_if(log.messages(), [](const std::string& m) { return contains(m, "one at a time"); });
  };
  {
    const WarningLog log;
    const tn::Record clean = tn::tune_site(site, {"vulkan", 0}, options);
    BOOST_TEST_REQUIRE(clean.candidates.size() == 4u);
    for (const tn::CandidateResult& c : clean.candidates) BOOST_TEST((c.status == tn::CandidateStatus::ok), c.detail);
    BOOST_TEST(one_at_a_time(log) == 0);
  }
  FaultInjection fault("crash_compile=" + order[1]);
  const WarningLog log;
  const tn::Record record = tn::tune_site(site, {"vulkan", 0}, options);
  BOOST_TEST(one_at_a_time(log) == 1);  // the heuristic's request died compiling the others
  BOOST_TEST_REQUIRE(record.candidates.size() == 4u);
  BOOST_TEST((record.candidates[0].status == tn::CandidateStatus::ok), record.candidates[0].detail);
  BOOST_TEST((record.candidates[1].status == tn::CandidateStatus::crashed), record.candidates[1].detail);
  BOOST_TEST(contains(record.candidates[1].detail, "signal"), record.candidates[1].detail);
  BOOST_TEST((record.candidates[2].status == tn::CandidateStatus::ok), record.candidates[2].detail);
  BOOST_TEST((record.candidates[3].status == tn::CandidateStatus::ok), record.candidates[3].detail);
  BOOST_TEST(record.winner_knobs != order[1]);
}

BOOST_AUTO_TEST_CASE(the_budget_stops_early_and_keeps_finished_results) {
  BOOST_TEST_REQUIRE(vulkan_available());
  const tn::Site site = only_site(matmul_graph(32, 32, 32));
  const std::vector<std::string> order = vulkan_candidates(site);
  BOOST_TEST_REQUIRE(order.size() >= 5u);
  // Every candidate after the first two hangs (which of them the search
  // takes third depends on the timings); the budget, not their time limit,
  // stops the one it starts.
  FaultInjection fault("hang=" + order[2] + ";hang=" + order[3] + ";hang=" + order[4]);
  tn::TuneOptions options = quick_options();
  options.max_candidates = 5;
  options.budget_s = 4;
  options.candidate_limit_s = 300;
  std::vector<std::string> reported;
  options.on_result = [&](const tn::CandidateResult& r) { reported.push_back(r.knobs); };
  const auto start = std::chrono::steady_clock::now();
  const tn::Record record = tn::tune_site(site, {"vulkan", 0}, options);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  BOOST_TEST(elapsed < options.budget_s + 2);
  BOOST_TEST_REQUIRE(record.candidates.size() == 5u);
  BOOST_TEST((record.candidates[0].status == tn::CandidateStatus::ok), record.candidates[0].detail);
  BOOST_TEST((record.candidates[1].status == tn::CandidateStatus::ok), record.candidates[1].detail);
  for (std::size_t i = 2; i < 5; ++i)
    BOOST_TEST((record.candidates[i].status == tn::CandidateStatus::not_measured), record.candidates[i].detail);
  for (std::size_t i = 2; i < 5; ++i) BOOST_TEST(contains(record.candidates[i].detail, "budget"));
  BOOST_TEST(reported.size() == 3u);  // the two finished ones and the one the budget stopped
  BOOST_TEST((record.winner_knobs == order[0] || record.winner_knobs == order[1]));

  // A budget spent before anything starts: every candidate not_measured, the heuristic's choice kept.
  options.budget_s = 1e-6;
  const tn::Record nothing = tn::tune_site(site, {"vulkan", 0}, options);
  BOOST_TEST_REQUIRE(nothing.candidates.size() == 5u);
  for (const tn::CandidateResult& c : nothing.candidates)
    BOOST_TEST((c.status == tn::CandidateStatus::not_measured), c.knobs);
  BOOST_TEST(nothing.winner_knobs == order[0]);
  BOOST_TEST(nothing.winner_ms == 0.0);
}

BOOST_AUTO_TEST_CASE(a_missing_worker_is_a_clear_error) {
  const tn::Site site = only_site(matmul_graph(8, 8, 8));
  tn::TuneOptions options = quick_options();
  options.worker_path = "/nonexistent/kiln-tune-worker";
  if (!vulkan_available()) return;
  try {
    tn::tune_site(site, {"vulkan", 0}, options);
    BOOST_ERROR("tune_site ran without a worker");
  } catch (const Error& error) {
    BOOST_TEST((error.kind() == ErrorKind::NotFound));
    BOOST_TEST(contains(error.what(), "/nonexistent/kiln-tune-worker"));
  }
  BOOST_CHECK_THROW(tn::tune_site(site, {"vulkan", 99}, quick_options()), Error);
}

BOOST_AUTO_TEST_CASE(attention_candidates_are_verified_and_timed) {
  BOOST_TEST_REQUIRE(vulkan_available());
  const kb::Backend& vulkan = kb::get_backend("vulkan");
  const kb::TargetDesc target = vulkan.enumerate_devices().at(0).target;
  // The site as the device's plan has it (a CPU device's heuristic sizes the workgroup).
  const tn::Site site = only_site(attention_graph(10, 12, 8, 8), kiln::lower::target_policy(target).lower);
  const std::vector<std::string> order = tn::candidates(site, vulkan, target).knobs;
  BOOST_TEST_REQUIRE(order.size() >= 3u);
  BOOST_TEST(order.front() == site.id.knobs);
  FaultInjection fault("wrong=" + order[2]);
  tn::TuneOptions options = quick_options();
  options.max_candidates = 3;
  const tn::Record record = tn::tune_site(site, {"vulkan", 0}, options);
  BOOST_TEST_REQUIRE(record.candidates.size() == 3u);
  BOOST_TEST(record.key.template_name == "attention");
  BOOST_TEST((record.candidates[0].status == tn::CandidateStatus::ok), record.candidates[0].detail);
  BOOST_TEST((record.candidates[1].status == tn::CandidateStatus::ok), record.candidates[1].detail);
  BOOST_TEST((record.candidates[2].status == tn::CandidateStatus::wrong_result), record.candidates[2].detail);
  BOOST_TEST(record.winner_knobs != order[2]);
}

// ---- workgroup sizes of pointwise and reduction kernels ---------------------------

namespace {

// x [rows, cols] -> `op` (one node).
Graph unary_graph(const std::string& op, std::int64_t rows, std::int64_t cols, kiln::graph::Attributes attrs = {}) {
  Graph g;
  const auto x = g.add_input("x", {DType::f32, {rows, cols}});
  g.set_outputs(g.add_node(op, {x}, attrs, "node"));
  return g;
}

kiln::graph::Attributes ints_attr(const std::string& name, std::vector<std::int64_t> values) {
  kiln::graph::Attributes attrs;
  attrs.set(name, std::move(values));
  return attrs;
}

}  // namespace

BOOST_AUTO_TEST_CASE(pointwise_and_reduction_nodes_record_a_workgroup_site_kept_through_fusion) {
  const kiln::kir::Kernel sigmoid = lower_first(unary_graph("Sigmoid", 4, 50), {});
  BOOST_TEST_REQUIRE(sigmoid.tuning_site.has_value());
  BOOST_TEST(sigmoid.tuning_site->template_name == "pointwise");
  BOOST_TEST(sigmoid.tuning_site->template_version == kiln::lower::kWorkgroupTemplateVersion);
  BOOST_TEST(sigmoid.tuning_site->problem == "pointwise Sigmoid in=f32[4,50] out=f32[4,50]");
  BOOST_TEST(sigmoid.tuning_site->knobs == "wg64");
  BOOST_TEST(!sigmoid.tuning_site->overridden);
  BOOST_TEST(sigmoid.workgroup_size == 64u);

  kiln::graph::Attributes keep = ints_attr("axes", {1});
  keep.set("keepdims", std::int64_t{0});
  const Graph reduce = unary_graph("ReduceMean", 6, 70, keep);
  const tn::Site site = only_site(reduce);
  BOOST_TEST(site.id.template_name == "reduction");
  BOOST_TEST(site.id.problem == "reduction ReduceMean in=f32[6,70] out=f32[6] axes=[1] keepdims=0");
  BOOST_TEST(site.id.knobs == "wg64");

  // x + b feeds a Softmax: the Add runs as the Softmax kernel's prologue, which keeps the Softmax's site.
  Graph g;
  const auto x = g.add_input("x", {DType::f32, {8, 30}});
  const auto b = g.add_input("b", {DType::f32, {30}});
  const auto sum = g.add_node("Add", {x, b}, {}, "add");
  g.set_outputs(g.add_node("Softmax", sum, {}, "softmax"));
  kiln::fuse::PlanOptions options;
  options.fuse = true;
  const kiln::fuse::KernelPlan plan = kiln::fuse::plan_kernels(g, options);
  BOOST_TEST_REQUIRE(plan.steps.size() == 1u);
  BOOST_TEST(plan.steps.front().nodes.size() == 2u);
  const auto& fused = plan.steps.front().kernel->kernel;
  BOOST_TEST_REQUIRE(fused.tuning_site.has_value());
  BOOST_TEST(fused.tuning_site->problem == "reduction Softmax in=f32[8,30] out=f32[8,30]");
  // The Add's site would tune nothing: only the anchor's is listed.
  const std::vector<tn::Site> sites = tn::sites_of(g, LowerTarget{});
  BOOST_TEST_REQUIRE(sites.size() == 1u);
  BOOST_TEST(sites.front().node.name == "softmax");

  // A pointwise chain after a graph input fuses into its first op, whose site the kernel keeps;
  // with the Softmax's workgroup overridden the fused kernel takes that size.
  Graph chain;
  const auto in = chain.add_input("x", {DType::f32, {8, 30}});
  const auto relu = chain.add_node("Relu", {in}, {}, "relu");
  chain.set_outputs(chain.add_node("Softmax", chain.add_node("Tanh", relu, {}, "tanh"), {}, "softmax"));
  options.target = with_override({}, "reduction Softmax in=f32[8,30] out=f32[8,30]", "wg32");
  const kiln::fuse::KernelPlan chain_plan = kiln::fuse::plan_kernels(chain, options);
  BOOST_TEST_REQUIRE(chain_plan.steps.size() == 1u);
  BOOST_TEST(chain_plan.steps.front().kernel->kernel.workgroup_size == 32u);
  BOOST_TEST(chain_plan.steps.front().kernel->kernel.tuning_site->overridden);

  // An epilogue keeps the producer's workgroup: an override of the fused Relu changes nothing.
  const Graph conv = conv_relu_graph();
  options.target = with_override({}, "pointwise Relu in=f32[1,16,10,10] out=f32[1,16,10,10]", "wg256");
  const kiln::fuse::KernelPlan conv_plan = kiln::fuse::plan_kernels(conv, options);
  BOOST_TEST_REQUIRE(conv_plan.steps.size() == 1u);
  const auto& conv_kernel = conv_plan.steps.front().kernel->kernel;
  BOOST_TEST(conv_kernel.tuning_site->template_name == "conv");
  BOOST_TEST(conv_kernel.workgroup_size == sh::parse_conv_plan(conv_kernel.tuning_site->knobs).conv.workgroup_size);
  BOOST_TEST(conv_kernel.workgroup_size != 256u);
}

BOOST_AUTO_TEST_CASE(a_workgroup_override_changes_the_size_and_grid_and_keeps_the_result) {
  // 1000 elements: 16 groups of 64, 4 of 256 (the last one partly idle).
  const Graph g = unary_graph("Sigmoid", 10, 100);
  const tn::Site site = only_site(g);
  WarningLog log;
  const kiln::kir::Kernel plain = lower_first(g, {});
  const kiln::kir::Kernel tuned = lower_first(g, with_override({}, site.id.problem, "wg256"));
  BOOST_TEST(log.messages().empty());
  BOOST_TEST(tuned.workgroup_size == 256u);
  BOOST_TEST(tuned.name == plain.name + "_wg256");
  BOOST_TEST(tuned.tuning_site->knobs == "wg256");
  BOOST_TEST(tuned.tuning_site->overridden);
  BOOST_TEST(tuned.tuning_site->problem == site.id.problem);
  const auto groups = [](const std::array<std::uint32_t, 3>& grid) { return grid[0] * grid[1] * grid[2]; };
  BOOST_TEST(groups(kiln::kir::dispatch_grid(plain, 65535)) == 16u);
  BOOST_TEST(groups(kiln::kir::dispatch_grid(tuned, 65535)) == 4u);

  if (!vulkan_available()) return;
  // On the device, every size the target takes gives the reference's result (the worker's check).
  const kb::Backend& vulkan = kb::get_backend("vulkan");
  tn::Measurer measurer(vulkan, vulkan.create_device(0));
  tn::MeasureOptions options = quick_options().measure;
  for (const std::string& knobs : {std::string("wg256"), std::string("wg32")}) {
    const tn::CandidateResult result = measurer.measure(site, knobs, options);
    BOOST_TEST((result.status == tn::CandidateStatus::ok), knobs << ": " << result.detail);
  }
  const tn::Site reduction = only_site(unary_graph("Softmax", 37, 50));
  const tn::CandidateResult result = measurer.measure(reduction, "wg128", options);
  BOOST_TEST((result.status == tn::CandidateStatus::ok), result.detail);
}

BOOST_AUTO_TEST_CASE(a_workgroup_override_the_target_cannot_take_is_ignored_with_the_warning) {
  const Graph g = unary_graph("Softmax", 8, 16);
  const std::string problem = only_site(g).id.problem;
  LowerTarget small;
  small.max_workgroup_invocations = 128;
  for (const auto& [bad, why] : {std::pair<std::string, std::string>{"wg256", "exceeds the target's 128"},
                                 {"wg0", "workgroup_size"},
                                 {"wg64x", "workgroup_size"},
                                 {"8x8_k4_p8_wg64_v4", "wg<workgroup_size>"}}) {
    WarningLog log;
    const kiln::kir::Kernel kernel = lower_first(g, with_override(small, problem, bad));
    BOOST_TEST(kernel.workgroup_size == 64u, bad);
    BOOST_TEST(!kernel.tuning_site->overridden, bad);
    BOOST_TEST(kernel.tuning_site->knobs == "wg64", bad);
    BOOST_TEST_REQUIRE(log.messages().size() == 1u, bad);
    BOOST_TEST(contains(log.messages().front(), "'" + bad + "' for '" + problem + "' ignored"), log.messages().front());
    BOOST_TEST(contains(log.messages().front(), why), log.messages().front());
  }
}

BOOST_AUTO_TEST_CASE(workgroup_candidates_are_the_sizes_the_target_takes) {
  const tn::Site site = only_site(unary_graph("Relu", 64, 64));
  const kb::Backend& null = kb::get_backend("null");
  const tn::CandidateList list = tn::candidates(site, null, gpu_target(65536, 128));
  BOOST_TEST_REQUIRE(!list.knobs.empty());
  BOOST_TEST(list.knobs.front() == "wg64");
  std::vector<std::string> sorted = list.knobs;
  std::sort(sorted.begin(), sorted.end());
  BOOST_TEST((sorted == std::vector<std::string>{"wg128", "wg32", "wg64"}));
  std::vector<std::string> filtered;
  for (const auto& [knobs, why] : list.filtered) {
    filtered.push_back(knobs);
    BOOST_TEST(contains(why, "exceeds the target's 128"), knobs << ": " << why);
  }
  std::sort(filtered.begin(), filtered.end());
  BOOST_TEST((filtered == std::vector<std::string>{"wg1024", "wg256", "wg512"}));
  // A subgroup of 8 lanes (lavapipe) is a candidate too.
  kb::TargetDesc lanes8 = gpu_target(65536);
  lanes8.subgroup_size = 8;
  const tn::CandidateList with8 = tn::candidates(site, null, lanes8);
  BOOST_TEST(with8.knobs.size() == 7u);
  BOOST_TEST((std::find(with8.knobs.begin(), with8.knobs.end(), "wg8") != with8.knobs.end()));
  BOOST_TEST((tn::candidates(site, null, lanes8).knobs == with8.knobs));
  // Limits lowering does not know (the x extent of a workgroup) filter through Backend::supports.
  kb::TargetDesc narrow = gpu_target(65536);
  narrow.max_workgroup_size[0] = 256;
  const tn::CandidateList narrowed = tn::candidates(site, null, narrow);
  BOOST_TEST(narrowed.knobs.size() == 4u);  // 32, 64, 128, 256
  BOOST_TEST_REQUIRE(narrowed.filtered.size() == 2u);
  for (const auto& [knobs, why] : narrowed.filtered) BOOST_TEST(contains(why, "in x"), knobs << ": " << why);
}

BOOST_AUTO_TEST_CASE(workgroup_problem_texts_tell_different_attributes_apart) {
  auto clip = [](double low, double high) {
    kiln::graph::Attributes attrs;
    attrs.set("min", low);
    attrs.set("max", high);
    return only_site(unary_graph("Clip", 4, 8, attrs)).id.problem;
  };
  BOOST_TEST(clip(0, 6) == "pointwise Clip in=f32[4,8] out=f32[4,8] max=6.0 min=0.0");
  BOOST_TEST(clip(0, 6) == clip(0, 6));
  BOOST_TEST(clip(0, 6) != clip(0, 6.5));
  BOOST_TEST(clip(0, 6) != clip(-1, 6));
  // An int and a float of one value do not read alike.
  kiln::graph::Attributes as_int, as_float;
  as_int.set("axis", std::int64_t{1});
  as_float.set("axis", 1.0);
  const kiln::graph::Node a{0, "Softmax", "a", {0}, {1}, as_int, {}};
  const kiln::graph::Node b{0, "Softmax", "b", {0}, {1}, as_float, {}};
  const TensorType type{DType::f32, {2, 3}};
  const TensorType* in[] = {&type};
  const TensorType out[] = {type};
  BOOST_TEST(kiln::lower::workgroup_problem_text("reduction", a, in, out) !=
             kiln::lower::workgroup_problem_text("reduction", b, in, out));
  // Softmax over another axis: another kernel, another text.
  const std::string last = only_site(unary_graph("Softmax", 8, 16)).id.problem;
  const std::string first = only_site(unary_graph("Softmax", 8, 16, [] {
                                        kiln::graph::Attributes attrs;
                                        attrs.set("axis", std::int64_t{0});
                                        return attrs;
                                      }())).id.problem;
  BOOST_TEST(last != first);
  // Strings are quoted; a long index list becomes a digest, still told apart.
  kiln::graph::Attributes mode;
  mode.set("mode", std::string("a b"));
  const kiln::graph::Node m{0, "Resize", "m", {0}, {1}, mode, {}};
  BOOST_TEST(contains(kiln::lower::workgroup_problem_text("pointwise", m, in, out), " mode=\"a b\""));
  std::vector<std::int64_t> many(100, 1), other(100, 1);
  other[57] = 2;
  const kiln::graph::Node ga{0, "Gather", "ga", {0}, {1}, ints_attr("indices", many), {}};
  const kiln::graph::Node gb{0, "Gather", "gb", {0}, {1}, ints_attr("indices", other), {}};
  const std::string ta = kiln::lower::workgroup_problem_text("pointwise", ga, in, out);
  BOOST_TEST(contains(ta, " indices=#"), ta);
  BOOST_TEST(ta.size() < 100u);
  BOOST_TEST(ta != kiln::lower::workgroup_problem_text("pointwise", gb, in, out));
  // Two nodes that build the same kernel share one site.
  Graph twice = unary_graph("Sigmoid", 4, 50);
  const auto y = twice.add_input("y", {DType::f32, {4, 50}});
  twice.set_outputs({twice.outputs()[0], twice.add_node("Sigmoid", {y}, {}, "other")[0]});
  BOOST_TEST(tn::sites_of(twice, LowerTarget{}).size() == 1u);
  // And the site's JSON carries what the worker needs to rebuild it.
  const tn::Site site = only_site(unary_graph("Clip", 4, 8, [] {
    kiln::graph::Attributes attrs;
    attrs.set("max", 6.0);
    return attrs;
  }()));
  const tn::Site back = tn::site_from_json(tn::to_json(site));
  BOOST_TEST((back.id == site.id));
  BOOST_TEST(back.lower(LowerTarget{}, "wg128").workgroup_size == 128u);
}

BOOST_AUTO_TEST_CASE(workgroup_candidates_are_verified_timed_and_chosen_deterministically) {
  BOOST_TEST_REQUIRE(vulkan_available());
  const tn::Site site = only_site(unary_graph("Softmax", 96, 64));
  const std::vector<std::string> order = vulkan_candidates(site);
  BOOST_TEST_REQUIRE(order.size() >= 4u);
  BOOST_TEST(order.front() == "wg64");
  FaultInjection fault("wrong=" + order[1]);
  tn::TuneOptions options = quick_options();
  options.max_candidates = 4;
  const tn::Record record = tn::tune_site(site, {"vulkan", 0}, options);
  BOOST_TEST_REQUIRE(record.candidates.size() == 4u);
  BOOST_TEST(record.key.template_name == "reduction");
  BOOST_TEST(record.key.kernel == site.id.problem);
  BOOST_TEST(record.heuristic_knobs == "wg64");
  for (std::size_t i = 0; i < 4; ++i) {
    const tn::CandidateResult& c = record.candidates[i];
    BOOST_TEST(c.knobs == order[i]);
    if (i == 1) {
      BOOST_TEST((c.status == tn::CandidateStatus::wrong_result), c.detail);
      continue;
    }
    BOOST_TEST((c.status == tn::CandidateStatus::ok), c.knobs << ": " << c.detail);
    BOOST_TEST(c.median_ms > 0);
    BOOST_TEST(!c.times_ms.empty());
  }
  BOOST_TEST(record.winner_knobs != order[1]);
  // The record's timings choose its winner, every time.
  for (int i = 0; i < 3; ++i) BOOST_TEST(record.candidates[tn::choose(record.candidates).index].knobs == record.winner_knobs);
}

#define BOOST_TEST_MODULE passes
#include <boost/test/unit_test.hpp>

#include <kiln/builder.h>
#include <kiln/models.h>
#include <kiln/kiln.h>
#include <kiln/onnx.h>

#include "graph/ir.h"
#include "graph/op_registry.h"
#include "graph/passes/passes.h"
#include "graph/passes/rewrite.h"
#include "src/lower/target_policy.h"
#include "src/runtime/internal_access.h"
#include "src/zoo/init.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#if KILN_HAVE_ONNX
#include <onnx/onnx_pb.h>
#endif

namespace {

using kiln::Builder;
using kiln::DType;
using kiln::Shape;
using kiln::Tensor;
using kiln::graph::Graph;
namespace passes = kiln::graph::passes;

// The kernel templates' answers for a generic GPU, as the compiler gives them
// to the passes (src/lower/target_policy.h).
const passes::TemplateQueries& heuristics() {
  static const passes::TemplateQueries queries = kiln::lower::target_policy(kiln::backend::TargetDesc{}).templates;
  return queries;
}

// The pipeline's options as compile() gives them for a generic GPU.
passes::PipelineOptions gpu_passes(const kiln::Settings& settings = {}) {
  return kiln::lower::target_policy(kiln::backend::TargetDesc{}).pass_options(settings);
}

Tensor random_tensor(Shape shape, std::uint64_t seed, double mean = 0.0, double stddev = 1.0) {
  return kiln::models::init::normal(std::move(shape), mean, stddev, seed);
}

// Seeded inputs matching the graph's input types.
std::vector<Tensor> inputs_for(const Graph& g, std::uint64_t seed = 11) {
  std::vector<Tensor> inputs;
  for (kiln::graph::ValueId id : g.inputs()) inputs.push_back(random_tensor(g.value(id).type.shape, seed++));
  return inputs;
}

// max |a - b| / max |a| over every output of both graphs, run on the same inputs.
double relative_difference(const Graph& original, const Graph& transformed) {
  const std::vector<Tensor> inputs = inputs_for(original);
  const std::vector<Tensor> expected = kiln::graph::run_reference(original, inputs);
  const std::vector<Tensor> actual = kiln::graph::run_reference(transformed, inputs);
  BOOST_REQUIRE(expected.size() == actual.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    float scale = 0.0f;
    for (float v : expected[i].values<float>()) scale = std::max(scale, std::fabs(v));
    BOOST_REQUIRE(scale > 0.0f);
    worst = std::max(worst, double(kiln::max_abs_diff(actual[i], expected[i])) / scale);
  }
  return worst;
}

// Graph inputs and outputs keep their names, types and order.
void check_interface(const Graph& before, const Graph& after) {
  BOOST_REQUIRE(before.inputs().size() == after.inputs().size());
  for (std::size_t i = 0; i < before.inputs().size(); ++i) {
    BOOST_TEST(before.value(before.inputs()[i]).name == after.value(after.inputs()[i]).name);
    BOOST_TEST(type_str(before.value(before.inputs()[i]).type) == type_str(after.value(after.inputs()[i]).type));
  }
  BOOST_REQUIRE(before.outputs().size() == after.outputs().size());
  for (std::size_t i = 0; i < before.outputs().size(); ++i) {
    BOOST_TEST(before.value(before.outputs()[i]).name == after.value(after.outputs()[i]).name);
    BOOST_TEST(type_str(before.value(before.outputs()[i]).type) == type_str(after.value(after.outputs()[i]).type));
  }
  after.verify();
}

int count_op(const Graph& g, const std::string& op) {
  return static_cast<int>(std::count_if(g.nodes().begin(), g.nodes().end(), [&](const auto& n) { return n.op == op; }));
}

int count_constants(const Graph& g) {
  return static_cast<int>(std::count_if(g.values().begin(), g.values().end(), [](const auto& v) { return v.constant.has_value(); }));
}

bool mentions(const passes::PassReport& report, const std::string& text) {
  return std::any_of(report.details.begin(), report.details.end(),
                     [&](const std::string& line) { return line.find(text) != std::string::npos; });
}

const kiln::graph::Node* find_node(const Graph& g, const std::string& name) {
  for (const auto& n : g.nodes())
    if (n.name == name) return &n;
  return nullptr;
}

// Built once: weights for 11.7M parameters take a fraction of a second each time.
const Graph& resnet18_graph() {
  static const kiln::Model model = kiln::models::resnet18({.batch = 1, .image_size = 32, .num_classes = 10, .seed = 5});
  return kiln::internal::graph(model);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(rewriter)

BOOST_AUTO_TEST_CASE(copy_keeps_everything) {
  Builder b;
  auto x = b.input("x", DType::f32, {2, 4});
  auto w = b.constant("w", random_tensor({4, 3}, 1));
  b.constant("unused", random_tensor({2}, 2));
  auto y = b.relu(b.matmul(x, w));
  kiln::Model m = b.build({y});
  passes::Rewriter rw(kiln::internal::graph(m));
  for (const auto& node : kiln::internal::graph(m).nodes()) rw.copy_node(node);
  Graph copy = rw.finish();
  check_interface(kiln::internal::graph(m), copy);
  BOOST_TEST(copy.to_string() == kiln::internal::graph(m).to_string());
}

BOOST_AUTO_TEST_CASE(graph_input_returned_under_another_name_gets_an_identity) {
  Builder b;
  auto x = b.input("x", DType::f32, {3});
  auto y = b.op("Identity", {x}, {})[0];
  b.set_name(y, "y");
  kiln::Model m = b.build({y, x});
  passes::Rewriter rw(kiln::internal::graph(m));
  rw.replace(y.id, rw.map(x.id));  // drop the Identity; the rewriter must restore the name
  Graph g = rw.finish();
  check_interface(kiln::internal::graph(m), g);
  BOOST_TEST(count_op(g, "Identity") == 1);
}

BOOST_AUTO_TEST_CASE(names_a_pass_adds_stay_distinct_from_copied_ones) {
  Builder b;
  auto x = b.input("x", DType::f32, {3});
  auto r = b.relu(x);     // "relu"
  auto s = b.sigmoid(r);  // "sigmoid", replaced below
  auto t = b.relu(s);     // "relu_1"
  kiln::Model m = b.build({t});
  const Graph& source = kiln::internal::graph(m);
  passes::Rewriter rw(source);
  rw.copy_node(source.node(0));
  // Node and value names are separate: the node may be "x", its value may not.
  const kiln::graph::ValueId added = rw.add_node("Tanh", {rw.map(r.id)}, {}, "x")[0];
  const kiln::graph::ValueId constant = rw.add_constant("x", kiln::Tensor::scalar_f32(1.0f));
  rw.replace(s.id, added);
  rw.copy_node(source.node(2));
  Graph g = rw.finish();
  g.verify();
  BOOST_TEST(g.node(1).name == "x");
  BOOST_TEST(g.value(added).name == "x_1");
  BOOST_TEST(g.value(constant).name == "x_2");
  BOOST_TEST(g.node(2).name == "relu_1");
  check_interface(source, g);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(fold_constants)

BOOST_AUTO_TEST_CASE(folds_constant_subgraphs_and_removes_identity) {
  Builder b("consts");
  auto x = b.input("x", DType::f32, {2, 3});
  auto c1 = b.constant("c1", random_tensor({2, 3}, 1));
  auto c2 = b.constant("c2", random_tensor({3}, 2));
  auto c3 = b.constant("c3", random_tensor({2, 3}, 3));
  auto folded = b.mul(b.add(c1, c2), c3);          // two constant nodes
  auto through = b.op("Identity", {folded}, {})[0];  // removed
  auto y = b.add(x, through);
  auto z = b.relu(c1);                                 // a graph output that becomes a constant
  b.set_name(z, "z");
  auto passthrough = b.op("Identity", {x}, {})[0];   // renames input x as output "x_copy": kept
  b.set_name(passthrough, "x_copy");
  kiln::Model m = b.build({y, z, passthrough});

  passes::PassResult r = passes::fold_constants(kiln::internal::graph(m));
  check_interface(kiln::internal::graph(m), r.graph);
  BOOST_TEST(r.report.pass == "fold_constants");
  BOOST_TEST(r.report.changes == 4);
  BOOST_TEST(r.report.details.size() == 4u);
  BOOST_TEST(mentions(r.report, "folded Add 'add'"));
  BOOST_TEST(mentions(r.report, "folded Mul 'mul'"));
  BOOST_TEST(mentions(r.report, "removed Identity 'identity'"));
  BOOST_TEST(count_op(r.graph, "Add") == 1);
  BOOST_TEST(count_op(r.graph, "Mul") == 0);
  BOOST_TEST(count_op(r.graph, "Relu") == 0);
  BOOST_TEST(count_op(r.graph, "Identity") == 1);
  BOOST_TEST(r.graph.value(r.graph.outputs()[1]).constant.has_value());
  BOOST_TEST(relative_difference(kiln::internal::graph(m), r.graph) <= 1e-4);

  passes::PassResult again = passes::fold_constants(r.graph);
  BOOST_TEST(again.report.changes == 0);
}

BOOST_AUTO_TEST_CASE(keeps_data_dependent_ops_on_constant_inputs) {
  // NonZero's output extent depends on the data, so everything after it is
  // typed dynamic; folding it would leave those types inconsistent.
  Graph g;
  auto c = g.add_constant("mask", Tensor::from_f32({4}, {0.0f, 1.0f, 0.0f, 2.0f}));
  auto nz = g.add_node("NonZero", {c}, {}, "nz");
  g.set_outputs({nz[0]});
  auto result = passes::fold_constants(g);
  BOOST_TEST(result.report.changes == 0);
  BOOST_TEST(result.graph.nodes().size() == 1u);
  BOOST_CHECK_NO_THROW(result.graph.verify());
}

BOOST_AUTO_TEST_CASE(leaves_outputs_past_the_fold_limit_to_run_time) {
  // A one-element constant expanded to 2^29 elements (2 GiB): folding it would
  // make a small file allocate without bound at compile time.
  Graph g;
  auto c = g.add_constant("one", Tensor::from_f32({1}, {1.0f}));
  kiln::graph::Attributes big;
  big.set("shape", std::vector<std::int64_t>{std::int64_t{1} << 29});
  auto huge = g.add_node("Expand", {c}, big, "huge");
  kiln::graph::Attributes small;
  small.set("shape", std::vector<std::int64_t>{4});
  auto fine = g.add_node("Expand", {c}, small, "fine");
  g.set_outputs({huge[0], fine[0]});
  auto result = passes::fold_constants(g);
  BOOST_TEST(result.report.changes == 1);
  BOOST_TEST_REQUIRE(result.graph.nodes().size() == 1u);
  BOOST_TEST(result.graph.nodes()[0].name == "huge");
  BOOST_CHECK_NO_THROW(result.graph.verify());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(fold_batch_norm)

// x -> Conv(+bias) -> BN -> Relu is foldable; BN on x itself and a BN whose
// Conv output has a second reader are not.
BOOST_AUTO_TEST_CASE(folds_only_foldable_pairs) {
  Builder b("bn");
  auto x = b.input("x", DType::f32, {2, 3, 9, 9});
  auto bn_params = [&](const std::string& scope, std::int64_t c, std::uint64_t seed) {
    b.push_scope(scope);
    auto s = b.constant("weight", random_tensor({c}, seed, 1.0, 0.2));
    auto t = b.constant("bias", random_tensor({c}, seed + 1, 0.0, 0.2));
    auto mu = b.constant("running_mean", random_tensor({c}, seed + 2, 0.0, 0.3));
    auto var = b.constant("running_var", kiln::models::init::uniform({c}, 0.5, 1.5, seed + 3));
    b.pop_scope();
    return std::array{s, t, mu, var};
  };
  b.push_scope("conv");
  auto w = b.constant("weight", random_tensor({5, 3, 3, 3}, 20, 0.0, 0.3));
  auto wb = b.constant("bias", random_tensor({5}, 21));
  auto conv = b.conv2d(x, w, wb, {.stride = {2, 2}, .padding = {1, 1, 1, 1}});
  b.pop_scope();
  auto p = bn_params("bn", 5, 30);
  auto y = b.relu(b.batch_norm(conv, p[0], p[1], p[2], p[3], 1e-3f));

  auto q = bn_params("bn_input", 3, 40);
  auto on_input = b.batch_norm(x, q[0], q[1], q[2], q[3]);

  b.push_scope("shared_conv");
  auto w2 = b.constant("weight", random_tensor({3, 3, 1, 1}, 50));
  auto shared = b.conv2d(on_input, w2, std::nullopt);
  b.pop_scope();
  auto r = bn_params("bn_shared", 3, 60);
  auto z = b.add(b.batch_norm(shared, r[0], r[1], r[2], r[3]), shared);
  kiln::Model m = b.build({y, z});

  passes::PassResult result = passes::fold_batch_norm(kiln::internal::graph(m));
  check_interface(kiln::internal::graph(m), result.graph);
  BOOST_TEST(result.report.changes == 1);
  BOOST_TEST(mentions(result.report, "folded BatchNormalization 'batch_normalization' into Conv 'conv'"));
  BOOST_TEST(count_op(result.graph, "BatchNormalization") == 2);
  const auto* folded = find_node(result.graph, "conv");
  BOOST_REQUIRE(folded != nullptr);
  BOOST_REQUIRE(folded->inputs.size() == 3u);
  BOOST_TEST(result.graph.value(folded->inputs[1]).constant.has_value());
  BOOST_TEST(result.graph.value(folded->inputs[2]).constant.has_value());
  BOOST_TEST(relative_difference(kiln::internal::graph(m), result.graph) <= 1e-4);
}

BOOST_AUTO_TEST_CASE(conv_with_activation_is_not_folded) {
  Builder b;
  auto x = b.input("x", DType::f32, {1, 2, 4, 4});
  kiln::graph::Attributes attrs;
  attrs.set("activation", std::string("Relu"));
  auto conv = b.op("Conv", {x, b.constant("w", random_tensor({2, 2, 1, 1}, 1)), std::nullopt}, attrs)[0];
  auto ones = b.constant("ones", kiln::models::init::uniform({2}, 1.0, 1.0, 0));
  auto y = b.batch_norm(conv, ones, ones, ones, ones);
  kiln::Model m = b.build({y});
  passes::PassResult result = passes::fold_batch_norm(kiln::internal::graph(m));
  BOOST_TEST(result.report.changes == 0);
  BOOST_TEST(count_op(result.graph, "BatchNormalization") == 1);
}

BOOST_AUTO_TEST_CASE(removes_every_batch_norm_of_resnet18) {
  const Graph& g = resnet18_graph();
  passes::PassResult result = passes::fold_batch_norm(g);
  check_interface(g, result.graph);
  BOOST_TEST(result.report.changes == 20);
  BOOST_TEST(count_op(result.graph, "BatchNormalization") == 0);
  BOOST_TEST(count_op(result.graph, "Conv") == 20);
  BOOST_TEST(mentions(result.report, "folded BatchNormalization 'layer2.0.downsample.1' into Conv 'layer2.0.downsample.0'"));
  BOOST_TEST(relative_difference(g, result.graph) <= 1e-3);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(fuse_activation)

BOOST_AUTO_TEST_CASE(fuses_conv_and_gemm_with_a_single_reader) {
  Builder b;
  auto x = b.input("x", DType::f32, {1, 2, 5, 5});
  b.push_scope("fused");
  auto c1 = b.conv2d(x, b.constant("weight", random_tensor({4, 2, 3, 3}, 1)), b.constant("bias", random_tensor({4}, 2)));
  b.pop_scope();
  auto r1 = b.relu(c1);
  b.push_scope("kept");
  auto c2 = b.conv2d(r1, b.constant("weight", random_tensor({4, 4, 1, 1}, 3)), std::nullopt);
  b.pop_scope();
  auto both = b.add(b.relu(c2), c2);  // c2 has two readers: the Relu cannot move into it
  auto flat = b.flatten(both);
  b.push_scope("fc");
  auto logits = b.relu(b.gemm(flat, b.constant("weight", random_tensor({3, 36}, 4)), b.constant("bias", random_tensor({3}, 5)),
                              {.trans_b = true}));
  b.pop_scope();
  b.set_name(logits, "logits");
  kiln::Model m = b.build({logits});

  passes::PassResult result = passes::fuse_activation(kiln::internal::graph(m));
  check_interface(kiln::internal::graph(m), result.graph);
  BOOST_TEST(result.report.changes == 2);
  BOOST_TEST(mentions(result.report, "into Conv 'fused'"));
  BOOST_TEST(mentions(result.report, "into Gemm 'fc'"));
  BOOST_TEST(count_op(result.graph, "Relu") == 1);
  BOOST_TEST(find_node(result.graph, "fused")->attrs.get_string("activation", "") == "Relu");
  BOOST_TEST(find_node(result.graph, "fc")->attrs.get_string("activation", "") == "Relu");
  BOOST_TEST(find_node(result.graph, "kept")->attrs.get_string("activation", "").empty());
  BOOST_TEST(relative_difference(kiln::internal::graph(m), result.graph) <= 1e-4);
}

BOOST_AUTO_TEST_CASE(fuses_nine_relus_of_resnet18_after_bn_folding) {
  const Graph& g = resnet18_graph();
  passes::PassResult unfolded = passes::fuse_activation(g);
  BOOST_TEST(unfolded.report.changes == 0);  // every Conv feeds a BatchNormalization

  passes::PassResult folded = passes::fold_batch_norm(g);
  passes::PassResult fused = passes::fuse_activation(folded.graph);
  check_interface(g, fused.graph);
  BOOST_TEST(fused.report.changes == 9);
  BOOST_TEST(count_op(fused.graph, "Relu") == 17 - 9);
  BOOST_TEST(mentions(fused.report, "into Conv 'conv1'"));
  for (int layer = 1; layer <= 4; ++layer)
    for (int block = 0; block < 2; ++block) {
      const std::string prefix = "layer" + std::to_string(layer) + "." + std::to_string(block) + ".";
      BOOST_TEST(find_node(fused.graph, prefix + "conv1")->attrs.get_string("activation", "") == "Relu", prefix);
      BOOST_TEST(find_node(fused.graph, prefix + "conv2")->attrs.get_string("activation", "").empty(), prefix);
    }
  BOOST_TEST(relative_difference(g, fused.graph) <= 1e-3);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(eliminate_dead_code)

BOOST_AUTO_TEST_CASE(removes_an_unused_branch) {
  Builder b;
  auto x = b.input("x", DType::f32, {4, 4});
  auto unused_input = b.input("mask", DType::f32, {4});
  b.constant("orphan", random_tensor({7}, 1));
  auto used = b.constant("used", random_tensor({4}, 2));
  b.push_scope("dead");
  auto dead_weight = b.constant("weight", random_tensor({4, 4}, 3));
  b.add(b.sigmoid(b.matmul(x, dead_weight)), unused_input);
  b.pop_scope();
  auto y = b.relu(b.mul(x, used));
  kiln::Model m = b.build({y});

  passes::PassResult result = passes::eliminate_dead_code(kiln::internal::graph(m));
  check_interface(kiln::internal::graph(m), result.graph);
  BOOST_TEST(result.report.changes == 5);
  BOOST_TEST(mentions(result.report, "removed MatMul 'dead'"));
  BOOST_TEST(mentions(result.report, "removed Sigmoid 'dead.sigmoid'"));
  BOOST_TEST(mentions(result.report, "removed Add 'dead.add'"));
  BOOST_TEST(mentions(result.report, "removed constant 'dead.weight'"));
  BOOST_TEST(mentions(result.report, "removed constant 'orphan'"));
  BOOST_TEST(result.graph.nodes().size() == 2u);
  BOOST_TEST(count_constants(result.graph) == 1);
  BOOST_TEST(result.graph.inputs().size() == 2u);  // "mask" stays: it is the interface
  BOOST_TEST(relative_difference(kiln::internal::graph(m), result.graph) == 0.0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(pack_weights)

BOOST_AUTO_TEST_CASE(packs_direct_convs_only) {
  Builder b;
  auto x = b.input("x", DType::f32, {1, 4, 9, 11});
  b.push_scope("tail");  // 6 output channels: the second block is half padding
  auto tail = b.conv2d(x, b.constant("weight", random_tensor({6, 4, 3, 3}, 1)), b.constant("bias", random_tensor({6}, 2)),
                       {.padding = {1, 1, 1, 1}});
  b.pop_scope();
  b.push_scope("grouped");  // 2 groups of 5 output channels, stride 2, dilation 2
  auto grouped = b.conv2d(tail, b.constant("weight", random_tensor({10, 3, 3, 3}, 3)), std::nullopt,
                          {.stride = {2, 2}, .padding = {2, 1, 0, 2}, .dilation = {2, 2}, .groups = 2});
  b.pop_scope();
  b.push_scope("pointwise");  // 1x1 stride 1: the GEMM template's
  auto pointwise = b.conv2d(grouped, b.constant("weight", random_tensor({8, 10, 1, 1}, 4)), std::nullopt);
  b.pop_scope();
  b.push_scope("depthwise");  // one input channel per group: the depthwise template's
  auto depthwise = b.conv2d(pointwise, b.constant("weight", random_tensor({8, 1, 3, 3}, 5)), std::nullopt,
                            {.padding = {1, 1, 1, 1}, .groups = 8});
  b.pop_scope();
  b.push_scope("narrow");  // 2 output channels: a block would be half padding
  auto narrow = b.conv2d(depthwise, b.constant("weight", random_tensor({2, 8, 3, 3}, 6)), std::nullopt);
  b.pop_scope();
  kiln::Model m = b.build({narrow});

  passes::PassResult result = passes::pack_weights(kiln::internal::graph(m), heuristics());
  check_interface(kiln::internal::graph(m), result.graph);
  BOOST_TEST(result.report.changes == 2);
  BOOST_TEST(mentions(result.report, "packed the weight of Conv 'tail' as OIhw4o [2, 4, 3, 3, 4]"));
  BOOST_TEST(mentions(result.report, "packed the weight of Conv 'grouped' as OIhw4o [4, 3, 3, 3, 4]"));
  for (const char* name : {"tail", "grouped"}) {
    const kiln::graph::Node* node = find_node(result.graph, name);
    BOOST_REQUIRE(node != nullptr);
    BOOST_TEST(node->attrs.get_string("weight_layout", "") == "OIhw4o", name);
    BOOST_TEST(node->attrs.get_int("out_channels", 0) == (std::string(name) == "tail" ? 6 : 10), name);
  }
  for (const char* name : {"pointwise", "depthwise", "narrow"})
    BOOST_TEST(!find_node(result.graph, name)->attrs.has("weight_layout"), name);

  // Channel m's taps sit at lane m % 4 of its group's block m / 4; the
  // padding lanes are zero.
  const Tensor& plain = *kiln::internal::graph(m).value(find_node(kiln::internal::graph(m), "grouped")->inputs[1]).constant;
  const Tensor& packed = *result.graph.value(find_node(result.graph, "grouped")->inputs[1]).constant;
  const auto from = plain.values<float>();
  const auto to = packed.values<float>();
  const std::int64_t taps = 3 * 3 * 3;
  for (std::int64_t t = 0; t < taps; ++t) {
    BOOST_TEST(to[(0 * taps + t) * 4 + 1] == from[1 * taps + t]);  // group 0, channel 1
    BOOST_TEST(to[(1 * taps + t) * 4 + 0] == from[4 * taps + t]);  // group 0, channel 4
    BOOST_TEST(to[(1 * taps + t) * 4 + 1] == 0.0f);                // group 0 padding
    BOOST_TEST(to[(2 * taps + t) * 4 + 0] == from[5 * taps + t]);  // group 1, channel 0
    BOOST_TEST(to[(3 * taps + t) * 4 + 3] == 0.0f);                // group 1 padding
  }
  // The reference reads either layout: same outputs, bit for bit.
  BOOST_TEST(relative_difference(kiln::internal::graph(m), result.graph) == 0.0);
  // Packing twice changes nothing.
  BOOST_TEST(passes::pack_weights(result.graph, heuristics()).report.changes == 0);
}

BOOST_AUTO_TEST_CASE(packs_what_the_templates_answer_and_nothing_without_an_answer) {
  // The pass asks which convolutions the direct template computes; it keeps
  // no rule of its own beyond a full block of output channels per group.
  Builder b;
  auto x = b.input("x", DType::f32, {1, 8, 16, 16});
  b.push_scope("pointwise");  // the GEMM template's, by the heuristic
  auto pointwise = b.conv2d(x, b.constant("weight", random_tensor({8, 8, 1, 1}, 1)), std::nullopt);
  b.pop_scope();
  b.push_scope("narrow");  // 2 output channels: never packed
  auto narrow = b.conv2d(pointwise, b.constant("weight", random_tensor({2, 8, 3, 3}, 2)), std::nullopt);
  b.pop_scope();
  const kiln::Model m = b.build({narrow});
  const kiln::graph::Graph& g = kiln::internal::graph(m);
  BOOST_TEST(passes::pack_weights(g, heuristics()).report.changes == 0);
  BOOST_TEST(passes::pack_weights(g, {}).report.changes == 0, "no question answered: nothing packed");
  std::vector<passes::ConvGeometry> asked;
  const passes::TemplateQueries always{.conv_uses_direct_template = [&](const passes::ConvGeometry& geometry) {
    asked.push_back(geometry);
    return true;
  }};
  const passes::PassResult packed = passes::pack_weights(g, always);
  BOOST_TEST(packed.report.changes == 1);
  BOOST_TEST(find_node(packed.graph, "pointwise")->attrs.get_string("weight_layout", "") == "OIhw4o");
  BOOST_REQUIRE(asked.size() == 1u);  // the narrow one is refused before asking
  BOOST_TEST(asked[0].in_channels == 8);
  BOOST_TEST(asked[0].out_h == 16);
  BOOST_TEST(asked[0].kernel_h == 1);
  BOOST_TEST(relative_difference(g, packed.graph) == 0.0);
}

BOOST_AUTO_TEST_CASE(keeps_fused_activations_and_runtime_weights) {
  Builder b;
  auto x = b.input("x", DType::f32, {1, 3, 6, 6});
  auto runtime_weight = b.input("w", DType::f32, {4, 3, 3, 3});
  b.push_scope("fused");
  auto fused = b.relu(b.conv2d(x, b.constant("weight", random_tensor({5, 3, 3, 3}, 1)), std::nullopt));
  b.pop_scope();
  b.push_scope("dynamic");
  auto dynamic = b.conv2d(x, runtime_weight, std::nullopt);
  b.pop_scope();
  kiln::Model m = b.build({fused, dynamic});
  passes::PassResult activated = passes::fuse_activation(kiln::internal::graph(m));
  passes::PassResult result = passes::pack_weights(activated.graph, heuristics());
  check_interface(kiln::internal::graph(m), result.graph);
  BOOST_TEST(result.report.changes == 1);
  const kiln::graph::Node* conv = find_node(result.graph, "fused");
  BOOST_TEST(conv->attrs.get_string("activation", "") == "Relu");
  BOOST_TEST(conv->attrs.get_string("weight_layout", "") == "OIhw4o");
  BOOST_TEST(!find_node(result.graph, "dynamic")->attrs.has("weight_layout"));
  BOOST_TEST(relative_difference(kiln::internal::graph(m), result.graph) == 0.0);
}

BOOST_AUTO_TEST_CASE(conv_checks_the_packed_layout) {
  Builder b;
  auto x = b.input("x", DType::f32, {1, 4, 5, 5});
  kiln::graph::Attributes packed;
  packed.set("weight_layout", std::string("OIhw4o"));
  packed.set("out_channels", std::int64_t{6});
  auto expect = [](auto build, const std::string& text) {
    BOOST_CHECK_EXCEPTION(build(), kiln::Error, [&](const kiln::Error& e) {
      return std::string(e.what()).find(text) != std::string::npos;
    });
  };
  // [2, 4, 3, 3, 4] holds 6 output channels; [1, ...] does not.
  auto ok = b.op("Conv", {x, b.constant("ok", random_tensor({2, 4, 3, 3, 4}, 1)), std::nullopt}, packed)[0];
  BOOST_TEST(b.shape(ok) == Shape({1, 6, 3, 3}));
  expect([&] { b.op("Conv", {x, b.constant("short", random_tensor({1, 4, 3, 3, 4}, 2)), std::nullopt}, packed); },
         "must be [2, 4, 3, 3, 4]");
  kiln::graph::Attributes unknown;
  unknown.set("weight_layout", std::string("OhwI"));
  expect([&] { b.op("Conv", {x, b.constant("w1", random_tensor({6, 4, 3, 3}, 3)), std::nullopt}, unknown); },
         "weight_layout");
  kiln::graph::Attributes orphan;
  orphan.set("out_channels", std::int64_t{6});
  expect([&] { b.op("Conv", {x, b.constant("w2", random_tensor({6, 4, 3, 3}, 4)), std::nullopt}, orphan); },
         "'out_channels' goes with weight_layout");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(slice_strided_pointwise_conv)

BOOST_AUTO_TEST_CASE(strided_1x1_convs_become_a_slice_and_a_gemm) {
  Builder b;
  auto x = b.input("x", DType::f32, {2, 16, 23, 25});
  b.push_scope("downsample");  // stride 2 on odd extents (to 12x13): the last row and column are read
  auto downsample = b.relu(b.conv2d(x, b.constant("weight", random_tensor({24, 16, 1, 1}, 1)),
                                    b.constant("bias", random_tensor({24}, 2)), {.stride = {2, 2}}));
  b.pop_scope();
  b.push_scope("uneven");  // strides 3 x 1 (to 8x25)
  auto uneven = b.conv2d(x, b.constant("weight", random_tensor({16, 16, 1, 1}, 3)), std::nullopt, {.stride = {3, 1}});
  b.pop_scope();
  b.push_scope("padded");  // padding reads zeros: not a plain subsample
  auto padded = b.conv2d(x, b.constant("weight", random_tensor({16, 16, 1, 1}, 4)), std::nullopt,
                         {.stride = {2, 2}, .padding = {1, 1, 1, 1}});
  b.pop_scope();
  b.push_scope("narrow");  // 8 output channels: too few to pay
  auto narrow = b.conv2d(x, b.constant("weight", random_tensor({8, 16, 1, 1}, 5)), std::nullopt, {.stride = {2, 2}});
  b.pop_scope();
  b.push_scope("window");  // 3x3: not pointwise
  auto window = b.conv2d(x, b.constant("weight", random_tensor({16, 16, 3, 3}, 6)), std::nullopt, {.stride = {2, 2}});
  b.pop_scope();
  b.push_scope("small");  // stride 3 to 8x9: too few output pixels for a GEMM to pay
  auto small = b.conv2d(x, b.constant("weight", random_tensor({16, 16, 1, 1}, 7)), std::nullopt, {.stride = {3, 3}});
  b.pop_scope();
  kiln::Model m = b.build({downsample, uneven, padded, narrow, window, small});

  passes::PassResult result = passes::slice_strided_pointwise_conv(kiln::internal::graph(m));
  check_interface(kiln::internal::graph(m), result.graph);
  BOOST_TEST(result.report.changes == 2);
  BOOST_TEST(mentions(result.report, "sliced the input of Conv 'downsample' (strides 2x2)"));
  BOOST_TEST(mentions(result.report, "sliced the input of Conv 'uneven' (strides 3x1)"));
  BOOST_TEST(count_op(result.graph, "Slice") == 2);
  for (const char* name : {"downsample", "uneven"})
    BOOST_TEST((find_node(result.graph, name)->attrs.get_ints("strides", {}) == std::vector<std::int64_t>{1, 1}), name);
  for (const char* name : {"padded", "narrow", "window", "small"})
    BOOST_TEST((find_node(result.graph, name)->attrs.get_ints("strides", {}) != std::vector<std::int64_t>{1, 1}), name);
  // The same products in the same order: bit for bit.
  BOOST_TEST(relative_difference(kiln::internal::graph(m), result.graph) == 0.0);
  // Once sliced, a Conv has stride 1: a second run changes nothing.
  BOOST_TEST(passes::slice_strided_pointwise_conv(result.graph).report.changes == 0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(narrow_before_gather)

namespace {

// x[:, index] along `axis`, dropping it (keep_axis: as a [.., 1, ..] slice).
Builder::Value take(Builder& b, Builder::Value x, std::int64_t axis, std::int64_t index, bool keep_axis = false) {
  kiln::graph::Attributes attrs;
  attrs.set("axis", axis);
  attrs.set("indices", std::vector<std::int64_t>{index});
  attrs.set("indices_shape", keep_axis ? std::vector<std::int64_t>{1} : std::vector<std::int64_t>{});
  return b.op("Gather", {x}, attrs).at(0);
}

// A pre-norm transformer block on [2, 5, 8] (2 heads of 4), then a final
// LayerNorm and GELU, as ViT ends before taking its class token.
Builder::Value encoder_block(Builder& b, Builder::Value x) {
  auto ln = [&](Builder::Value v, unsigned seed) {
    const std::string name = "ln" + std::to_string(seed);
    return b.layer_norm(v, b.constant(name + "_scale", random_tensor({8}, seed)),
                        b.constant(name + "_bias", random_tensor({8}, seed + 1)));
  };
  b.push_scope("block");
  auto qkv = b.add(b.matmul(ln(x, 1), b.constant("in_proj", random_tensor({8, 24}, 3))),
                   b.constant("in_bias", random_tensor({24}, 4)));
  qkv = b.transpose(b.reshape(qkv, {2, 5, 3, 2, 4}), {2, 0, 3, 1, 4});  // [3, 2, heads, 5, 4]
  auto attention = b.op("Attention", {take(b, qkv, 0, 0), take(b, qkv, 0, 1), take(b, qkv, 0, 2)}, {}).at(0);
  auto context = b.reshape(b.transpose(attention, {0, 2, 1, 3}), {2, 5, 8});
  auto projected = b.add(b.matmul(context, b.constant("out_proj", random_tensor({8, 8}, 5))),
                         b.constant("out_bias", random_tensor({8}, 6)));
  auto y = b.add(projected, x);
  y = b.add(y, b.gelu(b.matmul(ln(y, 7), b.constant("mlp", random_tensor({8, 8}, 9)))));
  b.pop_scope();
  return ln(y, 10);
}

}  // namespace

BOOST_AUTO_TEST_CASE(computes_only_the_gathered_token) {
  Builder b;
  auto x = b.input("x", DType::f32, {2, 5, 8});
  auto token = take(b, encoder_block(b, x), 1, 0);  // [2, 8]
  kiln::Model m = b.build({token});

  passes::PassResult result = passes::narrow_before_gather(kiln::internal::graph(m));
  check_interface(kiln::internal::graph(m), result.graph);
  BOOST_TEST(result.report.changes == 1);
  BOOST_TEST(mentions(result.report, "computed only index 0 of axis 1 before Gather"));
  // Every MatMul after the Q/K/V projection and the attention run on one token.
  for (const auto& node : result.graph.nodes()) {
    const Shape& y = result.graph.value(node.outputs[0]).type.shape;
    if (node.op == "Attention") BOOST_TEST(y == Shape({2, 2, 1, 4}));
    if (node.op == "MatMul" && node.name.find("in_proj") == std::string::npos && y.back() != 24)
      BOOST_TEST(y == Shape({2, 1, 8}), node.name);
  }
  BOOST_TEST(count_op(result.graph, "Attention") == 1);
  BOOST_TEST(count_op(result.graph, "LayerNormalization") == 3);
  // Each output element is computed by the same ops in the same order.
  BOOST_TEST(relative_difference(kiln::internal::graph(m), result.graph) == 0.0);
  // A Gather keeping its axis narrows the same way.
  Builder kept;
  auto kept_x = kept.input("x", DType::f32, {2, 5, 8});
  kiln::Model keep_axis = kept.build({take(kept, encoder_block(kept, kept_x), 1, 3, true)});
  passes::PassResult kept_result = passes::narrow_before_gather(kiln::internal::graph(keep_axis));
  BOOST_TEST(kept_result.report.changes == 1);
  BOOST_TEST(relative_difference(kiln::internal::graph(keep_axis), kept_result.graph) == 0.0);
}

BOOST_AUTO_TEST_CASE(values_needed_whole_are_computed_whole) {
  Builder b;
  auto x = b.input("x", DType::f32, {2, 5, 8});
  auto normalised = b.layer_norm(x, b.constant("scale", random_tensor({8}, 1)), b.constant("bias", random_tensor({8}, 2)));
  b.push_scope("softmax");  // along the gathered axis: every token feeds token 0
  auto mixed = take(b, b.softmax(b.gelu(x), 1), 1, 0);
  b.pop_scope();
  // `normalised` is also a graph output: the Gather reads it whole.
  kiln::Model m = b.build({normalised, take(b, normalised, 1, 0), mixed});
  passes::PassResult result = passes::narrow_before_gather(kiln::internal::graph(m));
  check_interface(kiln::internal::graph(m), result.graph);
  BOOST_TEST(result.report.changes == 0);
  BOOST_TEST(count_op(result.graph, "LayerNormalization") == 1);
  BOOST_TEST(relative_difference(kiln::internal::graph(m), result.graph) == 0.0);
}

BOOST_AUTO_TEST_CASE(switch_turns_the_pass_off) {
  Builder b;
  auto x = b.input("x", DType::f32, {2, 5, 8});
  kiln::Model m = b.build({take(b, b.gelu(x), 1, 2)});
  const passes::PipelineResult off =
      passes::run_compile_passes(kiln::internal::graph(m), gpu_passes(kiln::Settings().with("narrow_gather", "off")));
  for (const passes::PassReport& report : off.reports)
    if (report.pass == "narrow_before_gather") {
      BOOST_TEST(report.changes == 0);
      BOOST_TEST(report.details.at(0) == "off: setting narrow_gather=off (CompileOptions::settings)");
    }
  BOOST_TEST(passes::narrow_before_gather(kiln::internal::graph(m)).report.changes == 1);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(pipeline)

BOOST_AUTO_TEST_CASE(compile_passes_on_resnet18) {
  const Graph& g = resnet18_graph();
  passes::PipelineResult result = passes::run_compile_passes(g, gpu_passes());
  check_interface(g, result.graph);
  // The order that matters: BN folding before weight packing (it scales OIHW
  // weights), packing before dead-code removal (which drops the OIHW copies).
  auto position = [&](const std::string& pass) {
    const auto at = std::find_if(result.reports.begin(), result.reports.end(),
                                 [&](const passes::PassReport& r) { return r.pass == pass; });
    BOOST_TEST_REQUIRE((at != result.reports.end()), pass << " did not run");
    return static_cast<std::size_t>(at - result.reports.begin());
  };
  const std::size_t constants = position("fold_constants"), batch_norm = position("fold_batch_norm");
  const std::size_t activation = position("fuse_activation"), packing = position("pack_weights");
  const std::size_t dead_code = position("eliminate_dead_code");
  BOOST_TEST(constants < batch_norm);
  BOOST_TEST(batch_norm < activation);
  BOOST_TEST(activation < packing);
  BOOST_TEST(packing < dead_code);
  BOOST_TEST(dead_code < position("recognise_layer_norm"));
  BOOST_TEST(position("recognise_layer_norm") < position("recognise_gelu"));
  BOOST_TEST(result.reports[constants].changes == 0);
  BOOST_TEST(result.reports[batch_norm].changes == 20);
  BOOST_TEST(result.reports[activation].changes == 9);
  // At 32 px layer4 runs on 2x2 and 1x1 maps: its stride-2 3x3 only reads
  // the image with a 2x2 corner of its window, and the three 3x3s on the 1x1
  // map only with their centre tap (then they are 1x1 GEMMs, not packed).
  const std::size_t trimming = position("trim_conv_window");
  BOOST_TEST(activation < trimming);
  BOOST_TEST(trimming < packing);
  BOOST_TEST(result.reports[trimming].changes == 4);
  BOOST_TEST(mentions(result.reports[trimming], "Conv 'layer4.1.conv2': 3x3 window -> 1x1"));
  // The 1x1 stride-2 downsamples output at most 4x4 pixels at 32 px: too
  // few for slicing them into GEMMs to pay.
  const std::size_t slicing = position("slice_strided_pointwise_conv");
  BOOST_TEST(trimming < slicing);
  BOOST_TEST(slicing < packing);
  BOOST_TEST(result.reports[slicing].changes == 0);
  // Every other ResNet-18 conv goes to the direct template: the 7x7 stem,
  // the 3x3s and the 1x1 stride-2 downsamples.
  BOOST_TEST(result.reports[packing].changes == 17);
  // The BatchNormalizations' 80 statistics, the 20 unscaled weights, the 4
  // untrimmed and the 17 unpacked OIHW weights.
  BOOST_TEST(result.reports[dead_code].changes == 121);
  BOOST_TEST(count_op(result.graph, "BatchNormalization") == 0);
  BOOST_TEST(count_op(result.graph, "Relu") == 8);
  BOOST_TEST(count_constants(result.graph) == 20 + 20 + 2);  // packed or trimmed weights, folded biases, fc
  const std::string text = passes::report_str(result.reports[batch_norm]);
  BOOST_TEST(text.find("fold_batch_norm: 20 changes\n") == 0u);
  BOOST_TEST(text.find("  folded BatchNormalization 'bn1' into Conv 'conv1'\n") != std::string::npos);
  BOOST_TEST(mentions(result.reports[packing], "packed the weight of Conv 'conv1' as OIhw4o [16, 3, 7, 7, 4]"));
  BOOST_TEST(relative_difference(g, result.graph) <= 1e-3);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(attention)

// softmax(Q K^T / sqrt(D) + mask) V as torch's SegFormer writes it (Div on
// the scores) or with the scale split onto Q and K^T as torch's exported
// scaled_dot_product_attention does; K^T from a Transpose of [B, H, Lk, D].
Graph attention_graph(bool split_scale, bool with_mask, bool scores_read_twice = false) {
  Builder b("attention");
  auto q = b.input("q", DType::f32, {1, 2, 5, 8});
  auto k = b.input("k", DType::f32, {1, 2, 7, 8});
  auto v = b.input("v", DType::f32, {1, 2, 7, 4});
  auto kt = b.transpose(k, {0, 1, 3, 2});
  Builder::Value scores;
  if (split_scale) {
    auto root = b.constant("root_scale", Tensor::scalar_f32(static_cast<float>(std::pow(8.0, -0.25))));
    scores = b.matmul(b.mul(q, root), b.mul(kt, root));
  } else {
    scores = b.div(b.matmul(q, kt), b.constant("sqrt_d", Tensor::scalar_f32(static_cast<float>(std::sqrt(8.0)))));
  }
  if (with_mask) scores = b.add(scores, b.constant("mask", random_tensor({1, 1, 1, 7}, 3)));
  auto context = b.matmul(b.softmax(scores, -1), v);
  std::vector<Builder::Value> outputs = {context};
  if (scores_read_twice) outputs.push_back(scores);
  return kiln::internal::graph(b.build(outputs));
}

BOOST_AUTO_TEST_CASE(recognises_scaled_masked_attention) {
  for (const bool split_scale : {false, true})
    for (const bool with_mask : {false, true}) {
      const Graph g = attention_graph(split_scale, with_mask);
      passes::PassResult result = passes::recognise_attention(g);
      check_interface(g, result.graph);
      BOOST_TEST(result.report.changes == 1);
      BOOST_TEST(count_op(result.graph, "Attention") == 1);
      BOOST_TEST(count_op(result.graph, "Softmax") == 0);
      BOOST_TEST(count_op(result.graph, "MatMul") == 0);
      // The Transpose of K is absorbed: the kernel reads K's rows.
      BOOST_TEST(count_op(result.graph, "Transpose") == 0);
      const kiln::graph::Node* attention = &result.graph.nodes().back();
      BOOST_REQUIRE(attention->op == "Attention");
      BOOST_TEST(attention->attrs.get_float("scale", 0.0) == 1.0 / std::sqrt(8.0), boost::test_tools::tolerance(1e-6));
      BOOST_TEST(attention->attrs.get_int("k_transposed", -1) == 0);
      BOOST_TEST(relative_difference(g, result.graph) <= 1e-5);
    }
}

BOOST_AUTO_TEST_CASE(keeps_attention_whose_scores_are_read_elsewhere) {
  const Graph g = attention_graph(false, true, true);
  passes::PassResult result = passes::recognise_attention(g);
  BOOST_TEST(result.report.changes == 0);
  BOOST_TEST(count_op(result.graph, "Softmax") == 1);
  BOOST_TEST(count_op(result.graph, "Attention") == 0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(silu)

// conv -> SiLU spelled as torch.onnx.export writes it, with the Mul's operands
// in the given order, then a second SiLU on a graph input in the other order.
Graph silu_graph(bool sigmoid_first) {
  Builder b("silu");
  auto x = b.input("x", DType::f32, {1, 3, 6, 6});
  auto w = b.constant("w", random_tensor({4, 3, 3, 3}, 21));
  auto y = b.conv2d(x, w, std::nullopt, {.padding = {1, 1, 1, 1}});
  auto gate = b.sigmoid(y);
  y = sigmoid_first ? b.mul(gate, y) : b.mul(y, gate);
  auto z = b.input("z", DType::f32, {4, 6, 6});
  auto other = sigmoid_first ? b.mul(z, b.sigmoid(z)) : b.mul(b.sigmoid(z), z);
  return kiln::internal::graph(b.build({b.add(y, other)}));
}

BOOST_AUTO_TEST_CASE(recognises_silu_in_either_operand_order) {
  for (const bool sigmoid_first : {false, true}) {
    const Graph g = silu_graph(sigmoid_first);
    passes::PassResult result = passes::recognise_silu(g);
    check_interface(g, result.graph);
    BOOST_TEST(result.report.changes == 2);
    BOOST_TEST(count_op(result.graph, "Silu") == 2);
    BOOST_TEST(count_op(result.graph, "Sigmoid") == 0);
    BOOST_TEST(count_op(result.graph, "Mul") == 0);
    // The Silu reads the convolution's output directly and is its only reader,
    // which is what lets epilogue fusion take it.
    const std::vector<int> uses = result.graph.use_counts();
    for (const auto& node : result.graph.nodes())
      if (node.op == "Conv") BOOST_TEST(uses[static_cast<std::size_t>(node.outputs[0])] == 1);
    BOOST_TEST(mentions(result.report, "with Silu"));
    BOOST_TEST(relative_difference(g, result.graph) <= 1e-6);
    for (const DType half : {DType::f16, DType::bf16}) {
      const Graph narrow = passes::convert_float_type(g, {.to = half, .keep_io_types = false}).graph;
      BOOST_TEST(count_op(passes::recognise_silu(narrow).graph, "Silu") == 2);
    }
  }
}

BOOST_AUTO_TEST_CASE(keeps_sigmoid_read_elsewhere_and_other_products) {
  Builder b("not_silu");
  auto x = b.input("x", DType::f32, {2, 5});
  auto y = b.input("y", DType::f32, {2, 5});
  auto shared_gate = b.sigmoid(x);
  auto read_twice = b.add(b.mul(x, shared_gate), shared_gate);  // the gate has a second reader
  auto gate_as_output = b.sigmoid(y);
  auto exported = b.mul(y, gate_as_output);                    // the gate is also a graph output
  auto other_operand = b.mul(y, b.sigmoid(x));                 // sigmoid of another value
  auto squared = b.sigmoid(y);
  auto gate_squared = b.mul(squared, squared);                 // sigmoid(y)^2
  const Graph g = kiln::internal::graph(b.build({read_twice, exported, gate_as_output, other_operand, gate_squared}));
  passes::PassResult result = passes::recognise_silu(g);
  check_interface(g, result.graph);
  BOOST_TEST(result.report.changes == 0);
  BOOST_TEST(count_op(result.graph, "Silu") == 0);
  BOOST_TEST(count_op(result.graph, "Sigmoid") == 4);
}

BOOST_AUTO_TEST_CASE(pipeline_turns_efficientnet_silus_into_silu_and_keeps_the_se_gates) {
  const kiln::Model model = kiln::models::build("efficientnet_b0", {.image_size = 32, .num_classes = 10, .seed = 3});
  const Graph& g = kiln::internal::graph(model);
  const int sigmoids = count_op(g, "Sigmoid");
  passes::PipelineResult result = passes::run_compile_passes(g, gpu_passes());
  check_interface(g, result.graph);
  const auto report = std::find_if(result.reports.begin(), result.reports.end(),
                                   [](const passes::PassReport& r) { return r.pass == "recognise_silu"; });
  BOOST_REQUIRE((report != result.reports.end()));
  // Stem and head, each block's expansion (not the first block's) and
  // depthwise convolution, and each squeeze-excitation's reduction: 49 SiLUs;
  // the 16 squeeze-excitation gates are plain sigmoids that multiply another value.
  BOOST_TEST(report->changes == 49);
  BOOST_TEST(count_op(result.graph, "Silu") == 49);
  BOOST_TEST(count_op(result.graph, "Sigmoid") == sigmoids - 49);
  BOOST_TEST(count_op(result.graph, "Sigmoid") == 16);
  BOOST_TEST(relative_difference(g, result.graph) <= 1e-4);
}

BOOST_AUTO_TEST_CASE(silu_is_kiln_op_the_onnx_importer_never_produces) {
  const kiln::graph::OpSchema& schema = kiln::graph::get_op("Silu");
  BOOST_TEST(schema.summary.find("kiln") != std::string::npos);
  const std::vector<std::string> importable = kiln::onnx_supported_ops();
  BOOST_TEST((std::find(importable.begin(), importable.end(), "Silu") == importable.end()));
  BOOST_TEST((std::find(importable.begin(), importable.end(), "Sigmoid") != importable.end()));
#if KILN_HAVE_ONNX
  // A file that names kiln's op is refused as an unsupported op, not read as SiLU.
  onnx::ModelProto proto;
  proto.set_ir_version(8);
  auto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(17);
  auto* input = proto.mutable_graph()->add_input();
  input->set_name("x");
  auto* tensor_type = input->mutable_type()->mutable_tensor_type();
  tensor_type->set_elem_type(onnx::TensorProto_DataType_FLOAT);
  tensor_type->mutable_shape()->add_dim()->set_dim_value(4);
  auto* node = proto.mutable_graph()->add_node();
  node->set_op_type("Silu");
  node->set_name("act");
  node->add_input("x");
  node->add_output("y");
  proto.mutable_graph()->add_output()->set_name("y");
  try {
    kiln::load_onnx_bytes(proto.SerializeAsString(), "silu.onnx", "", {});
    BOOST_FAIL("a Silu node was imported");
  } catch (const kiln::Error& e) {
    BOOST_TEST((e.kind() == kiln::ErrorKind::Unsupported));
    BOOST_TEST(std::string(e.what()).find("Silu: 'act'") != std::string::npos, e.what());
  }
#endif
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(scale_conv_weights)

struct SqueezeExcitation {
  std::int64_t batch = 1;
  std::int64_t size = 48;           // spatial extent of x
  std::int64_t out_channels = 4;    // of the projection
  std::int64_t groups = 1;          // of the projection
  bool gate_first = false;          // Mul(gate, x) instead of Mul(x, gate)
  bool gate_is_full_tensor = false;  // the "scale" has x's shape: not per channel
  bool product_read_twice = false;
  bool constant_gate = false;       // a constant [1, 8, 1, 1] scale
};

// x [N, 8, S, S] -> gate = sigmoid(1x1 conv(pool(x))) -> Mul(x, gate) -> 1x1 projection with bias.
Graph squeeze_excitation(const SqueezeExcitation& o) {
  Builder b("se");
  auto x = b.input("x", DType::f32, {o.batch, 8, o.size, o.size});
  auto gate = b.sigmoid(b.conv2d(b.global_avg_pool(x), b.constant("fc", random_tensor({8, 8, 1, 1}, 31)),
                                 b.constant("fc_bias", random_tensor({8}, 32))));
  if (o.gate_is_full_tensor) gate = b.sigmoid(x);
  if (o.constant_gate) gate = b.constant("gate", random_tensor({1, 8, 1, 1}, 35));
  auto scaled = o.gate_first ? b.mul(gate, x) : b.mul(x, gate);
  auto w = b.constant("proj", random_tensor({o.out_channels, 8 / o.groups, 1, 1}, 33));
  auto y = b.conv2d(scaled, w, b.constant("proj_bias", random_tensor({o.out_channels}, 34)), {.groups = o.groups});
  std::vector<Builder::Value> outputs = {y};
  if (o.product_read_twice) outputs.push_back(b.relu(scaled));
  return kiln::internal::graph(b.build(outputs));
}

BOOST_AUTO_TEST_CASE(moves_the_channel_scale_onto_a_smaller_weight) {
  for (const bool gate_first : {false, true}) {
    const Graph g = squeeze_excitation({.gate_first = gate_first});
    passes::PassResult result = passes::scale_conv_weights(g);
    check_interface(g, result.graph);
    BOOST_TEST(result.report.changes == 1);
    BOOST_TEST(mentions(result.report, "(32 elements instead of 18432)"));
    const kiln::graph::Node* projection = find_node(result.graph, "conv_1");
    BOOST_REQUIRE(projection != nullptr);
    const kiln::graph::Node& conv = *projection;
    // The projection reads x itself and a weight that the Mul scales.
    BOOST_TEST(result.graph.value(conv.inputs[0]).name == "x");
    const kiln::graph::NodeId weight_producer = result.graph.value(conv.inputs[1]).producer;
    BOOST_REQUIRE(weight_producer != kiln::graph::kNoNode);
    BOOST_TEST(result.graph.node(weight_producer).op == "Mul");
    BOOST_TEST(type_str(result.graph.value(conv.inputs[1]).type) == "f32[4, 8, 1, 1]");
    BOOST_TEST(relative_difference(g, result.graph) <= 1e-5);
  }
}

BOOST_AUTO_TEST_CASE(keeps_the_scale_where_moving_it_is_wrong_or_no_cheaper) {
  const SqueezeExcitation cases[] = {
      {.batch = 2},                   // each sample would need its own weight
      {.size = 40},                   // x (12800 elements) is too small to pay for a dispatch
      {.out_channels = 2304},         // the weight (18432 elements) is no smaller than x
      {.groups = 2},                  // grouped weight: input channels are not its second axis
      {.gate_is_full_tensor = true},  // not one scale per channel
      {.product_read_twice = true},   // the scaled activation is still needed
      {.constant_gate = true},        // the weight's Mul would multiply constants at every call
  };
  for (const SqueezeExcitation& c : cases) {
    const Graph g = squeeze_excitation(c);
    passes::PassResult result = passes::scale_conv_weights(g);
    check_interface(g, result.graph);
    BOOST_TEST(result.report.changes == 0);
    // The projection still reads the scaled activation, and its weight is the constant.
    const kiln::graph::Node* projection = find_node(result.graph, "conv_1");
    BOOST_REQUIRE(projection != nullptr);
    const kiln::graph::Node& conv = *projection;
    const kiln::graph::NodeId input_producer = result.graph.value(conv.inputs[0]).producer;
    BOOST_REQUIRE(input_producer != kiln::graph::kNoNode);
    BOOST_TEST(result.graph.node(input_producer).op == "Mul");
    BOOST_TEST(result.graph.value(conv.inputs[1]).name == "proj");
    BOOST_TEST(relative_difference(g, result.graph) == 0.0);
  }
}

BOOST_AUTO_TEST_CASE(moves_efficientnet_squeeze_excitation_scales_at_224) {
  // The 11 projections from 112x112 to 14x14 have weights smaller than their
  // input; the 5 at 7x7 keep the multiply on the activation.
  const kiln::Model model = kiln::models::build("efficientnet_b0", {.image_size = 224, .seed = 3});
  passes::PipelineResult result = passes::run_compile_passes(kiln::internal::graph(model), gpu_passes());
  const auto report = std::find_if(result.reports.begin(), result.reports.end(),
                                   [](const passes::PassReport& r) { return r.pass == "scale_conv_weights"; });
  BOOST_REQUIRE((report != result.reports.end()));
  BOOST_TEST(report->changes == 11);
  BOOST_TEST(mentions(*report, "moved the channel scale 'features.2.1.block.2.mul_1' onto the weight of Conv "
                               "'features.2.1.block.3.0' (3456 elements instead of 451584)"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(transpose_to_reshape)

BOOST_AUTO_TEST_CASE(transpose_of_unit_axes_becomes_a_view) {
  Builder b("transposes");
  auto single_head = b.input("single_head", DType::f32, {1, 5, 1, 4});
  auto two_heads = b.input("two_heads", DType::f32, {1, 5, 2, 4});
  auto column = b.input("column", DType::f32, {1, 1, 3});
  auto a = b.transpose(single_head, {0, 2, 1, 3});  // [1, 1, 5, 4]: the same linear order
  auto kept = b.transpose(two_heads, {0, 2, 1, 3});  // moves 5 past 2: a real transpose
  auto reversed = b.op("Transpose", {column}, {})[0];  // default perm: [3, 1, 1]
  auto swapped = b.transpose(single_head, {0, 3, 2, 1});  // moves 4 past 5: a real transpose
  const Graph g = kiln::internal::graph(b.build({b.relu(a), kept, reversed, swapped}));
  passes::PassResult result = passes::transpose_to_reshape(g);
  check_interface(g, result.graph);
  BOOST_TEST(result.report.changes == 2);
  BOOST_TEST(count_op(result.graph, "Transpose") == 2);
  BOOST_TEST(count_op(result.graph, "Reshape") == 2);
  BOOST_TEST(mentions(result.report, "f32[1, 5, 1, 4] -> f32[1, 1, 5, 4] moves only axes of extent 1"));
  BOOST_TEST(relative_difference(g, result.graph) == 0.0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(trims_conv_taps_that_only_read_padding) {
  Builder b("aspp");
  auto x = b.input("x", DType::f32, {1, 4, 14, 14});
  auto w = [&](const std::string& name, std::uint64_t seed) {
    return b.constant(name, random_tensor({3, 4, 3, 3}, seed));
  };
  // Rate 24 on 14x14: every off-centre tap lands in the padding -> 1x1.
  auto far = b.conv2d(x, w("w_far", 1), std::nullopt, {.padding = {24, 24, 24, 24}, .dilation = {24, 24}});
  // Rate 12: the taps at +-12 reach the image for the border outputs: kept.
  auto near = b.conv2d(x, w("w_near", 2), std::nullopt, {.padding = {12, 12, 12, 12}, .dilation = {12, 12}});
  // Rows only: dilation 20 vertically, 1 horizontally -> 1x3.
  auto rows = b.conv2d(x, w("w_rows", 3), std::nullopt, {.padding = {20, 1, 20, 1}, .dilation = {20, 1}});
  // An ordinary 3x3 with padding 1: kept.
  auto plain = b.conv2d(x, w("w_plain", 4), std::nullopt, {.padding = {1, 1, 1, 1}});
  const Graph g = kiln::internal::graph(b.build({far, near, rows, plain}));
  passes::PassResult result = passes::trim_conv_window(g);
  check_interface(g, result.graph);
  BOOST_TEST(result.report.changes == 2);
  BOOST_TEST(mentions(result.report, "3x3 window -> 1x1"));
  BOOST_TEST(mentions(result.report, "3x3 window -> 1x3"));
  std::vector<Shape> weights;
  for (const auto& node : result.graph.nodes())
    if (node.op == "Conv") weights.push_back(result.graph.value(node.inputs[1]).type.shape);
  BOOST_TEST((weights == std::vector<Shape>{{3, 4, 1, 1}, {3, 4, 3, 3}, {3, 4, 1, 3}, {3, 4, 3, 3}}));
  // Exact: the dropped taps only ever multiplied zeros.
  BOOST_TEST(relative_difference(g, result.graph) <= 1e-6);
}

BOOST_AUTO_TEST_SUITE(conv_before_upsample)

// Builder has no Resize: the one the dense-prediction models use.
Builder::Value resize_to(Builder& b, Builder::Value x, std::int64_t size) {
  Shape sizes = b.shape(x);
  sizes[2] = sizes[3] = size;
  kiln::graph::Attributes attrs;
  attrs.set("mode", std::string("linear"));
  attrs.set("coordinate_transformation_mode", std::string("pytorch_half_pixel"));
  attrs.set("sizes", std::vector<std::int64_t>(sizes.begin(), sizes.end()));
  return b.op("Resize", {x}, attrs).at(0);
}

struct DecodeHead {
  bool full_resolution_part = true;  // a part that is not resized (takes the bias)
  bool bias = true;
  bool relu = true;
};

// Parts at 4x4 and 2x2 upsampled to 8x8 (and one 8x8 part), concatenated,
// fused by a 1x1 convolution with bias and Relu.
Graph decode_head(const DecodeHead& o) {
  Builder b("head");
  std::vector<Builder::Value> parts = {resize_to(b, b.input("a", DType::f32, {1, 3, 4, 4}), 8)};
  if (o.full_resolution_part) parts.push_back(b.input("b", DType::f32, {1, 5, 8, 8}));
  parts.push_back(resize_to(b, b.input("c", DType::f32, {1, 2, 2, 2}), 8));
  const std::int64_t channels = o.full_resolution_part ? 10 : 5;
  auto bias = o.bias ? std::optional(b.constant("bias", random_tensor({6}, 41))) : std::nullopt;
  auto y = b.conv2d(b.concat(parts, 1), b.constant("w", random_tensor({6, channels, 1, 1}, 40)), bias);
  if (o.relu) y = b.relu(y);
  return kiln::internal::graph(b.build({y}));
}

BOOST_AUTO_TEST_CASE(convolves_upsampled_parts_before_their_resize) {
  for (const DecodeHead& o : {DecodeHead{}, DecodeHead{.full_resolution_part = false},
                              DecodeHead{.bias = false, .relu = false}}) {
    const Graph g = passes::fuse_activation(decode_head(o)).graph;
    passes::PassResult result = passes::conv_before_upsample(g);
    check_interface(g, result.graph);
    BOOST_TEST(result.report.changes == 1);
    const std::string moved = o.full_resolution_part ? "3 concatenated inputs, 2 of them" : "2 concatenated inputs, 2 of them";
    BOOST_TEST(mentions(result.report, moved + " convolved before upsampling"), result.report.details.front());
    BOOST_TEST(count_op(result.graph, "Concat") == 0);
    BOOST_TEST(count_op(result.graph, "Conv") == (o.full_resolution_part ? 3 : 2));
    // Each Resize now upsamples the 6 output channels from its part's own size.
    std::vector<std::string> resized;
    for (const auto& node : result.graph.nodes())
      if (node.op == "Resize") resized.push_back(type_str(result.graph.value(node.inputs[0]).type));
    BOOST_TEST((resized == std::vector<std::string>{"f32[1, 6, 4, 4]", "f32[1, 6, 2, 2]"}));
    BOOST_TEST(count_op(result.graph, "Relu") == (o.relu ? 1 : 0));
    BOOST_TEST(relative_difference(g, result.graph) <= 1e-5);
  }
}

BOOST_AUTO_TEST_CASE(full_resolution_parts_share_one_conv) {
  // ASPP-like: two branches at full resolution around a pooled branch
  // upsampled from 1x1; the full-resolution branches keep one Concat and one
  // Conv (on the weight's non-adjacent column ranges), the pooled one is
  // convolved at 1x1.
  Builder b("aspp");
  auto pooled = resize_to(b, b.input("pooled", DType::f32, {1, 5, 1, 1}), 8);
  auto parts = std::vector<Builder::Value>{b.input("p1", DType::f32, {1, 3, 8, 8}), pooled,
                                           b.input("p2", DType::f32, {1, 4, 8, 8})};
  auto y = b.relu(b.conv2d(b.concat(parts, 1), b.constant("w", random_tensor({6, 12, 1, 1}, 45)),
                           b.constant("bias", random_tensor({6}, 46))));
  const Graph g = passes::fuse_activation(kiln::internal::graph(b.build({y}))).graph;
  passes::PassResult result = passes::conv_before_upsample(g);
  check_interface(g, result.graph);
  BOOST_TEST(mentions(result.report, "3 concatenated inputs, 1 of them convolved before upsampling"));
  BOOST_TEST(count_op(result.graph, "Conv") == 2);
  BOOST_TEST(count_op(result.graph, "Concat") == 1);
  BOOST_TEST(count_op(result.graph, "Resize") == 1);
  BOOST_TEST(relative_difference(g, result.graph) <= 1e-5);
}

BOOST_AUTO_TEST_CASE(keeps_convs_where_moving_is_wrong_or_no_cheaper) {
  // A part downsampled (16x16 -> 8x8): convolving first would cost more.
  {
    Builder b("down");
    auto parts = std::vector<Builder::Value>{resize_to(b, b.input("a", DType::f32, {1, 3, 16, 16}), 8),
                                             b.input("b", DType::f32, {1, 2, 8, 8})};
    auto y = b.conv2d(b.concat(parts, 1), b.constant("w", random_tensor({4, 5, 1, 1}, 42)), std::nullopt);
    const Graph g = kiln::internal::graph(b.build({y}));
    BOOST_TEST(passes::conv_before_upsample(g).report.changes == 0);
  }
  // A 3x3 convolution mixes pixels: it does not commute with the Resize.
  {
    Builder b("window");
    auto parts = std::vector<Builder::Value>{resize_to(b, b.input("a", DType::f32, {1, 3, 4, 4}), 8),
                                             b.input("b", DType::f32, {1, 2, 8, 8})};
    auto y = b.conv2d(b.concat(parts, 1), b.constant("w", random_tensor({4, 5, 3, 3}, 43)), std::nullopt,
                      {.padding = {1, 1, 1, 1}});
    const Graph g = kiln::internal::graph(b.build({y}));
    BOOST_TEST(passes::conv_before_upsample(g).report.changes == 0);
  }
  // The concatenation is read elsewhere too: it must still be built.
  {
    Builder b("shared");
    auto cat = b.concat({resize_to(b, b.input("a", DType::f32, {1, 3, 4, 4}), 8), b.input("b", DType::f32, {1, 2, 8, 8})},
                        1);
    auto y = b.conv2d(cat, b.constant("w", random_tensor({4, 5, 1, 1}, 44)), std::nullopt);
    const Graph g = kiln::internal::graph(b.build({y, b.relu(cat)}));
    BOOST_TEST(passes::conv_before_upsample(g).report.changes == 0);
  }
  // The setting for A/B runs, from the environment as a user sets it.
  {
    const Graph g = decode_head({});
    const kiln::Settings off = kiln::Settings::resolve(kiln::Mode::default_, {}, [](const char* name) -> const char* {
      return std::string_view(name) == "KILN_CONV_BEFORE_UPSAMPLE" ? "0" : nullptr;
    });
    const passes::PipelineResult result = passes::run_compile_passes(g, gpu_passes(off));
    bool reported = false;
    for (const passes::PassReport& report : result.reports)
      if (report.pass == "conv_before_upsample") {
        BOOST_TEST(report.changes == 0);
        reported = mentions(report, "off: setting conv_before_upsample=off (KILN_CONV_BEFORE_UPSAMPLE=0)");
      }
    BOOST_TEST(reported);
  }
}

BOOST_AUTO_TEST_CASE(drops_a_resize_to_its_own_size) {
  Builder b("same");
  auto x = b.input("x", DType::f32, {1, 3, 8, 8});
  auto same = resize_to(b, x, 8);
  auto bigger = resize_to(b, x, 16);
  const Graph g = kiln::internal::graph(b.build({b.relu(same), bigger}));
  passes::PassResult result = passes::drop_identity_resize(g);
  check_interface(g, result.graph);
  BOOST_TEST(result.report.changes == 1);
  BOOST_TEST(count_op(result.graph, "Resize") == 1);
  BOOST_TEST(relative_difference(g, result.graph) == 0.0);
}

BOOST_AUTO_TEST_CASE(segformer_decode_head_fuses_at_each_part_resolution) {
  const kiln::Model model = kiln::models::build("segformer_b0", {.image_size = 64, .seed = 3});
  passes::PipelineResult result = passes::run_compile_passes(kiln::internal::graph(model), gpu_passes());
  const auto report = std::find_if(result.reports.begin(), result.reports.end(),
                                   [](const passes::PassReport& r) { return r.pass == "conv_before_upsample"; });
  BOOST_REQUIRE((report != result.reports.end()));
  BOOST_TEST(report->changes == 1);
  BOOST_TEST(mentions(*report, "split Conv 'decode_head.linear_fuse' over its 4 concatenated inputs, 3 of them"));
  BOOST_TEST(relative_difference(kiln::internal::graph(model), result.graph) <= 1e-4);
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// An embedding table read by a runtime Gather, then a linear head (a Gemm
// with B transposed and a bias) and a MatMul with a constant B.
kiln::Model large_weights_model() {
  Builder b("large_weights");
  auto ids = b.input("ids", DType::i64, {2, 3});
  auto table = b.constant("embed", random_tensor({50, 8}, 1));  // 1600 bytes
  kiln::graph::Attributes axis0;
  axis0.set("axis", std::int64_t{0});
  auto rows = b.reshape(b.op("Gather", {table, ids}, axis0)[0], {6, 8});
  auto head = b.gemm(rows, b.constant("head", random_tensor({40, 8}, 2)), b.constant("head.bias", random_tensor({40}, 3)),
                     {.trans_b = true});  // 1280 bytes
  auto out = b.matmul(head, b.constant("w2", random_tensor({40, 48}, 4)));  // 7680 bytes
  return b.build({head, out});
}

}  // namespace

// Weights larger than a device binds are cut into parts that fit, each part
// computed and the results joined: the same numbers, exactly, for a Gather's
// table (negative indices too), a Gemm's transposed B with its bias, and a
// MatMul's B; an index outside the table gives NaN, as the unsplit kernel does.
BOOST_AUTO_TEST_CASE(split_large_weights_cuts_weights_larger_than_a_binding_exactly) {
  const kiln::Model model = large_weights_model();
  const Graph& g = kiln::internal::graph(model);
  const passes::PassResult split = passes::split_large_weights(g, {.max_binding_bytes = 1024});
  check_interface(g, split.graph);
  BOOST_TEST(split.report.changes == 3);
  for (const auto& v : split.graph.values())
    if (v.constant) BOOST_TEST(v.constant->nbytes() <= 1024u, v.name << " " << type_str(v.type));
  BOOST_TEST(count_op(split.graph, "Gather") == 2);  // 50 rows of 32 bytes: 32 and 18
  BOOST_TEST(count_op(split.graph, "Gemm") == 2);    // 40 columns of 32 bytes: 32 (two 16-column blocks) and 8
  BOOST_TEST(count_op(split.graph, "MatMul") == 8);  // 48 columns of 160 bytes: 6 per part
  const std::vector<Tensor> inputs = {Tensor::from_i64({2, 3}, {0, 31, 32, 49, -1, -50})};
  const std::vector<Tensor> want = kiln::graph::run_reference(g, inputs);
  const std::vector<Tensor> got = kiln::graph::run_reference(split.graph, inputs);
  for (std::size_t i = 0; i < want.size(); ++i) BOOST_TEST(kiln::max_abs_diff(got[i], want[i]) == 0.0f);
  // The split graph compiles (packed parts) and runs on a device as the reference does.
  kiln::CompiledModel compiled =
      kiln::compile(kiln::internal::make_model(std::make_shared<const Graph>(split.graph), "split"), {.fullgraph = true});
  const std::vector<Tensor> on_device = compiled(inputs);
  for (std::size_t i = 0; i < want.size(); ++i) BOOST_TEST(kiln::max_abs_diff(on_device[i], want[i]) <= 1e-4f);
  // An index in no part: NaN (the reference of the unsplit Gather refuses it).
  const std::vector<Tensor> poisoned = compiled({Tensor::from_i64({2, 3}, {0, 1, 2, 3, 4, 50})});
  BOOST_TEST(std::isnan(poisoned[0].values<float>()[5 * 40]));
  BOOST_TEST(!std::isnan(poisoned[0].values<float>()[4 * 40]));
  // Nothing larger: the graph as it was.
  BOOST_TEST(passes::split_large_weights(g, {.max_binding_bytes = 1 << 20}).report.changes == 0);
}

// On a real device the limit is the device's: lavapipe binds 128 MiB, and a
// tied 135 MB embedding (an input Gather, and the head's transposed B) runs
// in eager and compiled mode as the reference computes it.
BOOST_AUTO_TEST_CASE(a_tied_embedding_larger_than_a_binding_runs_on_the_device) {
  const kiln::BackendDescription* vulkan = nullptr;
  const auto backends = kiln::list_backends();
  for (const auto& b : backends)
    if (b.name == "vulkan" && b.available && !b.devices.empty()) vulkan = &b;
  if (vulkan == nullptr) {
    BOOST_TEST_MESSAGE("skipped: no Vulkan device here");
    return;
  }
  constexpr std::int64_t kVocabulary = 33000, kWidth = 1024;  // 135 MB of f32
  Builder b("tied_embedding");
  auto ids = b.input("ids", DType::i64, {1, 2});
  auto table = b.constant("embed", random_tensor({kVocabulary, kWidth}, 5));
  kiln::graph::Attributes axis0;
  axis0.set("axis", std::int64_t{0});
  auto rows = b.reshape(b.op("Gather", {table, ids}, axis0)[0], {2, kWidth});
  const kiln::Model model = b.build({b.gemm(rows, table, std::nullopt, {.trans_b = true})});
  const std::vector<Tensor> inputs = {Tensor::from_i64({1, 2}, {kVocabulary - 1, 17})};
  const Tensor want = kiln::graph::run_reference(kiln::internal::graph(model), inputs)[0];
  kiln::EagerModel eager = kiln::eager(model, {.backend = "vulkan"});
  BOOST_TEST(kiln::max_abs_diff(eager(inputs)[0], want) <= 1e-3f);
  kiln::CompiledModel compiled = kiln::compile(model, {.backend = "vulkan", .fullgraph = true});
  BOOST_TEST(kiln::max_abs_diff(compiled(inputs)[0], want) <= 1e-3f);
  BOOST_TEST(compiled.explain().find("split_large_weights: 2 change(s)") != std::string::npos);
}

namespace {

// A 1x1 convolution, a 3x3 one (Winograd's on a device that takes it), a
// MatMul and a Gemm, all f32, and a MatMul of f16 tensors.
Graph products_graph() {
  Builder b("products");
  auto x = b.input("x", DType::f32, {1, 64, 16, 16});
  auto pointwise = b.conv2d(x, b.constant("w1", random_tensor({64, 64, 1, 1}, 1)), std::nullopt);
  auto spatial = b.conv2d(pointwise, b.constant("w3", random_tensor({64, 64, 3, 3}, 2)), std::nullopt,
                          {.padding = {1, 1, 1, 1}});
  auto rows = b.input("rows", DType::f32, {8, 32});
  auto product = b.matmul(rows, b.constant("m", random_tensor({32, 24}, 3)));
  auto affine = b.gemm(product, b.constant("g", random_tensor({24, 16}, 4)), std::nullopt);
  auto half_rows = b.input("half_rows", DType::f16, {8, 32});
  auto half = b.matmul(half_rows, b.constant("h", random_tensor({32, 8}, 5).to(DType::f16)));
  return kiln::internal::graph(b.build({spatial, affine, half}));
}

std::map<std::string, std::string> products_by_op(const Graph& g) {
  std::map<std::string, std::string> by_op;
  for (const auto& node : g.nodes()) {
    const bool half = g.value(node.inputs[0]).type.dtype == DType::f16;
    const std::string key = node.op + (half ? " f16" : "") + (node.name.find("winograd") != std::string::npos ? " winograd" : "");
    const std::string products = node.attrs.get_string("f32_products", "f32");
    if (!by_op.count(key)) by_op[key] = products;
    else if (by_op[key] != products) by_op[key] = "mixed";
  }
  return by_op;
}

}  // namespace

// PyTorch's precision settings as choose_f32_products applies them: TF32
// for f32 convolutions (conv_allow_tf32), TF32 or bf16 for f32 MatMul and
// Gemm (float32_matmul_precision high or medium), only on a device with such
// matrix units, never for 16-bit nodes.
BOOST_AUTO_TEST_CASE(precision_settings_choose_which_f32_products_use_matrix_units) {
  const Graph g = products_graph();
  const std::vector<std::string> tensor_cores = {"tf32", "f16", "bf16"};
  auto run = [&](bool conv_tf32, const std::string& matmul, std::vector<std::string> units) {
    return passes::choose_f32_products(g, {.matrix_inputs = std::move(units), .conv_allow_tf32 = conv_tf32,
                                           .matmul_precision = matmul});
  };
  // PyTorch's defaults: convolutions in TF32, matrix products in f32.
  passes::PassResult defaults = run(true, "highest", tensor_cores);
  check_interface(g, defaults.graph);
  BOOST_TEST(defaults.report.changes == 2);
  auto by_op = products_by_op(defaults.graph);
  BOOST_TEST(by_op["Conv"] == "tf32");
  BOOST_TEST(by_op["MatMul"] == "f32");
  BOOST_TEST(by_op["Gemm"] == "f32");
  BOOST_TEST(by_op["MatMul f16"] == "f32");
  BOOST_TEST(mentions(defaults.report, "2 f32 convolution(s) may use TF32"));

  by_op = products_by_op(run(false, "high", tensor_cores).graph);
  BOOST_TEST(by_op["Conv"] == "f32");
  BOOST_TEST(by_op["MatMul"] == "tf32");
  BOOST_TEST(by_op["Gemm"] == "tf32");
  BOOST_TEST(by_op["MatMul f16"] == "f32");
  by_op = products_by_op(run(true, "medium", tensor_cores).graph);
  BOOST_TEST(by_op["Conv"] == "tf32");
  BOOST_TEST(by_op["MatMul"] == "bf16");
  by_op = products_by_op(run(true, "medium", {"tf32", "f16"}).graph);  // no bf16 units: medium allows TF32
  BOOST_TEST(by_op["MatMul"] == "tf32");
  by_op = products_by_op(run(false, "medium", {"f16", "bf16"}).graph);  // no TF32 units (CDNA1)
  BOOST_TEST(by_op["MatMul"] == "bf16");
  BOOST_TEST(by_op["Conv"] == "f32");

  // Everything in f32: the model's own graph.
  passes::PassResult strict = run(false, "highest", tensor_cores);
  BOOST_TEST(strict.report.changes == 0);
  BOOST_TEST(strict.graph.nodes().size() == g.nodes().size());
  BOOST_TEST(mentions(strict.report, "f32 products stay f32"));
  passes::PassResult no_units = run(true, "high", {});
  BOOST_TEST(no_units.report.changes == 0);
  BOOST_TEST(mentions(no_units.report, "not for this device"));
  BOOST_TEST(run(true, "high", {"f16"}).report.changes == 0);

  // The compile pipeline runs it first; Winograd's product keeps the
  // convolution's choice, and a Gemm packed as a MatMul keeps its own.
  kiln::backend::TargetDesc cpu_with_units;
  cpu_with_units.cpu_cores = true;
  cpu_with_units.matrix_shapes = {{"tf32", 16, 8, 8, 32}, {"f16", 16, 8, 16, 32}, {"bf16", 16, 8, 16, 32}};
  const kiln::lower::TargetPolicy policy = kiln::lower::target_policy(cpu_with_units);
  const Graph compiled =
      passes::run_compile_passes(g, policy.pass_options(kiln::Settings().with("float32_matmul_precision", "high"))).graph;
  by_op = products_by_op(compiled);
  BOOST_TEST(by_op["Conv"] == "tf32");
  BOOST_TEST(by_op["MatMul winograd"] == "tf32");
  BOOST_TEST(by_op["MatMul"] == "tf32");
  BOOST_TEST(by_op["MatMul f16"] == "f32");
  // Eager follows the same settings.
  BOOST_TEST(products_by_op(passes::run_eager_passes(g, policy.eager_pass_options(kiln::Settings())).graph)["Conv"] ==
             "tf32");
  BOOST_TEST(products_by_op(passes::run_eager_passes(
                 g, policy.eager_pass_options(kiln::Settings().with("conv_allow_tf32", "off"))).graph)["Conv"] == "f32");
}

BOOST_AUTO_TEST_CASE(f32_products_take_tf32_or_bf16_only) {
  Builder b("bad_products");
  auto rows = b.input("rows", DType::f32, {4, 8});
  kiln::graph::Attributes attrs;
  attrs.set("f32_products", std::string("fp8"));
  try {
    b.op("MatMul", {rows, b.constant("m", random_tensor({8, 4}, 1))}, attrs);
    BOOST_ERROR("an f32_products of fp8 was taken");
  } catch (const kiln::Error& e) {
    BOOST_TEST(e.kind() == kiln::ErrorKind::InvalidArgument);
    BOOST_TEST(std::string(e.what()).find("'f32_products' is 'fp8' (tf32 or bf16)") != std::string::npos);
  }
}

#define BOOST_TEST_MODULE builder_models
#include <boost/test/unit_test.hpp>

#include <kiln/builder.h>
#include <kiln/models.h>

#include "graph/ir.h"
#include "graph/op_registry.h"
#include "src/runtime/internal_access.h"
#include "src/zoo/init.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace {

using kiln::Builder;
using kiln::DType;
using kiln::ErrorKind;
using kiln::Shape;
using kiln::Tensor;

Tensor filled(Shape shape, float start = 0.1f, float step = 0.01f) {
  Tensor t(DType::f32, std::move(shape));
  float v = start;
  for (float& x : t.values<float>()) {
    x = v;
    v += step;
  }
  return t;
}

const kiln::graph::Node* find_node(const kiln::graph::Graph& g, const std::string& name) {
  for (const auto& n : g.nodes())
    if (n.name == name) return &n;
  return nullptr;
}

const kiln::graph::Value* find_value(const kiln::graph::Graph& g, const std::string& name) {
  for (const auto& v : g.values())
    if (v.name == name) return &v;
  return nullptr;
}

int count_op(const kiln::graph::Graph& g, const std::string& op) {
  return static_cast<int>(std::count_if(g.nodes().begin(), g.nodes().end(), [&](const auto& n) { return n.op == op; }));
}

// Runs `body`, expecting a kiln::Error of `kind` whose message contains every fragment.
template <class F>
void expect_error(F&& body, ErrorKind kind, std::initializer_list<std::string> fragments) {
  try {
    body();
    BOOST_ERROR("expected a kiln::Error");
  } catch (const kiln::Error& e) {
    BOOST_TEST(static_cast<int>(e.kind()) == static_cast<int>(kind), "kind " << kiln::error_kind_name(e.kind()));
    for (const std::string& f : fragments)
      BOOST_TEST(std::string(e.what()).find(f) != std::string::npos, "'" << e.what() << "' lacks '" << f << "'");
  }
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.bytes().data(), b.bytes().data(), a.nbytes()) == 0;
}

}  // namespace

// ---- builder ------------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(builder)

BOOST_AUTO_TEST_CASE(conv_and_pool_shapes) {
  Builder b("tiny");
  auto x = b.input("x", DType::f32, {2, 3, 32, 32});
  auto w = b.constant("w", filled({8, 3, 3, 3}));
  auto bias = b.constant("b", filled({8}));
  auto y = b.conv2d(x, w, bias, {.stride = {2, 2}, .padding = {1, 1, 1, 1}});
  BOOST_TEST(b.shape(y) == (Shape{2, 8, 16, 16}));
  BOOST_TEST(b.shape(b.conv2d(x, w, std::nullopt)) == (Shape{2, 8, 30, 30}));
  auto dilated = b.conv2d(x, w, std::nullopt, {.padding = {2, 2, 2, 2}, .dilation = {2, 2}});
  BOOST_TEST(b.shape(dilated) == (Shape{2, 8, 32, 32}));
  auto dw = b.constant("dw", filled({8, 1, 3, 3}));
  BOOST_TEST(b.shape(b.conv2d(y, dw, std::nullopt, {.groups = 8})) == (Shape{2, 8, 14, 14}));
  BOOST_TEST(b.shape(b.max_pool2d(y, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1, 1, 1}})) ==
             (Shape{2, 8, 8, 8}));
  BOOST_TEST(b.shape(b.avg_pool2d(y, {.kernel = {3, 3}, .stride = {2, 2}, .ceil_mode = true})) == (Shape{2, 8, 8, 8}));
  BOOST_TEST(b.shape(b.global_avg_pool(y)) == (Shape{2, 8, 1, 1}));
  BOOST_TEST(static_cast<int>(b.dtype(y)) == static_cast<int>(DType::f32));

  kiln::Model m = b.build({y});
  const auto* conv = find_node(kiln::internal::graph(m), "conv");
  BOOST_REQUIRE(conv != nullptr);
  BOOST_TEST(conv->op == "Conv");
  BOOST_TEST(conv->attrs.get_ints("strides", {}) == (std::vector<std::int64_t>{2, 2}));
  BOOST_TEST(conv->attrs.get_ints("pads", {}) == (std::vector<std::int64_t>{1, 1, 1, 1}));
  BOOST_TEST(conv->attrs.get_int("group", 0) == 1);
}

BOOST_AUTO_TEST_CASE(dense_and_elementwise_shapes) {
  Builder b;
  auto a = b.input("a", DType::f32, {2, 3, 4});
  auto m = b.constant("m", filled({4, 5}));
  BOOST_TEST(b.shape(b.matmul(a, m)) == (Shape{2, 3, 5}));
  auto x = b.input("x", DType::f32, {6, 3});
  auto wt = b.constant("wt", filled({4, 3}));
  auto c = b.constant("c", filled({4}));
  auto g = b.gemm(x, wt, c, {.trans_b = true, .alpha = 0.5f});
  BOOST_TEST(b.shape(g) == (Shape{6, 4}));
  auto xt = b.constant("xt", filled({3, 6}));
  BOOST_TEST(b.shape(b.gemm(xt, wt, std::nullopt, {.trans_a = true, .trans_b = true})) == (Shape{6, 4}));

  auto row = b.constant("row", filled({3}));
  BOOST_TEST(b.shape(b.add(x, row)) == (Shape{6, 3}));
  BOOST_TEST(b.shape(b.sub(row, x)) == (Shape{6, 3}));
  BOOST_TEST(b.shape(b.mul(x, b.constant("col", filled({6, 1})))) == (Shape{6, 3}));
  BOOST_TEST(b.shape(b.div(x, row)) == (Shape{6, 3}));
  for (auto y : {b.relu(x), b.sigmoid(x), b.tanh(x), b.gelu(x), b.gelu(x, true), b.clip(x, -1.0f, 1.0f),
                 b.softmax(x), b.softmax(x, 0)})
    BOOST_TEST(b.shape(y) == (Shape{6, 3}));

  auto ln = b.layer_norm(x, b.constant("ln_scale", filled({3})), b.constant("ln_bias", filled({3})));
  BOOST_TEST(b.shape(ln) == (Shape{6, 3}));
  auto img = b.input("img", DType::f32, {1, 4, 5, 5});
  auto bn = b.batch_norm(img, b.constant("s", filled({4})), b.constant("t", filled({4})),
                         b.constant("mu", filled({4})), b.constant("var", filled({4}, 1.0f)));
  BOOST_TEST(b.shape(bn) == (Shape{1, 4, 5, 5}));

  BOOST_TEST(b.shape(b.reshape(img, {0, -1})) == (Shape{1, 100}));
  BOOST_TEST(b.shape(b.flatten(img)) == (Shape{1, 100}));
  BOOST_TEST(b.shape(b.flatten(img, 2)) == (Shape{4, 25}));
  BOOST_TEST(b.shape(b.transpose(img, {0, 2, 3, 1})) == (Shape{1, 5, 5, 4}));
  BOOST_TEST(b.shape(b.concat({img, bn, img}, 1)) == (Shape{1, 12, 5, 5}));
  BOOST_TEST(b.shape(b.concat({img, img}, -1)) == (Shape{1, 4, 5, 10}));

  kiln::graph::Attributes attrs;
  attrs.set("axis", std::int64_t{0});
  auto out = b.op("Softmax", {x}, attrs);
  BOOST_REQUIRE(out.size() == 1u);
  BOOST_TEST(b.shape(out[0]) == (Shape{6, 3}));
  kiln::Model model = b.build({g, ln});
  const auto* gemm = find_node(kiln::internal::graph(model), "gemm");
  BOOST_REQUIRE(gemm != nullptr);
  BOOST_TEST(gemm->attrs.get_int("transB", 0) == 1);
  BOOST_TEST(gemm->attrs.get_float("alpha", 0.0) == 0.5);
}

BOOST_AUTO_TEST_CASE(scopes_name_nodes_and_constants) {
  Builder b("scoped");
  auto x = b.input("x", DType::f32, {1, 4, 8, 8});
  b.push_scope("layer1");
  b.push_scope("0");
  b.push_scope("conv1");
  auto w = b.constant("weight", filled({4, 4, 3, 3}));
  auto y = b.conv2d(x, w, std::nullopt, {.padding = {1, 1, 1, 1}});
  b.pop_scope();
  auto r1 = b.relu(y);
  auto r2 = b.relu(b.add(r1, x));
  b.pop_scope();
  b.pop_scope();
  auto top = b.relu(r2);
  auto top2 = b.relu(top);
  kiln::Model m = b.build({top2});
  const auto& g = kiln::internal::graph(m);

  BOOST_TEST(g.value(w.id).name == "layer1.0.conv1.weight");
  BOOST_TEST(g.node(g.value(y.id).producer).name == "layer1.0.conv1");
  BOOST_TEST(g.node(g.value(r1.id).producer).name == "layer1.0.relu");
  BOOST_TEST(g.node(g.value(r2.id).producer).name == "layer1.0.relu_1");
  BOOST_TEST(find_node(g, "layer1.0.add") != nullptr);
  BOOST_TEST(g.node(g.value(top.id).producer).name == "relu");
  BOOST_TEST(g.node(g.value(top2.id).producer).name == "relu_1");
  BOOST_TEST(m.name() == "scoped");
  BOOST_REQUIRE(m.inputs().size() == 1u);
  BOOST_TEST(m.inputs()[0].name == "x");
  BOOST_TEST(m.inputs()[0].shape == (Shape{1, 4, 8, 8}));
  BOOST_TEST(m.outputs()[0].name == "relu_1");
}

BOOST_AUTO_TEST_CASE(generated_suffixes_skip_taken_names_and_reuse_freed_ones) {
  Builder b;
  auto x = b.input("x", DType::f32, {2, 3});
  auto r0 = b.relu(x);
  auto r1 = b.relu(r0);
  auto c = b.constant("relu_2", filled({2, 3}));
  auto r2 = b.relu(b.add(r1, c));
  // A failed op takes no name.
  expect_error([&] { b.add(r2, b.input("bad", DType::f32, {5})); }, ErrorKind::ShapeMismatch, {"add"});
  auto r3 = b.relu(r2);
  b.set_name(c, "bias");  // "relu_2" is free again
  auto r4 = b.relu(r3);
  kiln::Model m = b.build({r4});
  const auto& g = kiln::internal::graph(m);
  auto node_name = [&](Builder::Value v) { return g.node(g.value(v.id).producer).name; };
  BOOST_TEST(node_name(r0) == "relu");
  BOOST_TEST(node_name(r1) == "relu_1");
  BOOST_TEST(node_name(r2) == "relu_3");
  BOOST_TEST(node_name(r3) == "relu_4");
  BOOST_TEST(node_name(r4) == "relu_2");
}

BOOST_AUTO_TEST_CASE(set_name_renames_outputs) {
  Builder b;
  auto x = b.input("x", DType::f32, {2, 3});
  auto y = b.relu(x);
  b.set_name(y, "activations");
  expect_error([&] { b.set_name(y, "x"); }, ErrorKind::InvalidArgument, {"'x'"});
  kiln::Model m = b.build({y});
  BOOST_TEST(m.outputs()[0].name == "activations");
  BOOST_TEST(m.outputs()[0].shape == (Shape{2, 3}));
}

BOOST_AUTO_TEST_CASE(shape_errors_name_the_node) {
  Builder b;
  auto x = b.input("x", DType::f32, {1, 3, 16, 16});
  b.push_scope("stem");
  auto w = b.constant("weight", filled({8, 4, 3, 3}));  // 4 input channels, x has 3
  expect_error([&] { b.conv2d(x, w, std::nullopt); }, ErrorKind::ShapeMismatch, {"stem", "Conv"});
  b.pop_scope();
  auto a = b.input("a", DType::f32, {2, 3});
  auto c = b.input("c", DType::f32, {4, 5});
  expect_error([&] { b.matmul(a, c); }, ErrorKind::ShapeMismatch, {"mat_mul", "MatMul"});
  expect_error([&] { b.add(a, c); }, ErrorKind::ShapeMismatch, {"'add'", "[2, 3]", "[4, 5]"});
  expect_error([&] { b.reshape(a, {4, -1}); }, ErrorKind::ShapeMismatch, {"reshape"});
}

BOOST_AUTO_TEST_CASE(misuse_is_reported) {
  Builder b("misuse");
  auto x = b.input("x", DType::f32, {2, 2});
  expect_error([&] { b.input("x", DType::f32, {2}); }, ErrorKind::InvalidArgument, {"'x'", "already used"});
  b.constant("w", filled({2}));
  expect_error([&] { b.constant("w", filled({2})); }, ErrorKind::InvalidArgument, {"'w'"});
  expect_error([&] { b.pop_scope(); }, ErrorKind::InvalidArgument, {"pop_scope"});
  expect_error([&] { b.relu(Builder::Value{999}); }, ErrorKind::InvalidArgument, {"999"});
  expect_error([&] { b.op("NoSuchOp", {x}, {}); }, ErrorKind::Unsupported, {"NoSuchOp"});
  expect_error([&] { b.build({}); }, ErrorKind::InvalidArgument, {"output"});
}

BOOST_AUTO_TEST_CASE(build_empties_the_builder) {
  Builder b("once");
  auto x = b.input("x", DType::f32, {3});
  auto y = b.relu(x);
  kiln::Model m = b.build({y});
  BOOST_TEST(kiln::internal::graph(m).nodes().size() == 1u);
  expect_error([&] { b.build({y}); }, ErrorKind::InvalidArgument, {"once", "already built"});
  expect_error([&] { b.relu(x); }, ErrorKind::InvalidArgument, {"already built"});
  expect_error([&] { b.input("z", DType::f32, {1}); }, ErrorKind::InvalidArgument, {"already built"});
  expect_error([&] { (void)b.shape(x); }, ErrorKind::InvalidArgument, {"already built"});
}

BOOST_AUTO_TEST_SUITE_END()

// ---- deterministic initialisation ------------------------------------------------

BOOST_AUTO_TEST_SUITE(init)

BOOST_AUTO_TEST_CASE(splitmix64_matches_the_published_sequence) {
  kiln::models::init::Rng rng(0);
  BOOST_TEST(rng.next_u64() == 0xE220A8397B1DCDAFull);
  BOOST_TEST(rng.next_u64() == 0x6E789E6AA1B965F4ull);
  BOOST_TEST(rng.next_u64() == 0x06C45D188009454Full);
}

BOOST_AUTO_TEST_CASE(portable_log_is_accurate) {
  for (double x : {1e-300, 1e-10, 0.001, 0.3, 0.5, 0.70710678, 0.9999999, 1.0, 1.5, 2.0, 10.0, 12345.678, 1e300}) {
    const double expected = std::log(x);
    BOOST_TEST(std::fabs(kiln::models::init::portable_log(x) - expected) <= 4e-16 * std::max(1.0, std::fabs(expected)),
               "log(" << x << ")");
  }
}

BOOST_AUTO_TEST_CASE(normal_and_uniform_have_the_right_moments) {
  kiln::models::init::Rng rng(42);
  const int n = 200000;
  double sum = 0, sum_sq = 0, umin = 1, umax = 0;
  for (int i = 0; i < n; ++i) {
    const double z = rng.normal();
    sum += z;
    sum_sq += z * z;
    const double u = rng.uniform();
    umin = std::min(umin, u);
    umax = std::max(umax, u);
  }
  BOOST_TEST(std::fabs(sum / n) < 0.01);
  BOOST_TEST(std::fabs(sum_sq / n - 1.0) < 0.02);
  BOOST_TEST(umin >= 0.0);
  BOOST_TEST(umin < 1e-3);
  BOOST_TEST(umax < 1.0);
  BOOST_TEST(umax > 1.0 - 1e-3);
}

BOOST_AUTO_TEST_CASE(tensor_streams_depend_on_seed_and_name) {
  using kiln::models::init::tensor_seed;
  BOOST_TEST(tensor_seed(0, "conv1.weight") == tensor_seed(0, "conv1.weight"));
  BOOST_TEST(tensor_seed(0, "conv1.weight") != tensor_seed(1, "conv1.weight"));
  BOOST_TEST(tensor_seed(0, "conv1.weight") != tensor_seed(0, "bn1.weight"));
}

BOOST_AUTO_TEST_SUITE_END()

// ---- built-in models --------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(models)

BOOST_AUTO_TEST_CASE(resnet18_structure_and_names) {
  kiln::Model m = kiln::models::resnet18({.batch = 2, .image_size = 40, .num_classes = 10});
  const auto& g = kiln::internal::graph(m);
  BOOST_TEST(m.name() == "resnet18");
  BOOST_TEST(count_op(g, "Conv") == 20);
  BOOST_TEST(count_op(g, "BatchNormalization") == 20);
  BOOST_TEST(count_op(g, "Relu") == 17);
  BOOST_TEST(count_op(g, "Add") == 8);
  BOOST_TEST(count_op(g, "MaxPool") == 1);
  BOOST_TEST(count_op(g, "GlobalAveragePool") == 1);
  BOOST_TEST(count_op(g, "Gemm") == 1);

  BOOST_REQUIRE(m.inputs().size() == 1u);
  BOOST_TEST(m.inputs()[0].name == "input");
  BOOST_TEST(m.inputs()[0].shape == (Shape{2, 3, 40, 40}));
  BOOST_REQUIRE(m.outputs().size() == 1u);
  BOOST_TEST(m.outputs()[0].name == "logits");
  BOOST_TEST(m.outputs()[0].shape == (Shape{2, 10}));

  for (const char* name : {"conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var",
                           "layer1.0.conv1.weight", "layer1.1.bn2.running_var", "layer2.0.downsample.0.weight",
                           "layer2.0.downsample.1.running_mean", "layer4.1.conv2.weight", "fc.weight", "fc.bias"}) {
    const auto* v = find_value(g, name);
    BOOST_TEST((v != nullptr && v->constant.has_value()), name);
  }
  BOOST_TEST(find_value(g, "layer1.0.downsample.0.weight") == nullptr);  // 64 -> 64, stride 1: no downsample
  BOOST_TEST(find_value(g, "layer2.0.downsample.0.weight")->type.shape == (Shape{128, 64, 1, 1}));
  BOOST_TEST(find_value(g, "conv1.weight")->type.shape == (Shape{64, 3, 7, 7}));
  BOOST_TEST(find_value(g, "fc.weight")->type.shape == (Shape{10, 512}));
  for (const char* name : {"conv1", "bn1", "maxpool", "layer1.0.conv1", "layer3.0.downsample.0", "fc"})
    BOOST_TEST(find_node(g, name) != nullptr, name);
  BOOST_TEST(find_node(g, "layer3.0.downsample.1")->op == "BatchNormalization");
  BOOST_TEST(find_node(g, "fc")->attrs.get_int("transB", 0) == 1);
}

BOOST_AUTO_TEST_CASE(resnet18_parameter_count_matches_torchvision) {
  kiln::Model m = kiln::models::resnet18({.image_size = 32});
  std::int64_t parameters = 0;
  for (const auto& v : kiln::internal::graph(m).values())
    if (v.constant && v.name.find("running_") == std::string::npos) parameters += v.constant->numel();
  BOOST_TEST(parameters == 11689512);
  BOOST_TEST(m.outputs()[0].shape == (Shape{1, 1000}));
}

BOOST_AUTO_TEST_CASE(resnet18_initialisation_follows_torchvision) {
  kiln::Model m = kiln::models::resnet18({.image_size = 32, .num_classes = 10});
  const auto& g = kiln::internal::graph(m);
  auto stats = [&](const std::string& name) {
    auto values = find_value(g, name)->constant->values<float>();
    double sum = 0, sum_sq = 0;
    float lo = values[0], hi = values[0];
    for (float v : values) {
      sum += v;
      sum_sq += double(v) * v;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    const double mean = sum / values.size();
    return std::tuple{mean, std::sqrt(sum_sq / values.size() - mean * mean), lo, hi};
  };
  auto [mean, stddev, lo, hi] = stats("layer3.0.conv2.weight");  // fan_out = 256 * 9
  BOOST_TEST(std::fabs(mean) < 0.002);
  BOOST_TEST(std::fabs(stddev / std::sqrt(2.0 / (256 * 9)) - 1.0) < 0.02);
  std::tie(mean, stddev, lo, hi) = stats("layer4.1.bn1.running_var");
  BOOST_TEST(lo >= 0.5f);
  BOOST_TEST(hi < 1.5f);
  BOOST_TEST(hi - lo > 0.5f);
  std::tie(mean, stddev, lo, hi) = stats("layer4.1.bn1.weight");
  BOOST_TEST(std::fabs(mean - 1.0) < 0.03);
  BOOST_TEST(std::fabs(stddev - 0.1) < 0.03);
  std::tie(mean, stddev, lo, hi) = stats("fc.weight");
  BOOST_TEST(hi <= 1.0 / std::sqrt(512.0));
  BOOST_TEST(lo >= -1.0 / std::sqrt(512.0));
  BOOST_TEST(hi - lo > 1.5 / std::sqrt(512.0));
}

BOOST_AUTO_TEST_CASE(resnet18_weights_are_deterministic) {
  const kiln::models::ModelOptions options{.image_size = 32, .num_classes = 10, .seed = 7};
  kiln::Model a = kiln::models::resnet18(options);
  kiln::Model b = kiln::models::resnet18(options);
  kiln::models::ModelOptions other = options;
  other.seed = 8;
  kiln::Model c = kiln::models::resnet18(other);
  BOOST_REQUIRE(kiln::internal::graph(a).values().size() == kiln::internal::graph(b).values().size());
  BOOST_REQUIRE(kiln::internal::graph(a).values().size() == kiln::internal::graph(c).values().size());
  int constants = 0, differing = 0;
  for (std::size_t i = 0; i < kiln::internal::graph(a).values().size(); ++i) {
    const auto& va = kiln::internal::graph(a).values()[i];
    if (!va.constant) continue;
    ++constants;
    BOOST_TEST(same_bits(*va.constant, *kiln::internal::graph(b).values()[i].constant), va.name);
    if (!same_bits(*va.constant, *kiln::internal::graph(c).values()[i].constant)) ++differing;
  }
  BOOST_TEST(constants == 20 + 20 * 4 + 2);
  BOOST_TEST(differing == constants);
}

BOOST_AUTO_TEST_CASE(resnet18_reference_run_gives_varied_logits) {
  kiln::Model m = kiln::models::resnet18({.batch = 2, .image_size = 32, .num_classes = 10, .seed = 3});
  Tensor input(DType::f32, {2, 3, 32, 32});
  auto x = input.values<float>();
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i)) + (i < x.size() / 2 ? 0.0f : 0.5f);
  std::vector<Tensor> out = kiln::graph::run_reference(kiln::internal::graph(m), std::span<const Tensor>(&input, 1));
  BOOST_REQUIRE(out.size() == 1u);
  BOOST_TEST(out[0].shape() == (Shape{2, 10}));
  auto logits = out[0].values<float>();
  for (float v : logits) BOOST_TEST(std::isfinite(v));
  const auto [lo, hi] = std::minmax_element(logits.begin(), logits.end());
  BOOST_TEST(*hi - *lo > 1e-3f);
  float image_difference = 0;
  for (int k = 0; k < 10; ++k) image_difference = std::max(image_difference, std::fabs(logits[k] - logits[10 + k]));
  BOOST_TEST(image_difference > 1e-4f);
}

BOOST_AUTO_TEST_CASE(models_registry) {
  const std::vector<std::string> names = kiln::models::names();
  BOOST_TEST((std::find(names.begin(), names.end(), "resnet18") != names.end()));
  kiln::Model m = kiln::models::build("resnet18", {.image_size = 64, .num_classes = 5});
  BOOST_TEST(m.outputs()[0].shape == (Shape{1, 5}));
  BOOST_TEST(m.inputs()[0].shape == (Shape{1, 3, 64, 64}));
  expect_error([] { kiln::models::build("resnet1000"); }, ErrorKind::NotFound, {"resnet1000", "resnet18"});
  expect_error([] { kiln::models::resnet18({.batch = 0}); }, ErrorKind::InvalidArgument, {"batch"});
  expect_error([] { kiln::models::resnet18({.image_size = 0}); }, ErrorKind::InvalidArgument, {"image_size"});
}

BOOST_AUTO_TEST_SUITE_END()

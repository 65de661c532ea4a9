#define BOOST_TEST_MODULE tracing
#include <boost/test/unit_test.hpp>

#include <kiln/kiln.h>
#include <kiln/trace.h>

#include "graph/ir.h"
#include "graph/op_registry.h"
#include "src/runtime/internal_access.h"

#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace kiln;

namespace {

Tensor random_f32(const Shape& shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Tensor t(DType::f32, shape);
  for (float& v : t.values<float>()) v = dist(rng);
  return t;
}

Tensor filled(const Shape& shape, float value) {
  Tensor t(DType::f32, shape);
  for (float& v : t.values<float>()) v = value;
  return t;
}

std::vector<float> floats(const Tensor& t) {
  auto v = t.values<float>();
  return {v.begin(), v.end()};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

void check_close(const std::vector<Tensor>& got, const std::vector<Tensor>& want, float tolerance = 1e-4f) {
  BOOST_TEST_REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    BOOST_TEST_REQUIRE(got[i].shape() == want[i].shape(), "output " << i);
    BOOST_TEST(max_abs_diff(got[i], want[i]) < tolerance, "output " << i);
  }
}

// A small transformer-ish block and a conv, using every traced function.
std::vector<Tensor> block(const std::vector<Tensor>& in) {
  const Tensor& x = in[0];  // [4, 8]
  const Tensor& w = in[1];  // [8, 8]
  Tensor h = gelu(matmul(x, w) + filled({8}, 0.1f));
  h = layer_norm(h, filled({8}, 1.5f), filled({8}, -0.25f));
  Tensor a = softmax(transpose(h, {1, 0}), 1);  // [8, 4]
  Tensor y = relu(h) * sigmoid(h) - tanh(h) / filled({1}, 2.0f);
  Tensor image = reshape(concat({y, y}, 0), {1, 2, -1, 8});
  Tensor c = conv2d(image, filled({3, 2, 3, 3}, 0.05f), filled({3}, 0.5f), {.padding = {1, 1, 1, 1}});
  return {a, c, sub(add(x, x), div(mul(x, x), filled({1}, 4.0f)))};
}

// h = x @ w; the sign of sum(h) (read with item()) picks the branch; g is
// computed before the break but used on one branch only.
std::vector<Tensor> branchy(const std::vector<Tensor>& in) {
  Tensor h = matmul(in[0], in[1]);  // [2, 3]
  Tensor g = tanh(h);
  Tensor total = matmul(matmul(filled({1, 2}, 1.0f), h), filled({3, 1}, 1.0f));  // [1, 1]
  const double sum = item(total);
  if (sum > 0) return {g * h + relu(h)};
  return {sigmoid(h)};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(eager)

BOOST_AUTO_TEST_CASE(functions_compute_on_the_host) {
  Tensor x = Tensor::from_f32({2, 2}, {-1, 2, 3, -4});
  BOOST_TEST(floats(relu(x)) == (std::vector<float>{0, 2, 3, 0}));
  BOOST_TEST(floats(x + x) == (std::vector<float>{-2, 4, 6, -8}));
  BOOST_TEST(floats(x * filled({1}, 3.0f)) == (std::vector<float>{-3, 6, 9, -12}));
  BOOST_TEST(floats(matmul(x, x)) == (std::vector<float>{7, -10, -15, 22}));
  BOOST_TEST(floats(transpose(x, {1, 0})) == (std::vector<float>{-1, 3, 2, -4}));
  BOOST_TEST(concat({x, x}, 1).shape() == (Shape{2, 4}));
  BOOST_TEST(reshape(x, {-1}).shape() == (Shape{4}));
  BOOST_TEST(item(matmul(Tensor::from_f32({1, 2}, {1, 1}), Tensor::from_f32({2, 1}, {2, 5}))) == 7.0);
  auto parts = op("TopK", {Tensor::from_f32({3}, {1, 9, 4})}, [] {
    graph::Attributes a;
    a.set("k", std::int64_t{1});
    return a;
  }());
  BOOST_TEST(parts.size() == 2u);
  BOOST_TEST(floats(parts[0]) == (std::vector<float>{9}));
}

BOOST_AUTO_TEST_CASE(functions_equal_the_reference_graph) {
  const std::vector<Tensor> inputs = {random_f32({4, 8}, 1), random_f32({8, 8}, 2)};
  const std::vector<Tensor> eager_out = block(inputs);
  // The same computation written with the builder, run on the reference.
  Builder b("block");
  auto x = b.input("x", DType::f32, {4, 8});
  auto w = b.input("w", DType::f32, {8, 8});
  auto h = b.gelu(b.add(b.matmul(x, w), b.constant("bias", filled({8}, 0.1f))));
  h = b.layer_norm(h, b.constant("scale", filled({8}, 1.5f)), b.constant("shift", filled({8}, -0.25f)));
  auto a = b.softmax(b.transpose(h, {1, 0}), 1);
  auto model = b.build({a});
  auto want = graph::run_reference(kiln::internal::graph(model), inputs);
  check_close({eager_out[0]}, want, 1e-6f);
  BOOST_TEST(eager_out[1].shape() == (Shape{1, 3, 4, 8}));
}

BOOST_AUTO_TEST_CASE(errors_name_the_op) {
  try {
    matmul(filled({2, 3}, 1), filled({2, 3}, 1));
    BOOST_FAIL("no error");
  } catch (const Error& e) {
    BOOST_TEST(contains(e.what(), "MatMul"), e.what());
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(compiled)

BOOST_AUTO_TEST_CASE(compiled_function_equals_eager) {
  const std::vector<Tensor> example = {random_f32({4, 8}, 3), random_f32({8, 8}, 4)};
  TracedFunction f = compile(block, example);
  BOOST_TEST(f.graph_breaks().empty());
  BOOST_TEST(f.traces() == 1);
  BOOST_TEST(kiln::internal::graph(f).nodes().size() >= 15u);
  for (unsigned seed : {5u, 6u}) {
    const std::vector<Tensor> inputs = {random_f32({4, 8}, seed), random_f32({8, 8}, seed + 10)};
    check_close(f(inputs), block(inputs));
  }
  BOOST_TEST(f.traces() == 1);
  // Other input shapes re-trace (logged) and stay correct.
  const std::vector<Tensor> wider = {random_f32({6, 8}, 7), random_f32({8, 8}, 8)};
  check_close(f(wider), block(wider));
  BOOST_TEST(f.traces() == 2);
}

BOOST_AUTO_TEST_CASE(fullgraph_names_the_source_line_of_each_break) {
  const int line = __LINE__ + 3;
  auto two_reads = [](const std::vector<Tensor>& in) {
    Tensor s = matmul(in[0], in[1]);
    const double first = item(s);
    Tensor copy = to_host(s);
    return std::vector<Tensor>{first > 0 ? relu(copy) : s};
  };
  try {
    compile(two_reads, {filled({1, 2}, 1), filled({2, 1}, 1)}, {.fullgraph = true});
    BOOST_FAIL("no error");
  } catch (const Error& e) {
    const std::string text = e.what();
    BOOST_TEST((e.kind() == ErrorKind::Unsupported));
    BOOST_TEST(contains(text, "2 graph break(s)"), text);
    BOOST_TEST(contains(text, "graph break: item() at "), text);
    BOOST_TEST(contains(text, "test_tracing.cpp:" + std::to_string(line)), text);
    BOOST_TEST(contains(text, "graph break: to_host() at "), text);
    BOOST_TEST(contains(text, "test_tracing.cpp:" + std::to_string(line + 1)), text);
  }
}

BOOST_AUTO_TEST_CASE(split_and_replay_follows_the_branch_of_each_input) {
  const Tensor w = random_f32({4, 3}, 9);
  const Tensor positive = filled({2, 4}, 1.0f);
  const Tensor negative = filled({2, 4}, -1.0f);
  const Tensor w_positive = filled({4, 3}, 0.5f);
  // Traced on the branch that uses g after the break.
  TracedFunction f = compile(branchy, {positive, w_positive});
  BOOST_TEST(f.graph_breaks().size() == 1u);
  BOOST_TEST(kiln::internal::graph(f).nodes().size() == 4u);  // matmul, tanh and the two matmuls of the sum
  for (const auto& x : {positive, negative, positive, negative}) {
    const std::vector<Tensor> inputs = {x, w_positive};
    check_close(f(inputs), branchy(inputs));
  }
  BOOST_TEST(f.traces() == 1);

  // Traced on the branch that does not use g: the other branch needs it,
  // which re-traces once (logged); later calls on either branch replay.
  TracedFunction g = compile(branchy, {negative, w_positive});
  for (const auto& x : {negative, positive, negative, positive}) {
    const std::vector<Tensor> inputs = {x, w_positive};
    check_close(g(inputs), branchy(inputs));
  }
  BOOST_TEST(g.traces() == 2);
  BOOST_TEST(contains(g.explain(), "1 graph break(s)"));
  const std::vector<Tensor> random_inputs = {random_f32({2, 4}, 11), w};
  check_close(g(random_inputs), branchy(random_inputs));
}

BOOST_AUTO_TEST_CASE(replay_guard_retraces_when_ops_change) {
  int calls = 0;
  // A function whose ops before the break change between calls (a side
  // effect, which the guard must catch rather than replay wrongly).
  auto drifting = [&calls](const std::vector<Tensor>& in) {
    Tensor h = ++calls > 2 ? sigmoid(in[0]) : relu(in[0]);
    const double v = item(matmul(filled({1, 2}, 1), matmul(h, filled({2, 1}, 1))));
    return std::vector<Tensor>{h * filled({1}, static_cast<float>(v))};
  };
  const Tensor x = Tensor::from_f32({2, 2}, {1, -2, 3, 4});
  TracedFunction f = compile(drifting, {x});  // call 1 traces
  auto first = f({x});                        // call 2 replays relu
  BOOST_TEST(floats(first[0]) == (std::vector<float>{8, 0, 24, 32}));
  auto second = f({x});  // call 3 uses sigmoid: guard fails, call 4 re-traces
  BOOST_TEST(f.traces() == 2);
  calls = 10;
  check_close(second, drifting({x}));
}

BOOST_AUTO_TEST_SUITE_END()

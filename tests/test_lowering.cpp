#define BOOST_TEST_MODULE lowering
#include <boost/test/unit_test.hpp>

// Every op's lowering, run on the kernel IR interpreter, against the op's
// reference implementation, over the attribute combinations and broadcasting
// patterns its kernel specialises on.

#include "graph/ir.h"
#include "graph/op_registry.h"
#include "src/kernel/interpreter.h"
#include "src/kernel/ir.h"
#include "src/lower/lower.h"

#include <kiln/error.h>
#include <kiln/tensor.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using kiln::DType;
using kiln::Shape;
using kiln::Tensor;
using kiln::graph::Attributes;
using kiln::graph::TensorType;

// Uniform values in [lo, hi) from a fixed-seed generator: every run sees the same data.
Tensor random_tensor(const Shape& shape, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(static_cast<std::size_t>(kiln::num_elements(shape)));
  for (float& v : values) v = dist(rng);
  return Tensor::from_f32(shape, std::move(values));
}

// Values with |v| in [0.5, 1.5) and a random sign: safe divisors.
Tensor divisor_tensor(const Shape& shape, std::mt19937& rng) {
  Tensor t = random_tensor(shape, rng, 0.5f, 1.5f);
  std::bernoulli_distribution negative(0.5);
  for (float& v : t.values<float>())
    if (negative(rng)) v = -v;
  return t;
}

using Inputs = std::vector<std::optional<Tensor>>;  // nullopt: an omitted optional input

struct Graph1 {
  kiln::graph::Graph graph;
  const kiln::graph::Node* node = nullptr;
  std::vector<TensorType> input_types;  // one per input slot
  std::vector<TensorType> output_types;
};

// A graph holding one node of `op` whose inputs are graph inputs.
Graph1 single_node_graph(const std::string& op, const Inputs& inputs, const Attributes& attrs) {
  Graph1 g;
  std::vector<kiln::graph::ValueId> ids;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) {
      ids.push_back(-1);
      g.input_types.push_back({DType::f32, {}});
      continue;
    }
    const TensorType type{inputs[i]->dtype(), inputs[i]->shape()};
    ids.push_back(g.graph.add_input("in" + std::to_string(i), type));
    g.input_types.push_back(type);
  }
  const std::vector<kiln::graph::ValueId> outputs = g.graph.add_node(op, ids, attrs, "node0");
  g.graph.set_outputs(outputs);
  g.node = &g.graph.nodes().back();
  for (kiln::graph::ValueId id : outputs) g.output_types.push_back(g.graph.value(id).type);
  return g;
}

bool is_identifier(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// The largest |a - b|, infinite where either is NaN (an element the kernel
// never wrote stays NaN).
double max_difference(std::span<const float> actual, std::span<const float> expected) {
  double worst = 0.0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(actual[i]) - static_cast<double>(expected[i]));
    worst = std::isnan(diff) ? std::numeric_limits<double>::infinity() : std::max(worst, diff);
  }
  return worst;
}

std::string describe(const std::string& op, const Inputs& inputs, const Attributes& attrs) {
  std::ostringstream out;
  out << op << "(";
  for (std::size_t i = 0; i < inputs.size(); ++i)
    out << (i ? ", " : "") << (inputs[i] ? kiln::shape_str(inputs[i]->shape()) : "-");
  out << ")";
  for (const auto& [name, value] : attrs.all()) {
    out << " " << name << "=";
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::vector<std::int64_t>> || std::is_same_v<T, std::vector<double>>) {
            out << "[";
            for (std::size_t i = 0; i < v.size(); ++i) out << (i ? "," : "") << v[i];
            out << "]";
          } else {
            out << v;
          }
        },
        value);
  }
  return out.str();
}

// Lowers the single node, interprets its kernel and compares with the reference.
void check_op(const std::string& op, const Inputs& inputs, const Attributes& attrs = {}) {
  BOOST_TEST_CONTEXT(describe(op, inputs, attrs)) {
    Graph1 g = single_node_graph(op, inputs, attrs);
    BOOST_TEST_REQUIRE(!kiln::lower::unsupported_reason(*g.node, g.input_types, g.output_types).has_value());

    std::vector<Tensor> reference_inputs;
    for (const auto& input : inputs) reference_inputs.push_back(input ? *input : Tensor());
    const std::vector<Tensor> expected = kiln::graph::get_op(op).reference(*g.node, reference_inputs);
    BOOST_TEST_REQUIRE(expected.size() == 1u);

    const kiln::lower::LoweredNode lowered = kiln::lower::lower_node(*g.node, g.input_types, g.output_types);
    BOOST_TEST_REQUIRE((lowered.kind == kiln::lower::LoweredNode::Kind::kernel));
    BOOST_TEST_REQUIRE(lowered.kernel.has_value());
    const kiln::kir::Kernel& kernel = *lowered.kernel;
    BOOST_CHECK_NO_THROW(kiln::kir::verify(kernel));
    BOOST_TEST(is_identifier(kernel.name), "kernel name '" << kernel.name << "' is not an identifier");
    BOOST_TEST(kernel.global_size > 0);

    // Buffers: the present inputs in order, then the output (pre-filled with
    // NaN so an element the kernel misses cannot pass).
    std::vector<Tensor> buffers;
    for (const auto& input : inputs)
      if (input) buffers.push_back(input->clone());
    const std::size_t num_inputs = buffers.size();
    Tensor output(DType::f32, g.output_types[0].shape);
    for (float& v : output.values<float>()) v = std::numeric_limits<float>::quiet_NaN();
    buffers.push_back(output);
    BOOST_TEST_REQUIRE(kernel.buffers.size() == buffers.size());
    for (std::size_t i = 0; i < kernel.buffers.size(); ++i)
      BOOST_TEST((kernel.buffers[i].access == (i < num_inputs ? kiln::kir::Access::read : kiln::kir::Access::write)));

    std::vector<std::span<std::byte>> spans;
    for (Tensor& t : buffers) spans.push_back(t.bytes());
    kiln::kir::interpret(kernel, spans);

    // Inputs are untouched; the output matches the reference.
    for (std::size_t i = 0, slot = 0; i < inputs.size(); ++i)
      if (inputs[i]) BOOST_TEST(kiln::max_abs_diff(buffers[slot++], *inputs[i]) == 0.0f);
    const auto expected_values = expected[0].values<float>();
    double scale = 1.0;
    for (float v : expected_values) scale = std::max(scale, std::fabs(static_cast<double>(v)));
    const double diff = max_difference(output.values<float>(), expected_values);
    BOOST_TEST(diff <= 1e-4 * scale, "max abs diff " << diff << " exceeds " << 1e-4 * scale);
  }
}

Attributes attributes(std::initializer_list<std::pair<std::string, kiln::graph::Attribute>> entries) {
  Attributes attrs;
  for (const auto& [name, value] : entries) attrs.set(name, value);
  return attrs;
}

using Ints = std::vector<std::int64_t>;

}  // namespace

// ---- elementwise -------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(binary_ops_broadcast_every_pattern) {
  const std::vector<std::pair<Shape, Shape>> patterns = {
      {{2, 3, 4}, {2, 3, 4}},        // same shape
      {{}, {2, 3}},                  // scalar on the left
      {{2, 3}, {}},                  // scalar on the right
      {{3, 1}, {1, 4}},              // both broadcast: outer product
      {{2, 3, 4, 5}, {3, 1, 5}},     // lower rank, middle broadcast
      {{4}, {2, 3, 4}},              // trailing vector
      {{2, 1, 4}, {2, 3, 1}},        // interleaved
      {{1, 3, 1, 1}, {2, 3, 4, 5}},  // per-channel on the left
      {{2, 3, 4, 5}, {2, 3, 1, 1}},  // per-(n, c) on the right
      {{1}, {5}},                    // single element
      {{2, 1, 3, 1}, {1, 4, 1, 5}},  // alternating broadcasts
  };
  std::mt19937 rng(1);
  for (const std::string op : {"Add", "Sub", "Mul", "Div"})
    for (const auto& [a, b] : patterns) {
      const Tensor lhs = random_tensor(a, rng);
      const Tensor rhs = op == "Div" ? divisor_tensor(b, rng) : random_tensor(b, rng);
      check_op(op, {lhs, rhs});
    }
}

BOOST_AUTO_TEST_CASE(activations) {
  std::mt19937 rng(2);
  const Tensor x = random_tensor({2, 3, 5}, rng, -5.0f, 5.0f);
  check_op("Relu", {x});
  check_op("Sigmoid", {x});
  check_op("Tanh", {x});
  check_op("Gelu", {x});
  check_op("Gelu", {x}, attributes({{"approximate", std::string("none")}}));
  check_op("Gelu", {x}, attributes({{"approximate", std::string("tanh")}}));
  check_op("Relu", {random_tensor({}, rng)});  // a scalar
}

BOOST_AUTO_TEST_CASE(clip_bounds) {
  std::mt19937 rng(3);
  const Tensor x = random_tensor({4, 7}, rng, -3.0f, 3.0f);
  check_op("Clip", {x});
  check_op("Clip", {x}, attributes({{"min", -1.0}}));
  check_op("Clip", {x}, attributes({{"max", 0.5}}));
  check_op("Clip", {x}, attributes({{"min", 0.0}, {"max", 6.0}}));
  check_op("Clip", {x}, attributes({{"min", -0.25}, {"max", -0.25}}));
}

BOOST_AUTO_TEST_CASE(batch_normalization) {
  std::mt19937 rng(4);
  for (const Shape& shape : {Shape{2, 3, 4, 5}, Shape{2, 4}, Shape{1, 3, 2, 2, 2}, Shape{3, 1, 2}}) {
    const Shape channels = {shape[1]};
    const Inputs inputs = {random_tensor(shape, rng), random_tensor(channels, rng, 0.5f, 2.0f),
                           random_tensor(channels, rng), random_tensor(channels, rng),
                           random_tensor(channels, rng, 0.1f, 2.0f)};
    check_op("BatchNormalization", inputs);
    check_op("BatchNormalization", inputs, attributes({{"epsilon", 1e-2}}));
  }
}

// ---- convolution -------------------------------------------------------------------

namespace {

// A Conv with random X [n, c, h, w], W [m, c / group, kh, kw] and an optional bias.
void check_conv(Shape x, Shape w, bool bias, const Attributes& attrs, unsigned seed) {
  std::mt19937 rng(seed);
  Inputs inputs = {random_tensor(x, rng), random_tensor(w, rng)};
  if (bias) inputs.push_back(random_tensor({w[0]}, rng));
  check_op("Conv", inputs, attrs);
}

}  // namespace

BOOST_AUTO_TEST_CASE(conv_basic) {
  check_conv({1, 3, 6, 6}, {4, 3, 3, 3}, true, attributes({{"pads", Ints{1, 1, 1, 1}}}), 10);
  check_conv({1, 3, 6, 6}, {4, 3, 3, 3}, false, attributes({{"pads", Ints{1, 1, 1, 1}}}), 11);
  check_conv({2, 3, 5, 4}, {2, 3, 3, 3}, true, {}, 12);                            // no padding
  check_conv({1, 4, 5, 5}, {3, 4, 1, 1}, true, {}, 13);                            // 1x1
  check_conv({1, 2, 7, 7}, {3, 2, 1, 1}, false, attributes({{"strides", Ints{2, 2}}}), 14);  // 1x1 stride 2
  check_conv({1, 2, 6, 6}, {2, 2, 3, 3}, true, attributes({{"kernel_shape", Ints{3, 3}}}), 15);
}

BOOST_AUTO_TEST_CASE(conv_strides_pads_dilations) {
  check_conv({1, 2, 7, 7}, {3, 2, 3, 3}, true,
             attributes({{"strides", Ints{2, 2}}, {"pads", Ints{0, 1, 2, 1}}}), 20);  // asymmetric pads
  check_conv({1, 2, 8, 8}, {2, 2, 3, 3}, true,
             attributes({{"dilations", Ints{2, 2}}, {"pads", Ints{2, 2, 2, 2}}}), 21);
  check_conv({2, 3, 7, 9}, {4, 3, 2, 3}, false,
             attributes({{"strides", Ints{2, 1}}, {"dilations", Ints{1, 2}}, {"pads", Ints{1, 0, 0, 2}}}), 22);
  check_conv({1, 1, 5, 5}, {1, 1, 3, 3}, true, attributes({{"pads", Ints{2, 0, 0, 2}}}), 23);
  check_conv({1, 2, 9, 9}, {2, 2, 3, 3}, true,
             attributes({{"strides", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}}), 24);  // last window overhangs
}

BOOST_AUTO_TEST_CASE(conv_groups) {
  check_conv({1, 4, 5, 5}, {6, 2, 3, 3}, true, attributes({{"group", std::int64_t{2}}, {"pads", Ints{1, 1, 1, 1}}}), 30);
  // Depthwise (group = channels), with and without a channel multiplier.
  check_conv({2, 3, 5, 5}, {3, 1, 3, 3}, true, attributes({{"group", std::int64_t{3}}, {"pads", Ints{1, 1, 1, 1}}}), 31);
  check_conv({1, 2, 6, 6}, {4, 1, 3, 3}, false,
             attributes({{"group", std::int64_t{2}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}), 32);
  check_conv({1, 6, 4, 4}, {3, 2, 1, 1}, true, attributes({{"group", std::int64_t{3}}}), 33);
}

BOOST_AUTO_TEST_CASE(conv_fused_relu) {
  check_conv({1, 3, 5, 5}, {4, 3, 3, 3}, true,
             attributes({{"pads", Ints{1, 1, 1, 1}}, {"activation", std::string("Relu")}}), 40);
  check_conv({1, 3, 5, 5}, {4, 3, 3, 3}, false, attributes({{"activation", std::string("Relu")}}), 41);
  check_conv({1, 4, 5, 5}, {4, 1, 3, 3}, true, attributes({{"group", std::int64_t{4}}, {"activation", std::string("")}}), 42);
}

// ---- Gemm and MatMul ---------------------------------------------------------------

BOOST_AUTO_TEST_CASE(gemm_transposes_and_scaling) {
  std::mt19937 rng(50);
  const std::int64_t m = 3, k = 5, n = 4;
  for (std::int64_t trans_a : {0, 1})
    for (std::int64_t trans_b : {0, 1}) {
      const Tensor a = random_tensor(trans_a ? Shape{k, m} : Shape{m, k}, rng);
      const Tensor b = random_tensor(trans_b ? Shape{n, k} : Shape{k, n}, rng);
      const Attributes attrs = attributes({{"transA", trans_a}, {"transB", trans_b}});
      check_op("Gemm", {a, b}, attrs);
      check_op("Gemm", {a, b, random_tensor({m, n}, rng)}, attrs);
    }
  const Tensor a = random_tensor({m, k}, rng), b = random_tensor({k, n}, rng), c = random_tensor({n}, rng);
  check_op("Gemm", {a, b, c}, attributes({{"alpha", 0.5}, {"beta", 2.0}}));
  check_op("Gemm", {a, b, c}, attributes({{"alpha", -1.5}}));
  check_op("Gemm", {a, b, c}, attributes({{"beta", 0.0}}));
  check_op("Gemm", {a, b}, attributes({{"alpha", 3.0}, {"beta", 0.25}}));
}

BOOST_AUTO_TEST_CASE(gemm_bias_broadcasts) {
  std::mt19937 rng(51);
  const Tensor a = random_tensor({3, 6}, rng), b = random_tensor({6, 4}, rng);
  for (const Shape& c : {Shape{4}, Shape{3, 4}, Shape{3, 1}, Shape{1, 4}, Shape{}, Shape{1}, Shape{1, 1}})
    check_op("Gemm", {a, b, random_tensor(c, rng)});
}

BOOST_AUTO_TEST_CASE(gemm_fused_relu) {
  std::mt19937 rng(52);
  const Tensor a = random_tensor({4, 8}, rng), b = random_tensor({5, 8}, rng), c = random_tensor({5}, rng);
  check_op("Gemm", {a, b, c}, attributes({{"transB", std::int64_t{1}}, {"activation", std::string("Relu")}}));
  check_op("Gemm", {a, b}, attributes({{"transB", std::int64_t{1}}, {"activation", std::string("Relu")}}));
}

BOOST_AUTO_TEST_CASE(matmul_batched_and_broadcast) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {4, 5}},          {{2, 3, 4}, {4, 5}},        {{3, 4}, {2, 4, 5}},
      {{2, 3, 4}, {2, 4, 5}},    {{1, 3, 4}, {2, 4, 5}},     {{2, 1, 3, 4}, {3, 4, 2}},
      {{4}, {4, 5}},             {{3, 4}, {4}},              {{4}, {4}},
      {{4}, {2, 4, 3}},          {{2, 2, 3, 4}, {4}},        {{1, 1}, {1, 1}},
  };
  std::mt19937 rng(60);
  for (const auto& [a, b] : cases) check_op("MatMul", {random_tensor(a, rng), random_tensor(b, rng)});
}

// ---- Softmax and LayerNormalization ---------------------------------------------------

BOOST_AUTO_TEST_CASE(softmax_axes) {
  std::mt19937 rng(70);
  const Tensor x = random_tensor({2, 3, 4}, rng, -3.0f, 3.0f);
  check_op("Softmax", {x});
  for (std::int64_t axis : {-3, -2, -1, 0, 1, 2}) check_op("Softmax", {x}, attributes({{"axis", axis}}));
  check_op("Softmax", {random_tensor({7}, rng)});
  check_op("Softmax", {random_tensor({3, 1}, rng)});  // rows of one element
}

BOOST_AUTO_TEST_CASE(softmax_is_stable_for_large_inputs) {
  std::mt19937 rng(71);
  // exp of these overflows f32 unless the row maximum is subtracted first.
  check_op("Softmax", {random_tensor({3, 5}, rng, 80.0f, 120.0f)});
  check_op("Softmax", {random_tensor({3, 5}, rng, -120.0f, -80.0f)}, attributes({{"axis", std::int64_t{0}}}));
}

BOOST_AUTO_TEST_CASE(layer_normalization) {
  std::mt19937 rng(80);
  const Tensor x = random_tensor({2, 3, 4}, rng, -2.0f, 3.0f);
  check_op("LayerNormalization", {x, random_tensor({4}, rng), random_tensor({4}, rng)});
  check_op("LayerNormalization", {x, random_tensor({4}, rng)});  // no B
  check_op("LayerNormalization", {x, random_tensor({4}, rng), std::nullopt});
  check_op("LayerNormalization", {x, random_tensor({3, 4}, rng), random_tensor({3, 4}, rng)},
           attributes({{"axis", std::int64_t{1}}}));
  check_op("LayerNormalization", {x, random_tensor({4}, rng), random_tensor({1, 4}, rng)},
           attributes({{"axis", std::int64_t{-2}}}));  // Scale and B broadcast over [3, 4]
  check_op("LayerNormalization", {x, random_tensor({3, 1}, rng), random_tensor({1}, rng)},
           attributes({{"axis", std::int64_t{1}}, {"epsilon", 1e-3}}));
  check_op("LayerNormalization", {x, random_tensor({2, 3, 4}, rng), random_tensor({2, 3, 4}, rng)},
           attributes({{"axis", std::int64_t{0}}}));
  // A large mean: the two-pass variance does not cancel.
  check_op("LayerNormalization", {random_tensor({2, 16}, rng, 1000.0f, 1001.0f), random_tensor({16}, rng)});
}

// ---- pooling -----------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(max_pool) {
  std::mt19937 rng(90);
  const Tensor x = random_tensor({2, 2, 6, 6}, rng);
  check_op("MaxPool", {x}, attributes({{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}));
  check_op("MaxPool", {x}, attributes({{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}}));
  check_op("MaxPool", {x}, attributes({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}},
                                       {"pads", Ints{1, 1, 1, 1}}}));
  check_op("MaxPool", {x}, attributes({{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 2}}}));
  check_op("MaxPool", {x}, attributes({{"kernel_shape", Ints{2, 3}}, {"strides", Ints{1, 2}},
                                       {"pads", Ints{1, 0, 0, 1}}}));
  // ceil_mode: the last window overhangs the input.
  const Tensor odd = random_tensor({1, 2, 7, 6}, rng);
  check_op("MaxPool", {odd}, attributes({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}},
                                         {"ceil_mode", std::int64_t{1}}}));
  check_op("MaxPool", {odd}, attributes({{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}},
                                         {"pads", Ints{1, 1, 1, 1}}, {"ceil_mode", std::int64_t{1}}}));
  // All-negative input: padding must never win.
  check_op("MaxPool", {random_tensor({1, 1, 4, 4}, rng, -3.0f, -1.0f)},
           attributes({{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}}));
}

BOOST_AUTO_TEST_CASE(average_pool) {
  std::mt19937 rng(91);
  const Tensor x = random_tensor({2, 2, 6, 6}, rng, 0.0f, 2.0f);
  const Tensor odd = random_tensor({1, 2, 7, 6}, rng, 0.0f, 2.0f);
  check_op("AveragePool", {x}, attributes({{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}));
  for (std::int64_t include_pad : {0, 1}) {
    check_op("AveragePool", {x}, attributes({{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}},
                                             {"count_include_pad", include_pad}}));
    check_op("AveragePool", {x}, attributes({{"kernel_shape", Ints{3, 2}}, {"strides", Ints{2, 1}},
                                             {"pads", Ints{0, 1, 2, 0}}, {"count_include_pad", include_pad}}));
    // ceil_mode windows leave the padded input: count_include_pad counts
    // only the taps inside it.
    check_op("AveragePool", {odd}, attributes({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}},
                                               {"ceil_mode", std::int64_t{1}}, {"count_include_pad", include_pad}}));
    check_op("AveragePool", {odd}, attributes({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}},
                                               {"pads", Ints{1, 1, 1, 1}}, {"ceil_mode", std::int64_t{1}},
                                               {"count_include_pad", include_pad}}));
  }
}

BOOST_AUTO_TEST_CASE(global_average_pool) {
  std::mt19937 rng(92);
  check_op("GlobalAveragePool", {random_tensor({2, 3, 4, 5}, rng)});
  check_op("GlobalAveragePool", {random_tensor({1, 2, 3}, rng)});
  check_op("GlobalAveragePool", {random_tensor({1, 2, 2, 3, 2}, rng)});
  check_op("GlobalAveragePool", {random_tensor({2, 2, 1, 1}, rng)});
}

// ---- shape ops ---------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(transpose_perms) {
  std::mt19937 rng(100);
  const Tensor x3 = random_tensor({2, 3, 4}, rng);
  check_op("Transpose", {x3});  // default: reversed
  check_op("Transpose", {x3}, attributes({{"perm", Ints{0, 2, 1}}}));
  check_op("Transpose", {x3}, attributes({{"perm", Ints{1, 0, 2}}}));
  check_op("Transpose", {x3}, attributes({{"perm", Ints{0, 1, 2}}}));
  check_op("Transpose", {random_tensor({3, 5}, rng)}, attributes({{"perm", Ints{1, 0}}}));
  const Tensor x4 = random_tensor({2, 3, 4, 5}, rng);
  check_op("Transpose", {x4}, attributes({{"perm", Ints{0, 2, 3, 1}}}));
  check_op("Transpose", {x4}, attributes({{"perm", Ints{3, 1, 0, 2}}}));
  check_op("Transpose", {random_tensor({1, 2, 1, 3}, rng)}, attributes({{"perm", Ints{2, 0, 3, 1}}}));
}

BOOST_AUTO_TEST_CASE(concat_axes) {
  std::mt19937 rng(110);
  const Tensor a = random_tensor({2, 3, 4}, rng);
  check_op("Concat", {a, random_tensor({1, 3, 4}, rng)}, attributes({{"axis", std::int64_t{0}}}));
  check_op("Concat", {a, random_tensor({2, 2, 4}, rng), random_tensor({2, 1, 4}, rng)},
           attributes({{"axis", std::int64_t{1}}}));
  check_op("Concat", {a, random_tensor({2, 3, 5}, rng)}, attributes({{"axis", std::int64_t{-1}}}));
  check_op("Concat", {a, random_tensor({2, 5, 4}, rng)}, attributes({{"axis", std::int64_t{-2}}}));
  check_op("Concat", {a}, attributes({{"axis", std::int64_t{1}}}));  // one input
  check_op("Concat", {random_tensor({3}, rng), random_tensor({2}, rng), random_tensor({1}, rng),
                      random_tensor({4}, rng)},
           attributes({{"axis", std::int64_t{0}}}));
}

BOOST_AUTO_TEST_CASE(reshape_flatten_identity_are_aliases) {
  std::mt19937 rng(120);
  const Tensor x = random_tensor({2, 3, 4}, rng);
  const std::vector<std::pair<std::string, Attributes>> cases = {
      {"Reshape", attributes({{"shape", Ints{0, -1}}})},
      {"Flatten", attributes({{"axis", std::int64_t{2}}})},
      {"Flatten", {}},
      {"Identity", {}},
  };
  for (const auto& [op, attrs] : cases) {
    BOOST_TEST_CONTEXT(describe(op, {x}, attrs)) {
      Graph1 g = single_node_graph(op, {x}, attrs);
      const kiln::lower::LoweredNode lowered = kiln::lower::lower_node(*g.node, g.input_types, g.output_types);
      BOOST_TEST((lowered.kind == kiln::lower::LoweredNode::Kind::alias));
      BOOST_TEST(!lowered.kernel.has_value());
      // The alias is sound: the reference output is the input's bytes.
      const std::vector<Tensor> expected = kiln::graph::get_op(op).reference(*g.node, std::vector<Tensor>{x});
      BOOST_TEST(kiln::max_abs_diff(expected[0].reshaped(x.shape()), x) == 0.0f);
    }
  }
}

// ---- kernels, conventions and unsupported nodes ----------------------------------

BOOST_AUTO_TEST_CASE(kernels_use_the_default_workgroup_size) {
  std::mt19937 rng(130);
  Graph1 g = single_node_graph("Relu", {random_tensor({100}, rng)}, {});
  const auto lowered = kiln::lower::lower_node(*g.node, g.input_types, g.output_types);
  BOOST_TEST(lowered.kernel->workgroup_size == 64u);
  BOOST_TEST(lowered.kernel->global_size == 100);
}

BOOST_AUTO_TEST_CASE(present_input_types_only_are_accepted) {
  // Callers may pass one type per slot or only the present inputs' types.
  std::mt19937 rng(131);
  Graph1 g = single_node_graph("Conv", {random_tensor({1, 2, 4, 4}, rng), random_tensor({3, 2, 3, 3}, rng), std::nullopt},
                               {});
  const std::vector<TensorType> present = {g.input_types[0], g.input_types[1]};
  const auto per_slot = kiln::lower::lower_node(*g.node, g.input_types, g.output_types);
  const auto present_only = kiln::lower::lower_node(*g.node, present, g.output_types);
  BOOST_TEST(per_slot.kernel->buffers.size() == 3u);  // x, w, y: no bias buffer
  BOOST_TEST(kiln::kir::print(*per_slot.kernel) == kiln::kir::print(*present_only.kernel));
}

namespace {

kiln::graph::Node manual_node(const std::string& op, std::size_t num_inputs, Attributes attrs = {}) {
  kiln::graph::Node node;
  node.id = 0;
  node.op = op;
  node.name = "n0";
  for (std::size_t i = 0; i < num_inputs; ++i) node.inputs.push_back(static_cast<kiln::graph::ValueId>(i));
  node.outputs = {static_cast<kiln::graph::ValueId>(num_inputs)};
  node.attrs = std::move(attrs);
  return node;
}

// The reason why a node is unsupported ("" if it is supported); lower_node
// must then throw Unsupported naming the node and op, and repeat the reason.
std::string unsupported(const kiln::graph::Node& node, const std::vector<TensorType>& inputs,
                        const std::vector<TensorType>& outputs) {
  const std::optional<std::string> reason = kiln::lower::unsupported_reason(node, inputs, outputs);
  if (!reason) return "";
  try {
    kiln::lower::lower_node(node, inputs, outputs);
    BOOST_ERROR("lower_node accepted a node with reason: " << *reason);
  } catch (const kiln::Error& error) {
    BOOST_TEST((error.kind() == kiln::ErrorKind::Unsupported));
    const std::string message = error.what();
    BOOST_TEST(message.find("node '" + node.name + "' (" + node.op + ")") == 0u, message);
    BOOST_TEST(message.find(*reason) != std::string::npos, message);
  }
  return *reason;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_CASE(kernels_take_the_dtypes_their_op_declares) {
  const TensorType i64{DType::i64, {2, 3}};
  const TensorType f16{DType::f16, {2, 3}}, bf16{DType::bf16, {2, 3}}, u8{DType::u8, {2, 3}};
  // Float math is f32 only; integer arithmetic has kernels; u8 has none.
  const std::string relu = unsupported(manual_node("Relu", 1), {i64}, {i64});
  BOOST_TEST(contains(relu, "i64"), relu);
  BOOST_TEST(unsupported(manual_node("Add", 2), {i64, i64}, {i64}) == "");
  const std::string bytes = unsupported(manual_node("Relu", 1), {u8}, {u8});
  BOOST_TEST(contains(bytes, "u8"), bytes);
  // 16-bit floats lower as their f32 twins, with 16-bit buffers.
  BOOST_TEST(unsupported(manual_node("Relu", 1), {f16}, {f16}) == "");
  const kiln::lower::LoweredNode add = kiln::lower::lower_node(manual_node("Add", 2), std::vector<TensorType>{bf16, bf16},
                                                               std::vector<TensorType>{bf16});
  BOOST_TEST_REQUIRE(add.kernel.has_value());
  for (const kiln::kir::BufferParam& b : add.kernel->buffers) BOOST_TEST((b.type == kiln::kir::ScalarType::bf16), b.name);
  const kiln::lower::LoweredNode cast = kiln::lower::lower_node(
      manual_node("Cast", 1, attributes({{"to", std::int64_t{16}}})), std::vector<TensorType>{f16}, std::vector<TensorType>{bf16});
  BOOST_TEST_REQUIRE(cast.kernel.has_value());  // both widen to f32, yet the bits differ: a kernel, not a view
  BOOST_TEST((cast.kernel->buffers.at(0).type == kiln::kir::ScalarType::f16));
  BOOST_TEST((cast.kernel->buffers.at(1).type == kiln::kir::ScalarType::bf16));
  // Aliases move no data, so any dtype is fine for them.
  BOOST_TEST(unsupported(manual_node("Identity", 1), {i64}, {i64}) == "");
}

// A matrix-vector product of bf16 operands on a CPU device reads them
// through texel buffers where the device has 16-bit texel views, and from
// storage buffers where it does not.
BOOST_AUTO_TEST_CASE(sixteen_bit_operands_stay_texel_buffers_where_the_target_has_them) {
  const TensorType x{DType::bf16, {1, 256}}, w{DType::bf16, {256, 512}}, y{DType::bf16, {1, 512}};
  kiln::lower::LowerTarget lavapipe{"vulkan", 8, 1024, 32768, kiln::lower::DeviceClass::emulated_gpu, true, std::uint64_t{1} << 27};
  auto texel_widths = [&](const kiln::lower::LowerTarget& target) {
    const kiln::lower::LoweredNode product = kiln::lower::lower_node(
        manual_node("MatMul", 2), std::vector<TensorType>{x, w}, std::vector<TensorType>{y}, target);
    BOOST_TEST_REQUIRE(product.kernel.has_value());
    std::vector<std::uint32_t> widths;
    for (const kiln::kir::BufferParam& b : product.kernel->buffers) {
      BOOST_TEST((b.type == kiln::kir::ScalarType::bf16), b.name);
      widths.push_back(b.texel_width);
    }
    return widths;
  };
  const std::vector<std::uint32_t> storage = texel_widths(lavapipe);
  BOOST_TEST(std::count(storage.begin(), storage.end(), 0u) == 3);
  lavapipe.texel_16bit = true;
  const std::vector<std::uint32_t> texels = texel_widths(lavapipe);
  BOOST_TEST(texels.at(0) != 0u);  // the vector
  BOOST_TEST(texels.at(1) != 0u);  // the weight
  BOOST_TEST(texels.at(2) == 0u);  // the output stays a storage buffer
}

BOOST_AUTO_TEST_CASE(unknown_ops_are_unsupported) {
  const TensorType f{DType::f32, {4}};
  const std::string reason = unsupported(manual_node("FrobnicateFoo", 1), {f}, {f});
  BOOST_TEST(contains(reason, "FrobnicateFoo"), reason);
}

BOOST_AUTO_TEST_CASE(what_kernels_cannot_do_is_unsupported) {
  const TensorType f4{DType::f32, {4}};
  // More elements than i32 indices reach.
  const TensorType huge{DType::f32, {65536, 65536}};
  BOOST_TEST(contains(unsupported(manual_node("Relu", 1), {huge}, {huge}), "2^31"));
  // 1-D convolution and pooling.
  const TensorType x1d{DType::f32, {1, 2, 8}}, w1d{DType::f32, {3, 2, 3}}, y1d{DType::f32, {1, 3, 6}};
  BOOST_TEST(contains(unsupported(manual_node("Conv", 2), {x1d, w1d}, {y1d}), "2-D"));
  BOOST_TEST(contains(unsupported(manual_node("MaxPool", 1, attributes({{"kernel_shape", Ints{3}}})), {x1d},
                                  {{DType::f32, {1, 2, 6}}}),
                      "2-D"));
  // auto_pad, an unknown fused activation, a malformed attribute.
  const TensorType x{DType::f32, {1, 2, 5, 5}}, w{DType::f32, {3, 2, 3, 3}}, y{DType::f32, {1, 3, 5, 5}};
  BOOST_TEST(contains(unsupported(manual_node("Conv", 2, attributes({{"auto_pad", std::string("SAME_UPPER")}})),
                                  {x, w}, {y}),
                      "auto_pad"));
  BOOST_TEST(contains(unsupported(manual_node("Conv", 2, attributes({{"pads", Ints{1, 1, 1, 1}},
                                                                     {"activation", std::string("Tanh")}})),
                                  {x, w}, {y}),
                      "Tanh"));
  BOOST_TEST(contains(unsupported(manual_node("Conv", 2, attributes({{"pads", Ints{1, 1}}})), {x, w}, {y}), "pads"));
  // Outputs beyond the first (MaxPool's Indices).
  const TensorType p{DType::f32, {1, 2, 2, 2}};
  BOOST_TEST(contains(unsupported(manual_node("MaxPool", 1, attributes({{"kernel_shape", Ints{2, 2}},
                                                                        {"strides", Ints{2, 2}}})),
                                  {x}, {p, {DType::i64, p.shape}}),
                      "outputs"));
  // Inconsistent output shapes are refused rather than silently mis-indexed.
  BOOST_TEST(contains(unsupported(manual_node("Transpose", 1), {{DType::f32, {2, 3}}}, {{DType::f32, {2, 3}}}),
                      "expected"));
  // Empty outputs lower to nothing: no kernel, no graph break.
  const TensorType empty{DType::f32, {0, 4}};
  BOOST_TEST(unsupported(manual_node("Relu", 1), {empty}, {empty}) == "");
  const kiln::graph::Node relu = manual_node("Relu", 1);
  BOOST_TEST((kiln::lower::lower_node(relu, std::vector<TensorType>{empty}, std::vector<TensorType>{empty}).kind ==
              kiln::lower::LoweredNode::Kind::empty));
  BOOST_TEST(unsupported(manual_node("Relu", 1), {f4}, {f4}) == "");
}

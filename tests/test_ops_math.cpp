#define BOOST_TEST_MODULE ops_math
#include <boost/test/unit_test.hpp>

// The math op family (unary math, HardSigmoid/HardSwish, Pow, Min/Max,
// comparisons, logic, Where, Cast, Reduce*, CumSum, ArgMax/ArgMin,
// LogSoftmax): shape inference and its
// errors, reference values computed by hand, and every f32 lowering run on
// the kernel IR interpreter against the reference.
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <optional>
#include <string>

#include "graph/ir.h"
#include "graph/op_registry.h"
#include "src/kernel/interpreter.h"
#include "src/lower/lower.h"

using namespace kiln;
using namespace kiln::graph;

namespace {

using Ints = std::vector<std::int64_t>;
using Floats = std::vector<float>;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Attributes attrs_of(std::initializer_list<std::pair<std::string, Attribute>> list) {
  Attributes attrs;
  for (const auto& [name, value] : list) attrs.set(name, value);
  return attrs;
}

Tensor f32(Shape shape, Floats values) { return Tensor::from_f32(std::move(shape), std::move(values)); }
Tensor i64(Shape shape, Ints values) { return Tensor::from_i64(std::move(shape), std::move(values)); }

Tensor boolean(Shape shape, std::vector<std::uint8_t> values) {
  Tensor t(DType::boolean, std::move(shape));
  std::copy(values.begin(), values.end(), t.values<std::uint8_t>().begin());
  return t;
}

// Uniform values in [lo, hi) from a fixed seed.
Tensor uniform(Shape shape, float lo, float hi, std::uint64_t seed = 7) {
  Tensor t(DType::f32, std::move(shape));
  std::uint64_t state = seed;
  for (float& v : t.values<float>()) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = lo + (hi - lo) * (static_cast<float>(state >> 40) / static_cast<float>(1ull << 24));
  }
  return t;
}

// A graph with one node of `op` whose inputs are graph inputs of these types.
struct OneNode {
  Graph graph;
  std::vector<TensorType> input_types;
  std::vector<TensorType> output_types;
  const Node& node() const { return graph.nodes().back(); }
};

OneNode one_node(const std::string& op, const std::vector<TensorType>& types, const Attributes& attrs = {}) {
  OneNode g;
  std::vector<ValueId> ids;
  for (std::size_t i = 0; i < types.size(); ++i) ids.push_back(g.graph.add_input("in" + std::to_string(i), types[i]));
  g.input_types = types;
  const std::vector<ValueId> outputs = g.graph.add_node(op, ids, attrs, "node0");
  g.graph.set_outputs(outputs);
  for (ValueId id : outputs) g.output_types.push_back(g.graph.value(id).type);
  return g;
}

// The inferred output type of one node.
TensorType infer(const std::string& op, const std::vector<TensorType>& types, const Attributes& attrs = {}) {
  return one_node(op, types, attrs).output_types.at(0);
}

// Shape inference must throw `kind` with a message containing every piece of `expected`.
void expect_infer_error(const std::string& op, const std::vector<TensorType>& types, const Attributes& attrs,
                        ErrorKind kind, const std::vector<std::string>& expected) {
  try {
    one_node(op, types, attrs);
    BOOST_ERROR(op << ": expected an error");
  } catch (const Error& error) {
    const std::string message = error.what();
    BOOST_TEST(error.kind() == kind, op << ": kind " << error.kind() << ", message: " << message);
    for (const std::string& piece : expected)
      BOOST_TEST(message.find(piece) != std::string::npos, op << ": '" << piece << "' missing from: " << message);
  }
}

// Runs one op's reference on the given inputs.
Tensor run(const std::string& op, const std::vector<Tensor>& inputs, const Attributes& attrs = {}) {
  Node node;
  node.op = op;
  node.name = op;
  node.attrs = attrs;
  for (std::size_t i = 0; i < inputs.size(); ++i) node.inputs.push_back(static_cast<ValueId>(i));
  const std::vector<Tensor> out = get_op(op).reference(node, inputs);
  BOOST_REQUIRE(out.size() == 1u);
  return out[0];
}

void expect_f32(const Tensor& actual, const Shape& shape, const Floats& expected, float tolerance = 1e-6f) {
  BOOST_TEST((actual.dtype() == DType::f32));
  BOOST_TEST((actual.shape() == shape));
  BOOST_REQUIRE(actual.numel() == static_cast<std::int64_t>(expected.size()));
  auto v = actual.values<float>();
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (std::isnan(expected[i])) {
      BOOST_TEST(std::isnan(v[i]), "element " << i << ": got " << v[i] << ", expected NaN");
    } else if (std::isinf(expected[i])) {
      BOOST_TEST(v[i] == expected[i], "element " << i << ": got " << v[i] << ", expected " << expected[i]);
    } else {
      BOOST_TEST(std::fabs(v[i] - expected[i]) <= tolerance,
                 "element " << i << ": got " << v[i] << ", expected " << expected[i]);
    }
  }
}

template <class T>
void expect_exact(const Tensor& actual, DType dtype, const Shape& shape, const std::vector<T>& expected) {
  BOOST_TEST((actual.dtype() == dtype));
  BOOST_TEST((actual.shape() == shape));
  BOOST_REQUIRE(actual.numel() == static_cast<std::int64_t>(expected.size()));
  auto v = actual.values<T>();
  for (std::size_t i = 0; i < expected.size(); ++i)
    BOOST_TEST(static_cast<std::int64_t>(v[i]) == static_cast<std::int64_t>(expected[i]), "element " << i);
}

void expect_bool(const Tensor& actual, const Shape& shape, const std::vector<std::uint8_t>& expected) {
  expect_exact<std::uint8_t>(actual, DType::boolean, shape, expected);
}

// Lowers the node, interprets its kernel on the inputs and compares the
// output with the reference (relative to the largest reference magnitude).
void check_lowered(const std::string& op, const std::vector<Tensor>& inputs, const Attributes& attrs = {}) {
  std::vector<TensorType> types;
  for (const Tensor& t : inputs) types.push_back({t.dtype(), t.shape()});
  BOOST_TEST_CONTEXT(op << " on " << (types.empty() ? "" : type_str(types[0]))) {
    OneNode g = one_node(op, types, attrs);
    const std::optional<std::string> reason = lower::unsupported_reason(g.node(), g.input_types, g.output_types);
    BOOST_TEST_REQUIRE(!reason.has_value(), "unsupported: " << reason.value_or(""));
    const lower::LoweredNode lowered = lower::lower_node(g.node(), g.input_types, g.output_types);
    BOOST_TEST_REQUIRE((lowered.kind == lower::LoweredNode::Kind::kernel));
    const kir::Kernel& kernel = *lowered.kernel;
    BOOST_REQUIRE(kernel.buffers.size() == inputs.size() + 1);

    std::vector<Tensor> buffers;
    for (const Tensor& t : inputs) buffers.push_back(t.clone());
    Tensor output(DType::f32, g.output_types[0].shape);
    for (float& v : output.values<float>()) v = kNaN;  // an element the kernel misses cannot pass
    buffers.push_back(output);
    std::vector<std::span<std::byte>> spans;
    for (Tensor& t : buffers) spans.push_back(t.bytes());
    kir::interpret(kernel, spans);

    const Tensor expected = run_reference(g.graph, inputs).at(0);
    double scale = 1.0;
    for (float v : expected.values<float>()) scale = std::max(scale, std::fabs(static_cast<double>(v)));
    double worst = 0.0;
    auto got = output.values<float>();
    auto want = expected.values<float>();
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double diff = std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i]));
      worst = std::isnan(diff) ? kInf : std::max(worst, diff);
    }
    BOOST_TEST(worst <= 1e-5 * scale, "max |kernel - reference| = " << worst << ", scale " << scale);
  }
}

std::optional<std::string> lowering_reason(const std::string& op, const std::vector<TensorType>& types,
                                           const Attributes& attrs = {}) {
  OneNode g = one_node(op, types, attrs);
  return lower::unsupported_reason(g.node(), g.input_types, g.output_types);
}

const TensorType kF32x23{DType::f32, {2, 3}};

}  // namespace

// ---- shape inference ---------------------------------------------------------------

BOOST_AUTO_TEST_CASE(inference_gives_broadcast_shapes_and_result_dtypes) {
  BOOST_TEST((infer("Sqrt", {kF32x23}) == kF32x23));
  BOOST_TEST((infer("Neg", {{DType::i64, {4}}}) == (TensorType{DType::i64, {4}})));
  BOOST_TEST((infer("Pow", {{DType::i64, {3, 1}}, {DType::f32, {4}}}) == (TensorType{DType::i64, {3, 4}})));
  BOOST_TEST((infer("Max", {{DType::f32, {2, 1, 4}}, {DType::f32, {3, 1}}, {DType::f32, {}}}) ==
             (TensorType{DType::f32, {2, 3, 4}})));
  BOOST_TEST((infer("Equal", {{DType::i64, {2, 1}}, {DType::i64, {5}}}) == (TensorType{DType::boolean, {2, 5}})));
  BOOST_TEST((infer("Where", {{DType::boolean, {1, 3}}, {DType::i64, {2, 1}}, {DType::i64, {}}}) ==
             (TensorType{DType::i64, {2, 3}})));
  BOOST_TEST((infer("Cast", {kF32x23}, attrs_of({{"to", std::int64_t{10}}})) == (TensorType{DType::f16, {2, 3}})));
  BOOST_TEST((infer("ReduceSum", {{DType::f32, {2, 3, 4}}}, attrs_of({{"axes", Ints{0, -1}}, {"keepdims", std::int64_t{0}}})) ==
             (TensorType{DType::f32, {3}})));
  BOOST_TEST((infer("ReduceMean", {{DType::f32, {2, 3, 4}}}, attrs_of({{"axes", Ints{1}}})) ==
             (TensorType{DType::f32, {2, 1, 4}})));
  BOOST_TEST((infer("ReduceMax", {{DType::f32, {2, 3}}}, attrs_of({{"keepdims", std::int64_t{0}}})) ==
             (TensorType{DType::f32, {}})));
  BOOST_TEST((infer("ReduceMin", {{DType::f32, {2, 3}}}, attrs_of({{"noop_with_empty_axes", std::int64_t{1}}})) ==
             kF32x23));
  BOOST_TEST((infer("CumSum", {{DType::i64, {5}}}, attrs_of({{"axis", std::int64_t{0}}})) ==
             (TensorType{DType::i64, {5}})));
}

BOOST_AUTO_TEST_CASE(inference_errors_name_the_problem) {
  expect_infer_error("Pow", {{DType::f32, {2, 3}}, {DType::f32, {4}}}, {}, ErrorKind::ShapeMismatch,
                     {"node0", "[2, 3]", "[4]"});
  expect_infer_error("Max", {{DType::f32, {2}}, {DType::i64, {2}}}, {}, ErrorKind::ShapeMismatch,
                     {"f32[2]", "i64[2]"});
  expect_infer_error("Equal", {{DType::f32, {2}}, {DType::i64, {2}}}, {}, ErrorKind::ShapeMismatch, {"dtypes differ"});
  expect_infer_error("Where", {{DType::f32, {2}}, {DType::f32, {2}}, {DType::f32, {2}}}, {}, ErrorKind::Unsupported,
                     {"condition f32[2]", "bool"});
  expect_infer_error("Sqrt", {{DType::i64, {2}}}, {}, ErrorKind::Unsupported, {"i64", "f32"});
  expect_infer_error("And", {{DType::boolean, {2}}, {DType::f32, {2}}}, {}, ErrorKind::Unsupported, {"input B"});
  expect_infer_error("Cast", {kF32x23}, {}, ErrorKind::InvalidArgument, {"'to'"});
  expect_infer_error("Cast", {kF32x23}, attrs_of({{"to", std::int64_t{11}}}), ErrorKind::Unsupported, {"11"});
  expect_infer_error("HardSigmoid", {kF32x23}, attrs_of({{"gamma", 1.0}}), ErrorKind::InvalidArgument, {"'gamma'"});
  expect_infer_error("ReduceMean", {kF32x23}, attrs_of({{"axes", Ints{2}}}), ErrorKind::InvalidArgument,
                     {"'axes'", "rank 2"});
  expect_infer_error("ReduceSum", {kF32x23}, attrs_of({{"axes", Ints{1, -1}}}), ErrorKind::InvalidArgument, {"twice"});
  expect_infer_error("ReduceMax", {kF32x23}, attrs_of({{"keepdims", std::int64_t{2}}}), ErrorKind::InvalidArgument,
                     {"'keepdims'"});
  expect_infer_error("CumSum", {kF32x23}, {}, ErrorKind::InvalidArgument, {"'axis'"});
  expect_infer_error("CumSum", {{DType::f32, {}}}, attrs_of({{"axis", std::int64_t{0}}}), ErrorKind::ShapeMismatch,
                     {"scalar"});
  expect_infer_error("Not", {kF32x23}, {}, ErrorKind::Unsupported, {"f32[2, 3]"});
}

// ---- reference values ------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(unary_math_reference_values) {
  const double pi = std::numbers::pi;
  expect_f32(run("Sqrt", {f32({3}, {0, 4, 2.25f})}), {3}, {0, 2, 1.5f});
  expect_f32(run("Exp", {f32({2}, {0, 1})}), {2}, {1, static_cast<float>(std::numbers::e)});
  expect_f32(run("Log", {f32({3}, {1, static_cast<float>(std::numbers::e), 0})}), {3}, {0, 1, -kInf});
  expect_f32(run("Erf", {f32({2}, {0, 1})}), {2}, {0, 0.8427007929f});
  expect_f32(run("Sin", {f32({3}, {0, static_cast<float>(pi / 2), static_cast<float>(-pi / 6)})}), {3}, {0, 1, -0.5f});
  expect_f32(run("Cos", {f32({2}, {0, static_cast<float>(pi)})}), {2}, {1, -1});
  expect_f32(run("Reciprocal", {f32({2}, {4, -0.5f})}), {2}, {0.25f, -2});
  expect_f32(run("Floor", {f32({3}, {-1.5f, 2.7f, 3})}), {3}, {-2, 2, 3});
  expect_f32(run("Ceil", {f32({3}, {-1.5f, 2.2f, 3})}), {3}, {-1, 3, 3});
  expect_f32(run("Neg", {f32({2}, {1.5f, -2})}), {2}, {-1.5f, 2});
  expect_f32(run("Abs", {f32({2}, {-1.5f, 2})}), {2}, {1.5f, 2});
  expect_f32(run("Sign", {f32({4}, {-3, 0, 0.5f, kNaN})}), {4}, {-1, 0, 1, kNaN});
  expect_f32(run("HardSigmoid", {f32({4}, {-3, 0, 1, 3})}), {4}, {0, 0.5f, 0.7f, 1});
  expect_f32(run("HardSigmoid", {f32({2}, {0.5f, 2})}, attrs_of({{"alpha", 0.5}, {"beta", 0.0}})), {2}, {0.25f, 1});
  expect_f32(run("HardSwish", {f32({4}, {-4, 0, 1, 3})}), {4}, {0, 0, 2.0f / 3.0f, 3});
}

BOOST_AUTO_TEST_CASE(integer_unary_ops_wrap_like_twos_complement) {
  const std::int64_t lowest = std::numeric_limits<std::int64_t>::lowest();
  expect_exact<std::int64_t>(run("Neg", {i64({3}, {5, -2, lowest})}), DType::i64, {3}, {-5, 2, lowest});
  expect_exact<std::int64_t>(run("Abs", {i64({2}, {-7, 3})}), DType::i64, {2}, {7, 3});
  expect_exact<std::int64_t>(run("Sign", {i64({3}, {-7, 0, 9})}), DType::i64, {3}, {-1, 0, 1});
}

BOOST_AUTO_TEST_CASE(pow_follows_c_pow_and_keeps_the_base_dtype) {
  expect_f32(run("Pow", {f32({3}, {-2, 3, 4}), f32({}, {2})}), {3}, {4, 9, 16});
  expect_f32(run("Pow", {f32({2}, {-2, 4}), f32({2}, {3, 0.5f})}), {2}, {-8, 2});
  expect_f32(run("Pow", {f32({1}, {-2}), f32({1}, {0.5f})}), {1}, {kNaN});
  expect_f32(run("Pow", {f32({2, 1}, {2, 3}), f32({2}, {0, -1})}), {2, 2}, {1, 0.5f, 1, 1.0f / 3.0f});
  Tensor y(DType::f32, {3});
  std::copy_n(Floats{4, 5, 6}.begin(), 3, y.values<float>().begin());
  expect_exact<std::int64_t>(run("Pow", {i64({3}, {1, 2, 3}), y}), DType::i64, {3}, {1, 32, 729});
  expect_exact<std::int64_t>(run("Pow", {i64({2}, {2, -3}), i64({}, {3})}), DType::i64, {2}, {8, -27});
}

BOOST_AUTO_TEST_CASE(min_and_max_broadcast_any_number_of_inputs) {
  const Tensor a = f32({2, 2}, {1, 5, -3, 2});
  const Tensor b = f32({2}, {0, 4});
  const Tensor c = f32({}, {-1});
  expect_f32(run("Max", {a, b, c}), {2, 2}, {1, 5, 0, 4});
  expect_f32(run("Min", {a, b, c}), {2, 2}, {-1, -1, -3, -1});
  expect_f32(run("Max", {a}), {2, 2}, {1, 5, -3, 2});
  expect_f32(run("Max", {f32({2}, {kNaN, 1}), f32({2}, {0, 2})}), {2}, {kNaN, 2});
  expect_exact<std::int64_t>(run("Min", {i64({3}, {4, -9, 2}), i64({1}, {3})}), DType::i64, {3}, {3, -9, 2});
}

BOOST_AUTO_TEST_CASE(comparisons_and_logic_give_bool) {
  const Tensor a = f32({3}, {1, 2, 3});
  const Tensor b = f32({}, {2});
  expect_bool(run("Equal", {a, b}), {3}, {0, 1, 0});
  expect_bool(run("Less", {a, b}), {3}, {1, 0, 0});
  expect_bool(run("Greater", {a, b}), {3}, {0, 0, 1});
  expect_bool(run("LessOrEqual", {a, b}), {3}, {1, 1, 0});
  expect_bool(run("GreaterOrEqual", {a, b}), {3}, {0, 1, 1});
  expect_bool(run("Equal", {f32({1}, {kNaN}), f32({1}, {kNaN})}), {1}, {0});
  expect_bool(run("Equal", {i64({2, 1}, {1, 2}), i64({2}, {2, 1})}), {2, 2}, {0, 1, 1, 0});
  expect_bool(run("Equal", {boolean({2}, {1, 0}), boolean({2}, {1, 1})}), {2}, {1, 0});

  const Tensor p = boolean({2, 1}, {0, 1});
  const Tensor q = boolean({2}, {0, 1});
  expect_bool(run("Not", {q}), {2}, {1, 0});
  expect_bool(run("And", {p, q}), {2, 2}, {0, 0, 0, 1});
  expect_bool(run("Or", {p, q}), {2, 2}, {0, 1, 1, 1});
  expect_bool(run("Xor", {p, q}), {2, 2}, {0, 1, 1, 0});
}

BOOST_AUTO_TEST_CASE(where_broadcasts_condition_and_both_branches) {
  const Tensor condition = boolean({2, 1}, {1, 0});
  expect_f32(run("Where", {condition, f32({3}, {1, 2, 3}), f32({}, {-1})}), {2, 3}, {1, 2, 3, -1, -1, -1});
  expect_exact<std::int64_t>(run("Where", {boolean({3}, {0, 1, 0}), i64({3}, {7, 8, 9}), i64({1}, {0})}), DType::i64,
                             {3}, {0, 8, 0});
}

BOOST_AUTO_TEST_CASE(cast_converts_between_every_supported_dtype) {
  auto to = [](std::int64_t code) { return attrs_of({{"to", code}}); };
  expect_exact<std::int64_t>(run("Cast", {f32({4}, {-1.7f, 2.9f, 0, -0.2f})}, to(7)), DType::i64, {4}, {-1, 2, 0, 0});
  expect_exact<std::int32_t>(run("Cast", {f32({2}, {1e10f, -3.5f})}, to(6)), DType::i32, {2},
                             {std::numeric_limits<std::int32_t>::max(), -3});
  expect_exact<std::uint8_t>(run("Cast", {f32({3}, {300, -5, 7.9f})}, to(2)), DType::u8, {3}, {255, 0, 7});
  expect_bool(run("Cast", {i64({3}, {0, -4, 2})}, to(9)), {3}, {0, 1, 1});
  expect_f32(run("Cast", {boolean({2}, {1, 0})}, to(1)), {2}, {1, 0});
  expect_f32(run("Cast", {i64({2}, {-3, 1 << 20})}, to(1)), {2}, {-3, 1 << 20});
  expect_exact<std::int32_t>(run("Cast", {i64({1}, {(std::int64_t{1} << 32) + 5})}, to(6)), DType::i32, {1}, {5});

  // float16 bits: round to nearest even, overflow to infinity, subnormals.
  const float tie_down = 1.0f + std::ldexp(1.0f, -11);     // halfway, even neighbour is 1.0
  const float tie_up = 1.0f + 3 * std::ldexp(1.0f, -11);   // halfway, even neighbour is 1 + 2^-9
  const Tensor halves = run("Cast",
                            {f32({11}, {1.0f, -2.0f, 0.1f, 65504.0f, 65520.0f, 1e-8f, std::ldexp(1.0f, -24), tie_down,
                                        tie_up, kNaN, -kInf})},
                            to(10));
  expect_exact<std::uint16_t>(halves, DType::f16, {11},
                              {0x3c00, 0xc000, 0x2e66, 0x7bff, 0x7c00, 0x0000, 0x0001, 0x3c00, 0x3c02, 0x7e00, 0xfc00});
  Tensor bits(DType::f16, {5});
  const std::vector<std::uint16_t> raw = {0x3555, 0x0001, 0xfc00, 0x7bff, 0x8000};
  std::copy(raw.begin(), raw.end(), bits.values<std::uint16_t>().begin());
  expect_f32(run("Cast", {bits}, to(1)), {5}, {0.333251953125f, std::ldexp(1.0f, -24), -kInf, 65504.0f, 0.0f}, 0.0f);
}

BOOST_AUTO_TEST_CASE(reductions_reference_values) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  expect_f32(run("ReduceMean", {x}, attrs_of({{"axes", Ints{1}}})), {2, 1}, {2, 5});
  expect_f32(run("ReduceSum", {x}, attrs_of({{"keepdims", std::int64_t{0}}})), {}, {21});
  expect_f32(run("ReduceSum", {x}), {1, 1}, {21});
  expect_f32(run("ReduceMax", {x}, attrs_of({{"axes", Ints{0}}, {"keepdims", std::int64_t{0}}})), {3}, {4, 5, 6});
  expect_f32(run("ReduceMin", {x}, attrs_of({{"axes", Ints{-1}}})), {2, 1}, {1, 4});
  expect_f32(run("ReduceProd", {x}, attrs_of({{"axes", Ints{0}}})), {1, 3}, {4, 10, 18});
  expect_f32(run("ReduceSum", {x}, attrs_of({{"noop_with_empty_axes", std::int64_t{1}}})), {2, 3}, {1, 2, 3, 4, 5, 6});
  expect_f32(run("ReduceMax", {f32({2}, {kNaN, 1})}), {1}, {kNaN});
  // Reducing an empty axis gives the reduction's identity.
  const Tensor empty(DType::f32, {2, 0});
  expect_f32(run("ReduceSum", {empty}, attrs_of({{"axes", Ints{1}}})), {2, 1}, {0, 0});
  expect_f32(run("ReduceMax", {empty}, attrs_of({{"axes", Ints{1}}})), {2, 1}, {-kInf, -kInf});
  expect_f32(run("ReduceProd", {empty}, attrs_of({{"axes", Ints{1}}})), {2, 1}, {1, 1});
  // Integers accumulate exactly; an integer mean truncates.
  const Tensor big = i64({2, 2}, {std::int64_t{1} << 60, 1, -7, 2});
  expect_exact<std::int64_t>(run("ReduceSum", {big}, attrs_of({{"axes", Ints{1}}})), DType::i64, {2, 1},
                             {(std::int64_t{1} << 60) + 1, -5});
  expect_exact<std::int64_t>(run("ReduceMean", {i64({3}, {1, 2, 2})}), DType::i64, {1}, {1});
}

BOOST_AUTO_TEST_CASE(cumsum_reference_values) {
  const Tensor x = f32({4}, {1, 2, 3, 4});
  auto with = [](std::int64_t exclusive, std::int64_t reverse) {
    return attrs_of({{"axis", std::int64_t{0}}, {"exclusive", exclusive}, {"reverse", reverse}});
  };
  expect_f32(run("CumSum", {x}, with(0, 0)), {4}, {1, 3, 6, 10});
  expect_f32(run("CumSum", {x}, with(1, 0)), {4}, {0, 1, 3, 6});
  expect_f32(run("CumSum", {x}, with(0, 1)), {4}, {10, 9, 7, 4});
  expect_f32(run("CumSum", {x}, with(1, 1)), {4}, {9, 7, 4, 0});
  expect_f32(run("CumSum", {f32({2, 3}, {1, 2, 3, 4, 5, 6})}, attrs_of({{"axis", std::int64_t{-1}}})), {2, 3},
             {1, 3, 6, 4, 9, 15});
  expect_f32(run("CumSum", {f32({2, 3}, {1, 2, 3, 4, 5, 6})}, attrs_of({{"axis", std::int64_t{0}}})), {2, 3},
             {1, 2, 3, 5, 7, 9});
  expect_exact<std::int64_t>(run("CumSum", {i64({3}, {5, -1, 7})}, attrs_of({{"axis", std::int64_t{0}}})),
                             DType::i64, {3}, {5, 4, 11});
}

BOOST_AUTO_TEST_CASE(log_softmax_reference_values) {
  // log(softmax([1, 2, 3])) = x - log(e + e^2 + e^3).
  const float log_sum = static_cast<float>(std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)));
  expect_f32(run("LogSoftmax", {f32({1, 3}, {1, 2, 3})}), {1, 3}, {1 - log_sum, 2 - log_sum, 3 - log_sum});
  // A tiny probability keeps its logarithm: log(softmax) would give -inf.
  expect_f32(run("LogSoftmax", {f32({2}, {1000, 0})}), {2}, {0, -1000});
  // Along axis 0 of a [2, 2]: each column normalised on its own.
  const float log_2 = static_cast<float>(std::log(2.0));
  expect_f32(run("LogSoftmax", {f32({2, 2}, {5, 1, 5, 1})}, attrs_of({{"axis", std::int64_t{0}}})), {2, 2},
             {-log_2, -log_2, -log_2, -log_2});
  BOOST_TEST((infer("LogSoftmax", {kF32x23}, attrs_of({{"axis", std::int64_t{-2}}})) == kF32x23));
  expect_infer_error("LogSoftmax", {kF32x23}, attrs_of({{"axis", std::int64_t{2}}}), ErrorKind::InvalidArgument,
                     {"node0", "'axis'", "rank 2"});
  expect_infer_error("LogSoftmax", {{DType::i64, {3}}}, {}, ErrorKind::Unsupported, {"i64", "f32"});
  expect_infer_error("LogSoftmax", {{DType::f32, {}}}, {}, ErrorKind::ShapeMismatch, {"rank >= 1"});
}

BOOST_AUTO_TEST_CASE(argmax_argmin_reference_values) {
  auto with = [](std::int64_t axis, std::int64_t keepdims, std::int64_t select_last) {
    return attrs_of({{"axis", axis}, {"keepdims", keepdims}, {"select_last_index", select_last}});
  };
  // ONNX's examples.
  const Tensor x = f32({2, 2}, {2, 1, 3, 10});
  expect_exact<std::int64_t>(run("ArgMax", {x}), DType::i64, {1, 2}, {1, 1});
  expect_exact<std::int64_t>(run("ArgMax", {x}, with(1, 1, 0)), DType::i64, {2, 1}, {0, 1});
  expect_exact<std::int64_t>(run("ArgMin", {x}, with(-1, 0, 0)), DType::i64, {2}, {1, 0});
  expect_exact<std::int64_t>(run("ArgMin", {x}, with(0, 0, 0)), DType::i64, {2}, {0, 0});
  // Ties: the first position, or the last with select_last_index.
  const Tensor ties = f32({2, 2}, {2, 2, 3, 10});
  expect_exact<std::int64_t>(run("ArgMax", {ties}, with(1, 1, 0)), DType::i64, {2, 1}, {0, 1});
  expect_exact<std::int64_t>(run("ArgMax", {ties}, with(1, 1, 1)), DType::i64, {2, 1}, {1, 1});
  expect_exact<std::int64_t>(run("ArgMin", {f32({4}, {1, 0, 4, 0})}, with(0, 0, 1)), DType::i64, {}, {3});
  // NaN wins both ways, as in numpy: the first NaN, or the last one.
  const Tensor nans = f32({4}, {1, kNaN, 3, kNaN});
  expect_exact<std::int64_t>(run("ArgMax", {nans}, with(0, 0, 0)), DType::i64, {}, {1});
  expect_exact<std::int64_t>(run("ArgMin", {nans}, with(0, 0, 0)), DType::i64, {}, {1});
  expect_exact<std::int64_t>(run("ArgMax", {nans}, with(0, 0, 1)), DType::i64, {}, {3});
  // Integers compare exactly (these two differ only beyond 2^53).
  const std::int64_t big = std::int64_t{1} << 60;
  expect_exact<std::int64_t>(run("ArgMax", {i64({3}, {big, big + 1, -5})}), DType::i64, {1}, {1});
  // A middle axis of a 3-D tensor.
  expect_exact<std::int64_t>(run("ArgMax", {f32({2, 3, 2}, {0, 9, 5, 1, 2, 3, 7, 0, 1, 8, 6, 2})}, with(1, 0, 0)),
                             DType::i64, {2, 2}, {1, 0, 0, 1});

  BOOST_TEST((infer("ArgMax", {{DType::f32, {2, 3, 4}}}, with(-2, 0, 0)) == (TensorType{DType::i64, {2, 4}})));
  BOOST_TEST((infer("ArgMin", {{DType::i32, {2, 3}}}) == (TensorType{DType::i64, {1, 3}})));
  expect_infer_error("ArgMax", {kF32x23}, attrs_of({{"axis", std::int64_t{3}}}), ErrorKind::InvalidArgument,
                     {"'axis'", "rank 2"});
  expect_infer_error("ArgMin", {{DType::f32, {}}}, {}, ErrorKind::ShapeMismatch, {"scalar"});
  expect_infer_error("ArgMax", {{DType::f32, {2, 0}}}, attrs_of({{"axis", std::int64_t{1}}}), ErrorKind::ShapeMismatch,
                     {"extent 0"});
  expect_infer_error("ArgMax", {{DType::boolean, {2}}}, {}, ErrorKind::Unsupported, {"bool"});
  expect_infer_error("ArgMax", {kF32x23}, attrs_of({{"select_last_index", std::int64_t{2}}}),
                     ErrorKind::InvalidArgument, {"'select_last_index'"});
}

// ---- lowering, run on the kernel IR interpreter -------------------------------------

BOOST_AUTO_TEST_CASE(unary_kernels_match_the_reference) {
  const Tensor signed_values = uniform({3, 11}, -4.0f, 4.0f);
  for (const char* op : {"Exp", "Erf", "Neg", "Abs", "Floor", "Ceil", "Sign", "HardSwish"})
    check_lowered(op, {signed_values});
  for (const char* op : {"Sqrt", "Log", "Reciprocal"}) check_lowered(op, {uniform({3, 11}, 0.01f, 10.0f)});
  check_lowered("HardSigmoid", {signed_values});
  check_lowered("HardSigmoid", {signed_values}, attrs_of({{"alpha", 0.3}, {"beta", 0.1}}));
  // Round's ties go to the even neighbour, both signs; others to the nearest.
  const Tensor ties = f32({10}, {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 3.5f, 2.4f, -2.6f, 0.0f});
  check_lowered("Round", {ties});
  expect_f32(run("Round", {ties}), {10}, {-2, -2, -0.0f, 0, 2, 2, 4, 2, -3, 0});
  for (const char* op : {"Round", "Sinh", "Cosh", "Asinh"}) check_lowered(op, {signed_values});
  check_lowered("Acosh", {uniform({3, 11}, 1.0f, 20.0f)});
  check_lowered("Atanh", {uniform({3, 11}, -0.95f, 0.95f)});
  // The polynomial sine and cosine over several periods, both signs, and far
  // from zero (hundreds of turns), where range reduction loses accuracy first.
  for (const char* op : {"Sin", "Cos"}) {
    check_lowered(op, {uniform({4, 50}, -7.0f, 7.0f)});
    check_lowered(op, {uniform({4, 50}, -4000.0f, 4000.0f)});
  }
}

BOOST_AUTO_TEST_CASE(pow_min_max_kernels_match_the_reference) {
  check_lowered("Pow", {uniform({2, 3, 4}, -3.0f, 3.0f), f32({4}, {2, 3, -1, 0})});
  check_lowered("Pow", {uniform({3, 1}, 0.1f, 3.0f), uniform({1, 5}, -2.0f, 2.0f)});
  check_lowered("Max", {uniform({2, 3, 4}, -1, 1, 1), uniform({3, 1}, -1, 1, 2), uniform({4}, -1, 1, 3)});
  check_lowered("Min", {uniform({2, 3, 4}, -1, 1, 4), uniform({2, 3, 4}, -1, 1, 5)});
  check_lowered("Min", {uniform({5}, -1, 1, 6)});
}

BOOST_AUTO_TEST_CASE(reduce_kernels_match_the_reference) {
  const Tensor x = uniform({2, 3, 4, 5}, -1.0f, 1.0f);
  const std::vector<Ints> axes_sets = {{}, {0}, {-1}, {1, 2}, {0, 2}, {0, 1, 3}, {2, 3}};
  for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"}) {
    for (const Ints& axes : axes_sets) {
      for (std::int64_t keepdims : {0, 1}) {
        Attributes attrs = attrs_of({{"keepdims", keepdims}});
        if (!axes.empty()) attrs.set("axes", axes);
        check_lowered(op, {x}, attrs);
      }
    }
  }
  check_lowered("ReduceProd", {uniform({3, 4}, 0.5f, 1.5f)}, attrs_of({{"axes", Ints{1}}}));
  check_lowered("ReduceSum", {x}, attrs_of({{"noop_with_empty_axes", std::int64_t{1}}}));
  // A unit axis between two reduced ones.
  check_lowered("ReduceSum", {uniform({3, 1, 4}, -1, 1)}, attrs_of({{"axes", Ints{0, 2}}}));
}

BOOST_AUTO_TEST_CASE(cumsum_kernels_match_the_reference) {
  const Tensor x = uniform({3, 5, 4}, -1.0f, 1.0f);
  for (std::int64_t axis : {0, 1, -1})
    for (std::int64_t exclusive : {0, 1})
      for (std::int64_t reverse : {0, 1})
        check_lowered("CumSum", {x}, attrs_of({{"axis", axis}, {"exclusive", exclusive}, {"reverse", reverse}}));
}

BOOST_AUTO_TEST_CASE(log_softmax_kernels_match_the_reference) {
  const Tensor x = uniform({3, 4, 5}, -4.0f, 4.0f);
  for (std::int64_t axis : {0, 1, 2, -1}) check_lowered("LogSoftmax", {x}, attrs_of({{"axis", axis}}));
  check_lowered("LogSoftmax", {uniform({2, 9}, -80.0f, 80.0f)});
  check_lowered("LogSoftmax", {uniform({7}, -1.0f, 1.0f)});
}

BOOST_AUTO_TEST_CASE(bool_and_integer_ops_lower_and_other_dtypes_say_why_not) {
  // Their kernels are checked against the reference in test_conformance
  // (op_cases_typed.cpp); here: which dtypes lower at all.
  const TensorType b{DType::boolean, {2, 3}};
  const TensorType i64{DType::i64, {2, 3}};
  const TensorType u8{DType::u8, {2, 3}};
  BOOST_TEST(!lowering_reason("Equal", {kF32x23, kF32x23}).has_value());
  BOOST_TEST(!lowering_reason("Where", {b, kF32x23, kF32x23}).has_value());
  for (const char* op : {"And", "Or", "Xor"}) BOOST_TEST(!lowering_reason(op, {b, b}).has_value());
  BOOST_TEST(!lowering_reason("Not", {b}).has_value());
  BOOST_TEST(!lowering_reason("Cast", {kF32x23}, attrs_of({{"to", std::int64_t{7}}})).has_value());
  BOOST_TEST(!lowering_reason("Cast", {{DType::i64, {2}}}, attrs_of({{"to", std::int64_t{1}}})).has_value());
  for (const char* op : {"ArgMax", "ArgMin"}) BOOST_TEST(!lowering_reason(op, {kF32x23}).has_value());
  // Kernels hold no u8; float math is f32 only.
  const std::optional<std::string> equal_u8 = lowering_reason("Equal", {u8, u8});
  BOOST_TEST_REQUIRE(equal_u8.has_value());
  BOOST_TEST(equal_u8->find("u8") != std::string::npos, *equal_u8);
  const std::optional<std::string> neg_i64 = lowering_reason("Neg", {i64});
  BOOST_TEST_REQUIRE(neg_i64.has_value());
  BOOST_TEST(neg_i64->find("i64") != std::string::npos, *neg_i64);
  BOOST_TEST(!lowering_reason("Sqrt", {kF32x23}).has_value());

  // A reduction over an empty axis lowers too: it writes the empty reduction
  // (op_cases' Empty/ cases check the values on every backend).
  BOOST_TEST(!lowering_reason("ReduceSum", {{DType::f32, {2, 0}}}, attrs_of({{"axes", Ints{1}}})).has_value());

  // Lowering an unsupported node throws Unsupported naming the node.
  OneNode g = one_node("Neg", {i64});
  try {
    lower::lower_node(g.node(), g.input_types, g.output_types);
    BOOST_ERROR("expected Unsupported");
  } catch (const Error& error) {
    BOOST_TEST(error.kind() == ErrorKind::Unsupported);
    BOOST_TEST(std::string(error.what()).find("node0") != std::string::npos, error.what());
  }
}

BOOST_AUTO_TEST_CASE(cast_f32_to_f32_is_a_view) {
  OneNode g = one_node("Cast", {kF32x23}, attrs_of({{"to", std::int64_t{1}}}));
  const lower::LoweredNode lowered = lower::lower_node(g.node(), g.input_types, g.output_types);
  BOOST_TEST((lowered.kind == lower::LoweredNode::Kind::alias));
  BOOST_TEST(!lowered.kernel.has_value());
}

// Mod: fmod=0 takes the divisor's sign (Python's %), fmod=1 the dividend's
// (C's fmod); an integer zero divisor is an error, not a crash; the lowest
// value % -1 (which overflows in C) is 0; floats need fmod=1.
BOOST_AUTO_TEST_CASE(mod_follows_the_sign_its_fmod_attribute_names) {
  const Tensor a = i64({6}, {7, -7, 7, -7, 0, std::numeric_limits<std::int64_t>::min()});
  const Tensor b = i64({6}, {3, 3, -3, -3, 5, -1});
  BOOST_TEST(run("Mod", {a, b}).values<std::int64_t>()[0] == 1);
  const Ints python{1, 2, -2, -1, 0, 0};
  const Ints c_style{1, -1, 1, -1, 0, 0};
  const Tensor floor_mod = run("Mod", {a, b});
  const Tensor trunc_mod = run("Mod", {a, b}, attrs_of({{"fmod", std::int64_t{1}}}));
  for (std::size_t i = 0; i < python.size(); ++i) {
    BOOST_TEST(floor_mod.values<std::int64_t>()[i] == python[i], "element " << i);
    BOOST_TEST(trunc_mod.values<std::int64_t>()[i] == c_style[i], "element " << i);
  }
  expect_f32(run("Mod", {f32({3}, {5.5f, -5.5f, 5.5f}), f32({3}, {2, 2, -2})}, attrs_of({{"fmod", std::int64_t{1}}})),
             {3}, {1.5f, -1.5f, 1.5f});
  try {
    run("Mod", {i64({1}, {4}), i64({1}, {0})});
    BOOST_ERROR("expected an error for an integer zero divisor");
  } catch (const Error& e) {
    BOOST_TEST(std::string(e.what()).find("Mod by an integer zero") != std::string::npos, e.what());
  }
  expect_infer_error("Mod", {kF32x23, kF32x23}, {}, ErrorKind::InvalidArgument, {"fmod=1"});
}

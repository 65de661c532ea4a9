#define BOOST_TEST_MODULE shape_inference
#include <boost/test/unit_test.hpp>

#include <limits>
#include <optional>
#include <string>

#include "graph/broadcast.h"
#include "graph/op_registry.h"

using namespace kiln;
using namespace kiln::graph;

namespace {

using Ints = std::vector<std::int64_t>;
using Input = std::optional<TensorType>;  // nullopt: an omitted optional input

TensorType f32(Shape shape) { return {DType::f32, std::move(shape)}; }
TensorType i64(Shape shape) { return {DType::i64, std::move(shape)}; }

Attributes attrs_of(std::initializer_list<std::pair<std::string, Attribute>> list) {
  Attributes attrs;
  for (const auto& [name, value] : list) attrs.set(name, value);
  return attrs;
}

// Shape inference of one node named "n" whose inputs have these types.
std::vector<TensorType> infer(const std::string& op, const std::vector<Input>& inputs, Attributes attrs = {}) {
  Node node;
  node.op = op;
  node.name = "n";
  node.attrs = std::move(attrs);
  std::vector<TensorType> types;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    node.inputs.push_back(inputs[i] ? static_cast<ValueId>(i) : -1);
    types.push_back(inputs[i].value_or(TensorType{}));
  }
  return infer_node(node, types);
}

Shape infer_shape(const std::string& op, const std::vector<Input>& inputs, Attributes attrs = {}) {
  const std::vector<TensorType> out = infer(op, inputs, std::move(attrs));
  BOOST_REQUIRE(out.size() == 1u);
  return out[0].shape;
}

// Inference must fail with `kind`, a message prefixed by the node and op, and
// every fragment in it.
void expect_error(const std::string& op, const std::vector<Input>& inputs, Attributes attrs, ErrorKind kind,
                  const std::vector<std::string>& fragments) {
  try {
    infer(op, inputs, std::move(attrs));
  } catch (const Error& e) {
    const std::string message = e.what();
    BOOST_TEST(error_kind_name(e.kind()) == error_kind_name(kind), op << ": " << message);
    BOOST_TEST(message.rfind("node 'n' (" + op + "): ", 0) == 0u, message);
    for (const std::string& fragment : fragments)
      BOOST_TEST(message.find(fragment) != std::string::npos, "'" << fragment << "' not in: " << message);
    return;
  }
  BOOST_FAIL(op << ": no kiln::Error thrown");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(broadcasting)

BOOST_AUTO_TEST_CASE(shapes_broadcast_as_numpy) {
  BOOST_TEST(broadcast_shapes({2, 1, 3}, {4, 1}) == Shape({2, 4, 3}));
  BOOST_TEST(broadcast_shapes({}, {3}) == Shape({3}));
  BOOST_TEST(broadcast_shapes({5, 1}, {1, 6}) == Shape({5, 6}));
  BOOST_TEST(is_broadcastable_to({4}, {2, 4}));
  BOOST_TEST(!is_broadcastable_to({2, 4}, {4}));
  BOOST_TEST(!is_broadcastable_to({3}, {2, 4}));
  try {
    broadcast_shapes({2, 3}, {4});
    BOOST_FAIL("no error");
  } catch (const Error& e) {
    BOOST_TEST(error_kind_name(e.kind()) == error_kind_name(ErrorKind::ShapeMismatch));
    BOOST_TEST(std::string(e.what()).find("[2, 3] and [4]") != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_CASE(strides) {
  BOOST_TEST(row_major_strides({2, 3, 4}) == Strides({12, 4, 1}));
  BOOST_TEST(row_major_strides({}) == Strides({}));
  BOOST_TEST(broadcast_strides({3, 1}, {2, 3, 4}) == Strides({0, 1, 0}));
  BOOST_TEST(broadcast_strides({2, 3, 4}, {2, 3, 4}) == Strides({12, 4, 1}));
  BOOST_TEST(unravel_index(23, {2, 3, 4}) == Strides({1, 2, 3}));
  BOOST_CHECK_THROW(broadcast_strides({3}, {4}), Error);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(elementwise)

BOOST_AUTO_TEST_CASE(binary_ops_broadcast) {
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    BOOST_TEST(infer_shape(op, {f32({2, 1, 3}), f32({4, 1})}) == Shape({2, 4, 3}));
    BOOST_TEST(infer_shape(op, {f32({}), f32({3})}) == Shape({3}));
  }
  BOOST_TEST((infer("Add", {i64({2}), i64({2})})[0] == i64({2})));
}

BOOST_AUTO_TEST_CASE(binary_op_errors) {
  expect_error("Add", {f32({2, 3}), f32({4})}, {}, ErrorKind::ShapeMismatch,
               {"cannot broadcast shapes [2, 3] and [4]"});
  expect_error("Mul", {f32({2}), i64({2})}, {}, ErrorKind::ShapeMismatch, {"dtypes differ", "A f32[2]", "B i64[2]"});
  // 16-bit floats are typed as the f32 the op computes them in (docs/precision.md).
  BOOST_TEST((infer("Sub", {TensorType{DType::f16, {2}}, TensorType{DType::f16, {2}}})[0] ==
              TensorType{DType::f16, {2}}));
  expect_error("Sub", {TensorType{DType::bf16, {2}}, i64({2})}, {}, ErrorKind::ShapeMismatch,
               {"dtypes differ", "its bf16 inputs are checked as the f32 it computes them in"});
  expect_error("Add", {f32({2})}, {}, ErrorKind::InvalidArgument, {"expects 2 inputs, got 1"});
  expect_error("Div", {f32({2}), f32({2})}, attrs_of({{"broadcast", std::int64_t{1}}}), ErrorKind::InvalidArgument,
               {"unknown attribute 'broadcast'"});
}

BOOST_AUTO_TEST_CASE(activations_keep_the_type) {
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Gelu", "Clip"})
    BOOST_TEST((infer(op, {f32({2, 5, 7})})[0] == f32({2, 5, 7})), op);
  BOOST_TEST(infer_shape("Gelu", {f32({3})}, attrs_of({{"approximate", std::string("tanh")}})) == Shape({3}));
  BOOST_TEST(infer_shape("Clip", {f32({3})}, attrs_of({{"min", 0.0}, {"max", 6.0}})) == Shape({3}));
}

BOOST_AUTO_TEST_CASE(activation_errors) {
  expect_error("Relu", {i64({3})}, {}, ErrorKind::Unsupported, {"dtype i64", "f32 only"});
  expect_error("Gelu", {f32({3})}, attrs_of({{"approximate", std::string("erf")}}), ErrorKind::InvalidArgument,
               {"'approximate' is 'erf'"});
  expect_error("Clip", {f32({3})}, attrs_of({{"min", 2.0}, {"max", 1.0}}), ErrorKind::InvalidArgument,
               {"'min'", "greater than 'max'"});
  expect_error("Clip", {f32({3})}, attrs_of({{"min", std::string("0")}}), ErrorKind::InvalidArgument,
               {"attribute 'min' is string, expected float"});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(conv)

BOOST_AUTO_TEST_CASE(output_shapes) {
  BOOST_TEST(infer_shape("Conv", {f32({1, 3, 224, 224}), f32({64, 3, 7, 7}), std::nullopt},
                         attrs_of({{"strides", Ints{2, 2}}, {"pads", Ints{3, 3, 3, 3}}})) == Shape({1, 64, 112, 112}));
  // Depthwise: group == channels.
  BOOST_TEST(infer_shape("Conv", {f32({2, 32, 10, 10}), f32({32, 1, 3, 3}), f32({32})},
                         attrs_of({{"group", std::int64_t{32}}})) == Shape({2, 32, 8, 8}));
  BOOST_TEST(infer_shape("Conv", {f32({1, 1, 7, 7}), f32({1, 1, 3, 3})}, attrs_of({{"dilations", Ints{2, 2}}})) ==
             Shape({1, 1, 3, 3}));
  // Asymmetric pads [top, left, bottom, right].
  BOOST_TEST(infer_shape("Conv", {f32({1, 2, 8, 8}), f32({4, 2, 3, 3})}, attrs_of({{"pads", Ints{0, 1, 2, 3}}})) ==
             Shape({1, 4, 8, 10}));
  BOOST_TEST(infer_shape("Conv", {f32({1, 2, 8, 8}), f32({4, 2, 3, 3})},
                         attrs_of({{"kernel_shape", Ints{3, 3}}, {"activation", std::string("Relu")}})) ==
             Shape({1, 4, 6, 6}));
}

BOOST_AUTO_TEST_CASE(shape_errors) {
  expect_error("Conv", {f32({1, 3, 8, 8}), f32({8, 4, 3, 3})}, {}, ErrorKind::ShapeMismatch,
               {"input has 3 channels but weight expects 4 (group 1): input f32[1, 3, 8, 8], weight f32[8, 4, 3, 3]"});
  expect_error("Conv", {f32({1, 4, 8, 8}), f32({6, 1, 3, 3})}, attrs_of({{"group", std::int64_t{4}}}),
               ErrorKind::ShapeMismatch, {"6 output channels", "group 4"});
  expect_error("Conv", {f32({1, 3, 8, 8}), f32({8, 3, 3, 3}), f32({4})}, {}, ErrorKind::ShapeMismatch,
               {"bias must be [8]", "bias f32[4]"});
  expect_error("Conv", {f32({1, 3, 2, 8}), f32({8, 3, 3, 3})}, {}, ErrorKind::ShapeMismatch,
               {"height", "larger than the padded input"});
  expect_error("Conv", {f32({3, 8, 8}), f32({8, 3, 3, 3})}, {}, ErrorKind::ShapeMismatch,
               {"input must have rank 4", "f32[3, 8, 8]"});
  expect_error("Conv", {f32({1, 3, 8, 8}), f32({8, 3, 3, 3})}, attrs_of({{"kernel_shape", Ints{5, 5}}}),
               ErrorKind::ShapeMismatch, {"'kernel_shape' [5, 5] does not match"});
  expect_error("Conv", {i64({1, 3, 8, 8}), f32({8, 3, 3, 3})}, {}, ErrorKind::Unsupported, {"dtype i64"});
}

BOOST_AUTO_TEST_CASE(attribute_errors) {
  const std::vector<Input> inputs{f32({1, 3, 8, 8}), f32({8, 3, 3, 3})};
  expect_error("Conv", inputs, attrs_of({{"strides", Ints{1, 1, 1}}}), ErrorKind::InvalidArgument,
               {"'strides' needs 2 values, got 3"});
  expect_error("Conv", inputs, attrs_of({{"strides", Ints{0, 1}}}), ErrorKind::InvalidArgument,
               {"'strides' must be positive"});
  expect_error("Conv", inputs, attrs_of({{"dilations", Ints{1, -1}}}), ErrorKind::InvalidArgument,
               {"'dilations' must be positive"});
  expect_error("Conv", inputs, attrs_of({{"pads", Ints{1, 1}}}), ErrorKind::InvalidArgument,
               {"'pads' needs 4 values, got 2"});
  expect_error("Conv", inputs, attrs_of({{"pads", Ints{0, -1, 0, 0}}}), ErrorKind::InvalidArgument,
               {"'pads' must not be negative"});
  expect_error("Conv", inputs, attrs_of({{"group", std::int64_t{0}}}), ErrorKind::InvalidArgument,
               {"'group' must be positive"});
  expect_error("Conv", inputs, attrs_of({{"activation", std::string("Sigmoid")}}), ErrorKind::InvalidArgument,
               {"'activation' is 'Sigmoid'"});
  expect_error("Conv", inputs, attrs_of({{"auto_pad", std::string("SAME_UPPER")}}), ErrorKind::Unsupported,
               {"auto_pad 'SAME_UPPER'"});
  expect_error("Conv", inputs, attrs_of({{"stride", Ints{2, 2}}}), ErrorKind::InvalidArgument,
               {"unknown attribute 'stride'"});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(matmul_and_gemm)

BOOST_AUTO_TEST_CASE(matmul_shapes) {
  BOOST_TEST(infer_shape("MatMul", {f32({2, 3}), f32({3, 4})}) == Shape({2, 4}));
  BOOST_TEST(infer_shape("MatMul", {f32({5, 2, 3}), f32({3, 4})}) == Shape({5, 2, 4}));
  BOOST_TEST(infer_shape("MatMul", {f32({2, 1, 2, 3}), f32({3, 3, 4})}) == Shape({2, 3, 2, 4}));
  BOOST_TEST(infer_shape("MatMul", {f32({3}), f32({3})}) == Shape({}));
  BOOST_TEST(infer_shape("MatMul", {f32({3}), f32({2, 3, 4})}) == Shape({2, 4}));
  BOOST_TEST(infer_shape("MatMul", {f32({2, 3}), f32({3})}) == Shape({2}));
}

BOOST_AUTO_TEST_CASE(matmul_errors) {
  expect_error("MatMul", {f32({2, 3}), f32({4, 5})}, {}, ErrorKind::ShapeMismatch,
               {"inner dimensions differ (3 vs 4)", "A f32[2, 3]", "B f32[4, 5]"});
  expect_error("MatMul", {f32({2, 2, 3}), f32({3, 3, 4})}, {}, ErrorKind::ShapeMismatch,
               {"batch dimensions [2] and [3] do not broadcast"});
  expect_error("MatMul", {f32({}), f32({3})}, {}, ErrorKind::ShapeMismatch, {"rank >= 1"});
}

BOOST_AUTO_TEST_CASE(gemm_shapes) {
  BOOST_TEST(infer_shape("Gemm", {f32({2, 3}), f32({3, 4})}) == Shape({2, 4}));
  BOOST_TEST(infer_shape("Gemm", {f32({3, 2}), f32({4, 3}), f32({4})},
                         attrs_of({{"transA", std::int64_t{1}}, {"transB", std::int64_t{1}}})) == Shape({2, 4}));
  BOOST_TEST(infer_shape("Gemm", {f32({2, 3}), f32({3, 4}), f32({2, 1})}) == Shape({2, 4}));
  BOOST_TEST(infer_shape("Gemm", {f32({2, 3}), f32({3, 4}), f32({})}) == Shape({2, 4}));
  BOOST_TEST(infer_shape("Gemm", {f32({2, 3}), f32({3, 4}), std::nullopt},
                         attrs_of({{"alpha", 2.0}, {"beta", 0.5}, {"activation", std::string("Relu")}})) ==
             Shape({2, 4}));
}

BOOST_AUTO_TEST_CASE(gemm_errors) {
  expect_error("Gemm", {f32({2, 3}), f32({4, 5})}, attrs_of({{"transA", std::int64_t{0}}}), ErrorKind::ShapeMismatch,
               {"inner dimensions differ (3 vs 4)", "A f32[2, 3] (transA 0)", "B f32[4, 5] (transB 0)"});
  expect_error("Gemm", {f32({2, 3}), f32({3, 4}), f32({3})}, {}, ErrorKind::ShapeMismatch,
               {"C f32[3] does not broadcast to the result [2, 4]"});
  expect_error("Gemm", {f32({2, 3, 1}), f32({3, 4})}, {}, ErrorKind::ShapeMismatch, {"A must have rank 2"});
  expect_error("Gemm", {f32({2, 3}), f32({3, 4})}, attrs_of({{"transB", std::int64_t{2}}}), ErrorKind::InvalidArgument,
               {"'transB' must be 0 or 1"});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(softmax_and_normalization)

BOOST_AUTO_TEST_CASE(softmax) {
  BOOST_TEST(infer_shape("Softmax", {f32({2, 3, 4})}) == Shape({2, 3, 4}));
  BOOST_TEST(infer_shape("Softmax", {f32({2, 3, 4})}, attrs_of({{"axis", std::int64_t{-3}}})) == Shape({2, 3, 4}));
  expect_error("Softmax", {f32({2, 3})}, attrs_of({{"axis", std::int64_t{2}}}), ErrorKind::InvalidArgument,
               {"'axis' is 2, out of range for rank 2 (allowed -2..1)"});
  expect_error("Softmax", {f32({})}, {}, ErrorKind::ShapeMismatch, {"rank >= 1"});
}

BOOST_AUTO_TEST_CASE(layer_normalization) {
  BOOST_TEST(infer_shape("LayerNormalization", {f32({2, 3, 4}), f32({4}), f32({4})}) == Shape({2, 3, 4}));
  BOOST_TEST(infer_shape("LayerNormalization", {f32({2, 3, 4}), f32({3, 4}), std::nullopt},
                         attrs_of({{"axis", std::int64_t{1}}, {"epsilon", 1e-6}})) == Shape({2, 3, 4}));
  expect_error("LayerNormalization", {f32({2, 3, 4}), f32({3})}, {}, ErrorKind::ShapeMismatch,
               {"Scale f32[3] does not broadcast to the normalized shape [4]"});
  expect_error("LayerNormalization", {f32({2, 3, 4}), f32({4}), f32({2})}, {}, ErrorKind::ShapeMismatch, {"B f32[2]"});
  expect_error("LayerNormalization", {f32({2, 4}), f32({4})}, attrs_of({{"epsilon", -1.0}}), ErrorKind::InvalidArgument,
               {"'epsilon' must be finite and >= 0"});
  expect_error("LayerNormalization", {f32({2, 4}), f32({4})}, attrs_of({{"axis", std::int64_t{-3}}}),
               ErrorKind::InvalidArgument, {"'axis' is -3"});
}

BOOST_AUTO_TEST_CASE(batch_normalization) {
  const TensorType c3 = f32({3});
  BOOST_TEST(infer_shape("BatchNormalization", {f32({2, 3, 4, 4}), c3, c3, c3, c3}) == Shape({2, 3, 4, 4}));
  BOOST_TEST(infer_shape("BatchNormalization", {f32({2, 3}), c3, c3, c3, c3}) == Shape({2, 3}));
  expect_error("BatchNormalization", {f32({2, 3, 4, 4}), c3, c3, c3, f32({4})}, {}, ErrorKind::ShapeMismatch,
               {"input_var must be [3]", "input_var f32[4]"});
  expect_error("BatchNormalization", {f32({3}), c3, c3, c3, c3}, {}, ErrorKind::ShapeMismatch, {"rank >= 2"});
  expect_error("BatchNormalization", {f32({1, 3, 2, 2}), c3, c3, c3, c3},
               attrs_of({{"training_mode", std::int64_t{1}}}), ErrorKind::Unsupported, {"training_mode"});
  expect_error("BatchNormalization", {f32({1, 3, 2, 2}), c3, c3, c3}, {}, ErrorKind::InvalidArgument,
               {"expects 5 inputs, got 4"});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(pooling)

BOOST_AUTO_TEST_CASE(output_shapes) {
  BOOST_TEST(
      infer_shape("MaxPool", {f32({1, 64, 112, 112})},
                  attrs_of({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}})) ==
      Shape({1, 64, 56, 56}));
  const Attributes k3s2p1 =
      attrs_of({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
  Attributes ceil = k3s2p1;
  ceil.set("ceil_mode", std::int64_t{1});
  BOOST_TEST(infer_shape("MaxPool", {f32({1, 1, 6, 6})}, k3s2p1) == Shape({1, 1, 3, 3}));
  BOOST_TEST(infer_shape("MaxPool", {f32({1, 1, 6, 6})}, ceil) == Shape({1, 1, 4, 4}));
  // ceil_mode would add a window starting in the end padding: it is dropped.
  BOOST_TEST(infer_shape("MaxPool", {f32({1, 1, 5, 5})},
                         attrs_of({{"kernel_shape", Ints{2, 2}},
                                   {"strides", Ints{2, 2}},
                                   {"pads", Ints{1, 1, 1, 1}},
                                   {"ceil_mode", std::int64_t{1}}})) == Shape({1, 1, 3, 3}));
  BOOST_TEST(infer_shape("MaxPool", {f32({1, 1, 7, 7})},
                         attrs_of({{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 2}}})) == Shape({1, 1, 5, 5}));
  BOOST_TEST(infer_shape("AveragePool", {f32({1, 2, 3, 3})},
                         attrs_of({{"kernel_shape", Ints{2, 2}},
                                   {"pads", Ints{1, 1, 1, 1}},
                                   {"count_include_pad", std::int64_t{1}}})) == Shape({1, 2, 4, 4}));
  BOOST_TEST(infer_shape("GlobalAveragePool", {f32({2, 8, 7, 7})}) == Shape({2, 8, 1, 1}));
  BOOST_TEST(infer_shape("GlobalAveragePool", {f32({2, 8, 5})}) == Shape({2, 8, 1}));
}

BOOST_AUTO_TEST_CASE(errors) {
  const std::vector<Input> x{f32({1, 1, 4, 4})};
  expect_error("MaxPool", x, {}, ErrorKind::InvalidArgument, {"'kernel_shape' is required"});
  expect_error("MaxPool", x, attrs_of({{"kernel_shape", Ints{2}}}), ErrorKind::InvalidArgument,
               {"'kernel_shape' needs 2 values, got 1"});
  expect_error("MaxPool", x, attrs_of({{"kernel_shape", Ints{2, 2}}, {"pads", Ints{2, 0, 0, 0}}}),
               ErrorKind::InvalidArgument, {"smaller than the window extent 2"});
  expect_error("MaxPool", x, attrs_of({{"kernel_shape", Ints{5, 5}}}), ErrorKind::ShapeMismatch,
               {"window (extent 5) is larger than the padded input (4)", "input f32[1, 1, 4, 4]"});
  expect_error("MaxPool", {f32({1, 4, 4})}, attrs_of({{"kernel_shape", Ints{2, 2}}}), ErrorKind::ShapeMismatch,
               {"rank 4"});
  expect_error("AveragePool", x, attrs_of({{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 2}}}),
               ErrorKind::Unsupported, {"dilations [2, 2]"});
  expect_error("AveragePool", x, attrs_of({{"kernel_shape", Ints{2, 2}}, {"count_include_pad", std::int64_t{3}}}),
               ErrorKind::InvalidArgument, {"'count_include_pad' must be 0 or 1"});
  expect_error("MaxPool", x, attrs_of({{"kernel_shape", Ints{2, 2}}, {"count_include_pad", std::int64_t{1}}}),
               ErrorKind::InvalidArgument, {"unknown attribute 'count_include_pad'"});
  expect_error("GlobalAveragePool", {f32({2, 8})}, {}, ErrorKind::ShapeMismatch, {"rank >= 3"});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(shape_ops)

BOOST_AUTO_TEST_CASE(reshape) {
  const std::vector<Input> x{f32({2, 3, 4})};
  BOOST_TEST(infer_shape("Reshape", x, attrs_of({{"shape", Ints{0, -1}}})) == Shape({2, 12}));
  BOOST_TEST(infer_shape("Reshape", x, attrs_of({{"shape", Ints{-1}}})) == Shape({24}));
  BOOST_TEST(infer_shape("Reshape", x, attrs_of({{"shape", Ints{4, 0, 2}}})) == Shape({4, 3, 2}));
  BOOST_TEST((infer("Reshape", {i64({6})}, attrs_of({{"shape", Ints{2, 3}}}))[0] == i64({2, 3})));
  expect_error("Reshape", x, attrs_of({{"shape", Ints{-1, -1}}}), ErrorKind::InvalidArgument, {"more than one -1"});
  expect_error("Reshape", x, attrs_of({{"shape", Ints{5, -1}}}), ErrorKind::ShapeMismatch,
               {"24 elements", "do not divide into 5"});
  expect_error("Reshape", x, attrs_of({{"shape", Ints{2, 2}}}), ErrorKind::ShapeMismatch,
               {"cannot reshape 24 elements to [2, 2]", "input f32[2, 3, 4]"});
  expect_error("Reshape", x, attrs_of({{"shape", Ints{1, 1, 1, 0}}}), ErrorKind::InvalidArgument,
               {"0 (copy) but the input has rank 3"});
  expect_error("Reshape", x, attrs_of({{"shape", Ints{-2, 12}}}), ErrorKind::InvalidArgument, {"dimension 0 is -2"});
  expect_error("Reshape", x, {}, ErrorKind::InvalidArgument, {"'shape' is required"});
}

BOOST_AUTO_TEST_CASE(flatten) {
  const std::vector<Input> x{f32({2, 3, 4})};
  BOOST_TEST(infer_shape("Flatten", x) == Shape({2, 12}));
  BOOST_TEST(infer_shape("Flatten", x, attrs_of({{"axis", std::int64_t{0}}})) == Shape({1, 24}));
  BOOST_TEST(infer_shape("Flatten", x, attrs_of({{"axis", std::int64_t{3}}})) == Shape({24, 1}));
  BOOST_TEST(infer_shape("Flatten", x, attrs_of({{"axis", std::int64_t{-1}}})) == Shape({6, 4}));
  expect_error("Flatten", x, attrs_of({{"axis", std::int64_t{4}}}), ErrorKind::InvalidArgument,
               {"'axis' is 4", "allowed -3..3"});
}

BOOST_AUTO_TEST_CASE(transpose) {
  const std::vector<Input> x{f32({2, 3, 4})};
  BOOST_TEST(infer_shape("Transpose", x) == Shape({4, 3, 2}));
  BOOST_TEST(infer_shape("Transpose", x, attrs_of({{"perm", Ints{0, 2, 1}}})) == Shape({2, 4, 3}));
  expect_error("Transpose", x, attrs_of({{"perm", Ints{0, 0, 1}}}), ErrorKind::InvalidArgument,
               {"'perm' [0, 0, 1] is not a permutation of 0..2"});
  expect_error("Transpose", x, attrs_of({{"perm", Ints{1, 0}}}), ErrorKind::InvalidArgument, {"not a permutation"});
}

BOOST_AUTO_TEST_CASE(concat) {
  const Attributes axis1 = attrs_of({{"axis", std::int64_t{1}}});
  BOOST_TEST(infer_shape("Concat", {f32({2, 1}), f32({2, 2})}, axis1) == Shape({2, 3}));
  BOOST_TEST(infer_shape("Concat", {f32({2, 1}), f32({2, 2}), f32({2, 4})}, attrs_of({{"axis", std::int64_t{-1}}})) ==
             Shape({2, 7}));
  BOOST_TEST(infer_shape("Concat", {f32({5, 2})}, attrs_of({{"axis", std::int64_t{0}}})) == Shape({5, 2}));
  expect_error("Concat", {f32({2, 1}), f32({3, 2})}, axis1, ErrorKind::ShapeMismatch,
               {"must match except along axis 1", "input 0 f32[2, 1]", "input 1 f32[3, 2]"});
  expect_error("Concat", {f32({2, 1}), i64({2, 1})}, axis1, ErrorKind::ShapeMismatch, {"dtypes differ"});
  expect_error("Concat", {f32({2, 1}), f32({2})}, axis1, ErrorKind::ShapeMismatch, {"must match"});
  expect_error("Concat", {f32({2, 1})}, {}, ErrorKind::InvalidArgument, {"'axis' is required"});
  expect_error("Concat", {f32({2, 1})}, attrs_of({{"axis", std::int64_t{2}}}), ErrorKind::InvalidArgument,
               {"out of range for rank 2"});
  expect_error("Concat", {}, axis1, ErrorKind::InvalidArgument, {"expects at least 1 inputs, got 0"});
}

BOOST_AUTO_TEST_CASE(identity) {
  BOOST_TEST((infer("Identity", {i64({3, 1})})[0] == i64({3, 1})));
  expect_error("Identity", {f32({1}), f32({1})}, {}, ErrorKind::InvalidArgument, {"expects 1 inputs, got 2"});
}

BOOST_AUTO_TEST_SUITE_END()

// Sizes from a hostile file: products and sums that would overflow int64
// (undefined behaviour) are errors naming the values instead.
BOOST_AUTO_TEST_SUITE(int64_overflow)

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kHuge = std::int64_t{1} << 62;

BOOST_AUTO_TEST_CASE(reshape_target_products) {
  const std::vector<Input> x{f32({2, 3})};
  const std::int64_t big = std::int64_t{1} << 40;
  expect_error("Reshape", x, attrs_of({{"shape", Ints{big, big, big}}}), ErrorKind::InvalidArgument,
               {"product of the target dimensions overflows int64", "shape [1099511627776, 1099511627776, 1099511627776]"});
  expect_error("Reshape", x, attrs_of({{"shape", Ints{-1, kHuge, 4}}}), ErrorKind::InvalidArgument,
               {"overflows int64"});
  // A zero makes the product 0, whatever the other dims: not an overflow.
  expect_error("Reshape", x, attrs_of({{"shape", Ints{kHuge, 4, 0}}, {"allowzero", std::int64_t{1}}}),
               ErrorKind::ShapeMismatch, {"cannot reshape 6 elements", "(0 elements)"});
}

BOOST_AUTO_TEST_CASE(conv_windows_pads_and_groups) {
  const std::vector<Input> x{f32({1, 4, 8, 8}), f32({8, 4, 3, 3})};
  expect_error("Conv", x, attrs_of({{"dilations", Ints{kHuge, 1}}}), ErrorKind::InvalidArgument,
               {"a window of 3 taps with dilation 4611686018427387904 is longer than int64 can hold"});
  expect_error("Conv", x, attrs_of({{"pads", Ints{kMax, 0, 1, 0}}}), ErrorKind::InvalidArgument,
               {"an extent of 8 padded by 9223372036854775807 and 1 is longer than int64 can hold"});
  expect_error("Conv", {f32({1, 4, 8, 8}), f32({8, 4, 3, 3})}, attrs_of({{"group", kHuge}}), ErrorKind::ShapeMismatch,
               {"weight expects more than int64 holds (group 4611686018427387904)"});
}

BOOST_AUTO_TEST_CASE(pooling_windows_pads_and_strides) {
  const std::vector<Input> x{f32({1, 1, 4, 4})};
  expect_error("MaxPool", x, attrs_of({{"kernel_shape", Ints{kHuge, 1}}, {"dilations", Ints{4, 1}}}),
               ErrorKind::InvalidArgument, {"a window of 4611686018427387904 taps with dilation 4"});
  // ceil_mode with a stride near 2^63: ceil(span / stride) without computing span + stride - 1.
  BOOST_TEST(infer_shape("AveragePool", x,
                         attrs_of({{"kernel_shape", Ints{2, 2}},
                                   {"strides", Ints{kMax, 1}},
                                   {"ceil_mode", std::int64_t{1}}})) == Shape({1, 1, 1, 3}));
}

BOOST_AUTO_TEST_SUITE_END()

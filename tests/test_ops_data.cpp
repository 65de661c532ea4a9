#define BOOST_TEST_MODULE ops_data
#include <boost/test/unit_test.hpp>

// The data-movement ops (Slice, Split, Gather, Squeeze, Unsqueeze, Expand,
// Tile, Shape, ConstantOfShape, Pad, Resize) and the indexing ops
// (GatherElements, Trilu): shape-inference errors,
// reference values computed by hand (several from ONNX's operator docs), and
// every lowered kernel run on the kernel IR interpreter against the reference.

#include "graph/ir.h"
#include "graph/op_registry.h"
#include "src/kernel/interpreter.h"
#include "src/kernel/ir.h"
#include "src/lower/lower.h"

#include <kiln/error.h>
#include <kiln/tensor.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace {

using kiln::DType;
using kiln::ErrorKind;
using kiln::Shape;
using kiln::Tensor;
using kiln::graph::Attribute;
using kiln::graph::Attributes;
using kiln::graph::TensorType;
using Ints = std::vector<std::int64_t>;
using Floats = std::vector<float>;

constexpr std::int64_t kMaxInt = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMinInt = std::numeric_limits<std::int64_t>::min();

Attributes attrs(std::initializer_list<std::pair<std::string, Attribute>> list) {
  Attributes a;
  for (const auto& [name, value] : list) a.set(name, value);
  return a;
}

// 0, 1, 2, ... as f32: every element tells where it came from.
Tensor iota(const Shape& shape) {
  Tensor t(DType::f32, shape);
  float next = 0.0f;
  for (float& v : t.values<float>()) v = next++;
  return t;
}

Tensor seeded(const Shape& shape, std::uint64_t seed) {
  Tensor t(DType::f32, shape);
  std::uint64_t state = seed * 6364136223846793005ull + 1;
  for (float& v : t.values<float>()) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = -1.0f + 2.0f * static_cast<float>(state >> 40) / static_cast<float>(1ull << 24);
  }
  return t;
}

// A graph holding one node of `op` over graph inputs of the given tensors' types.
struct OneNode {
  kiln::graph::Graph graph;
  const kiln::graph::Node* node = nullptr;
  std::vector<TensorType> input_types, output_types;
};

OneNode one_node(const std::string& op, const std::vector<Tensor>& inputs, const Attributes& a) {
  OneNode g;
  std::vector<kiln::graph::ValueId> ids;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const TensorType type{inputs[i].dtype(), inputs[i].shape()};
    ids.push_back(g.graph.add_input("in" + std::to_string(i), type));
    g.input_types.push_back(type);
  }
  const auto outputs = g.graph.add_node(op, ids, a, "node0");
  g.graph.set_outputs(outputs);
  g.node = &g.graph.nodes().back();
  for (auto id : outputs) g.output_types.push_back(g.graph.value(id).type);
  return g;
}

std::vector<Tensor> reference(const std::string& op, const std::vector<Tensor>& inputs, const Attributes& a) {
  OneNode g = one_node(op, inputs, a);
  return kiln::graph::get_op(op).reference(*g.node, inputs);
}

Tensor reference1(const std::string& op, const std::vector<Tensor>& inputs, const Attributes& a) {
  std::vector<Tensor> out = reference(op, inputs, a);
  BOOST_REQUIRE_EQUAL(out.size(), 1u);
  return out[0];
}

void check_values(const Tensor& t, const Shape& shape, const Floats& expected, float tolerance = 1e-6f) {
  BOOST_TEST(t.shape() == shape, "shape " << kiln::shape_str(t.shape()) << ", expected " << kiln::shape_str(shape));
  BOOST_REQUIRE_EQUAL(t.values<float>().size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i)
    BOOST_TEST(std::fabs(t.values<float>()[i] - expected[i]) <= tolerance,
               "element " << i << " is " << t.values<float>()[i] << ", expected " << expected[i]);
}

// Expects shape inference (through Graph::add_node) to throw `kind` with a
// message containing `fragment`.
void check_error(const std::string& op, const std::vector<TensorType>& types, const Attributes& a, ErrorKind kind,
                 const std::string& fragment) {
  kiln::graph::Graph g;
  std::vector<kiln::graph::ValueId> ids;
  for (std::size_t i = 0; i < types.size(); ++i) ids.push_back(g.add_input("in" + std::to_string(i), types[i]));
  try {
    g.add_node(op, ids, a, "bad");
    BOOST_ERROR(op << ": expected an error containing '" << fragment << "'");
  } catch (const kiln::Error& e) {
    const std::string message = e.what();
    BOOST_TEST((e.kind() == kind), op << ": kind " << e.kind() << ", message: " << message);
    BOOST_TEST(message.find(fragment) != std::string::npos, op << ": '" << message << "' lacks '" << fragment << "'");
    BOOST_TEST(message.find("node 'bad' (" + op + ")") != std::string::npos, message);
  }
}

// Lowers the node, runs its kernel on the interpreter and compares every
// output with the reference.
void check_kernel(const std::string& op, const std::vector<Tensor>& inputs, const Attributes& a,
                  float tolerance = 1e-5f) {
  BOOST_TEST_CONTEXT(op) {
    OneNode g = one_node(op, inputs, a);
    const auto reason = kiln::lower::unsupported_reason(*g.node, g.input_types, g.output_types);
    BOOST_TEST_REQUIRE(!reason.has_value(), "unsupported: " << reason.value_or(""));
    const std::vector<Tensor> expected = kiln::graph::get_op(op).reference(*g.node, inputs);
    const auto lowered = kiln::lower::lower_node(*g.node, g.input_types, g.output_types);
    BOOST_TEST_REQUIRE((lowered.kind == kiln::lower::LoweredNode::Kind::kernel));
    const kiln::kir::Kernel& kernel = *lowered.kernel;
    BOOST_REQUIRE_EQUAL(kernel.buffers.size(), inputs.size() + expected.size());

    std::vector<Tensor> buffers;
    for (const Tensor& t : inputs) buffers.push_back(t.clone());
    for (const Tensor& t : expected) {
      Tensor out(DType::f32, t.shape());
      for (float& v : out.values<float>()) v = std::numeric_limits<float>::quiet_NaN();  // unwritten stays NaN
      buffers.push_back(out);
    }
    std::vector<std::span<std::byte>> spans;
    for (Tensor& t : buffers) spans.push_back(t.bytes());
    kiln::kir::interpret(kernel, spans);
    for (std::size_t k = 0; k < expected.size(); ++k) {
      const Tensor& got = buffers[inputs.size() + k];
      for (std::size_t i = 0; i < static_cast<std::size_t>(got.numel()); ++i) {
        const float diff = std::fabs(got.values<float>()[i] - expected[k].values<float>()[i]);
        if (!(diff <= tolerance)) {
          BOOST_ERROR("output " << k << " element " << i << ": kernel " << got.values<float>()[i] << ", reference "
                                << expected[k].values<float>()[i]);
          break;
        }
      }
    }
  }
}

Attributes resize(const std::string& mode, const std::string& coordinate, std::optional<std::vector<double>> scales,
                  std::optional<Ints> sizes, const std::string& nearest = "") {
  Attributes a = attrs({{"mode", mode}, {"coordinate_transformation_mode", coordinate}});
  if (!nearest.empty()) a.set("nearest_mode", nearest);
  if (scales) a.set("scales", *scales);
  if (sizes) a.set("sizes", *sizes);
  return a;
}

}  // namespace

// ---- shape inference errors --------------------------------------------------------

BOOST_AUTO_TEST_CASE(invalid_attributes_are_clear_errors) {
  const TensorType x{DType::f32, {2, 3, 4}};
  check_error("Slice", {x}, attrs({{"starts", Ints{0}}, {"ends", Ints{2}}, {"steps", Ints{0}}}),
              ErrorKind::InvalidArgument, "'steps' [0] contains 0");
  check_error("Slice", {x}, attrs({{"starts", Ints{0}}, {"ends", Ints{2}}, {"axes", Ints{3}}}),
              ErrorKind::InvalidArgument, "out of range for rank 3");
  check_error("Split", {x}, attrs({{"axis", std::int64_t{1}}, {"split", Ints{1, 1}}}), ErrorKind::ShapeMismatch,
              "sums to 2, not 3");
  check_error("Split", {x}, attrs({{"axis", std::int64_t{2}}}), ErrorKind::InvalidArgument, "'num_outputs'");
  check_error("Gather", {x}, attrs({{"axis", std::int64_t{1}}, {"indices", Ints{3}}, {"indices_shape", Ints{1}}}),
              ErrorKind::InvalidArgument, "index 3 is out of range for an axis of extent 3");
  check_error("Gather", {x, {DType::f32, {2}}}, attrs({}), ErrorKind::ShapeMismatch, "indices must be i64 or i32");
  check_error("Squeeze", {x}, attrs({{"axes", Ints{1}}}), ErrorKind::ShapeMismatch, "cannot squeeze axis 1 of extent 3");
  check_error("Unsqueeze", {x}, attrs({{"axes", Ints{0, -5}}}), ErrorKind::InvalidArgument, "names axis 0 twice");
  check_error("Expand", {x}, attrs({{"shape", Ints{2, 5, 4}}}), ErrorKind::ShapeMismatch, "");
  check_error("Tile", {x}, attrs({{"repeats", Ints{1, 2}}}), ErrorKind::InvalidArgument, "needs 3 values");
  check_error("Pad", {x}, attrs({{"pads", Ints{0, 3, 0, 0, 0, 0}}, {"mode", std::string("reflect")}}),
              ErrorKind::ShapeMismatch, "smaller than its extent 3");
  check_error("Pad", {x}, attrs({{"pads", Ints{0, -2, 0, 0, -2, 0}}}), ErrorKind::ShapeMismatch,
              "dim 1 would crop to -1");
  check_error("Pad", {x}, attrs({{"pads", Ints{0, 0, 0, 0, 0, 0}}, {"mode", std::string("wrap")}}),
              ErrorKind::Unsupported, "supported: constant, reflect, edge");
  check_error("Resize", {x}, resize("cubic", "half_pixel", std::vector<double>{1, 2, 2}, std::nullopt),
              ErrorKind::Unsupported, "mode 'cubic' is not supported");
  check_error("Resize", {x}, resize("linear", "half_pixel", std::vector<double>{1, 2}, std::nullopt),
              ErrorKind::InvalidArgument, "'scales' has 2 values, expected 3");
  check_error("Resize", {x}, resize("nearest", "tf_crop_and_resize", std::nullopt, Ints{2, 3, 8}),
              ErrorKind::Unsupported, "'coordinate_transformation_mode' is 'tf_crop_and_resize'");
  check_error("ConstantOfShape", {}, attrs({{"shape", Ints{1 << 20, 1 << 20, 1 << 20}}}), ErrorKind::InvalidArgument,
              "the most a data op may create");
  check_error("ConstantOfShape", {}, attrs({{"shape", Ints{2}}, {"dtype", std::int64_t{8}}}), ErrorKind::Unsupported,
              "ONNX data type 8");
  check_error("Expand", {x}, attrs({{"shape", Ints{2, 3, 4}}, {"shap", Ints{1}}}), ErrorKind::InvalidArgument,
              "unknown attribute 'shap'");
}

// Attributes from a hostile file whose sums or products pass int64: errors
// naming the values, not wraparound (undefined behaviour).
BOOST_AUTO_TEST_CASE(sizes_that_overflow_int64_are_errors) {
  const TensorType x{DType::f32, {2, 3, 4}};
  check_error("Split", {x}, attrs({{"axis", std::int64_t{1}}, {"split", Ints{kMaxInt, kMaxInt, 2}}}),
              ErrorKind::InvalidArgument, "'split' [9223372036854775807, 9223372036854775807, 2] sums past int64");
  check_error("Gather", {x},
              attrs({{"axis", std::int64_t{0}}, {"indices", Ints{0}}, {"indices_shape", Ints{kMaxInt, kMaxInt, 0, 2}}}),
              ErrorKind::InvalidArgument, "attribute 'indices' has 1 values");
  check_error("Gather", {x},
              attrs({{"axis", std::int64_t{0}}, {"indices", Ints{0}}, {"indices_shape", Ints{kMaxInt, 2}}}),
              ErrorKind::InvalidArgument, "attribute 'indices' has 1 values");
  check_error("Tile", {x}, attrs({{"repeats", Ints{kMaxInt, 1, 1}}}), ErrorKind::InvalidArgument, "too large");
  check_error("Resize", {x}, resize("nearest", "asymmetric", std::vector<double>{1, 1, 1e300}, std::nullopt),
              ErrorKind::InvalidArgument, "'scales' makes dim 2 too large");
}

// ---- reference values --------------------------------------------------------------

BOOST_AUTO_TEST_CASE(slice_follows_onnx_clamping) {
  const Tensor x = iota({2, 5});
  // x[:, ::-2] with INT64 sentinels.
  check_values(reference1("Slice", {x}, attrs({{"starts", Ints{kMaxInt}}, {"ends", Ints{kMinInt}}, {"axes", Ints{1}},
                                               {"steps", Ints{-2}}})),
               {2, 3}, {4, 2, 0, 9, 7, 5});
  // x[1:, -3:100]
  check_values(reference1("Slice", {x}, attrs({{"starts", Ints{1, -3}}, {"ends", Ints{kMaxInt, 100}}})), {1, 3},
               {7, 8, 9});
  // An empty window: start past end.
  check_values(reference1("Slice", {x}, attrs({{"starts", Ints{4}}, {"ends", Ints{2}}, {"axes", Ints{-1}}})), {2, 0},
               {});
  // i64 data slices the same way.
  const Tensor y = reference1("Slice", {Tensor::from_i64({4}, {10, 20, 30, 40})},
                              attrs({{"starts", Ints{-1}}, {"ends", Ints{0}}, {"steps", Ints{-1}}}));
  BOOST_TEST((std::vector<std::int64_t>(y.values<std::int64_t>().begin(), y.values<std::int64_t>().end()) ==
              std::vector<std::int64_t>{40, 30, 20}));
}

BOOST_AUTO_TEST_CASE(split_by_sizes_and_by_count) {
  const Tensor x = iota({2, 5});
  const auto pieces = reference("Split", {x}, attrs({{"axis", std::int64_t{1}}, {"split", Ints{2, 3}}}));
  BOOST_REQUIRE_EQUAL(pieces.size(), 2u);
  check_values(pieces[0], {2, 2}, {0, 1, 5, 6});
  check_values(pieces[1], {2, 3}, {2, 3, 4, 7, 8, 9});
  // ONNX opset 18: pieces of ceil(5 / 3) = 2, the last one smaller.
  const auto equal = reference("Split", {x}, attrs({{"axis", std::int64_t{-1}}, {"num_outputs", std::int64_t{3}}}));
  BOOST_REQUIRE_EQUAL(equal.size(), 3u);
  check_values(equal[2], {2, 1}, {4, 9});
}

BOOST_AUTO_TEST_CASE(gather_both_forms) {
  const Tensor x = iota({3, 2});
  // ONNX docs example: indices [[0, 1], [1, 2]] along axis 0.
  const Tensor indices = Tensor::from_i64({2, 2}, {0, 1, 1, 2});
  check_values(reference1("Gather", {x, indices}, attrs({})), {2, 2, 2}, {0, 1, 2, 3, 2, 3, 4, 5});
  check_values(reference1("Gather", {x}, attrs({{"indices", Ints{0, 1, 1, 2}}, {"indices_shape", Ints{2, 2}}})),
               {2, 2, 2}, {0, 1, 2, 3, 2, 3, 4, 5});
  // A scalar negative index drops the axis: x[:, -1].
  check_values(reference1("Gather", {x}, attrs({{"axis", std::int64_t{1}}, {"indices", Ints{-1}}, {"indices_shape", Ints{}}})),
               {3}, {1, 3, 5});
  // A runtime index out of range is a user error.
  BOOST_CHECK_THROW(reference("Gather", {x, Tensor::from_i64({1}, {3})}, attrs({})), kiln::Error);
}

BOOST_AUTO_TEST_CASE(gather_elements_picks_along_one_axis) {
  // ONNX docs examples: data [[1, 2], [3, 4]], indices [[0, 0], [1, 0]] along axis 1.
  const Tensor data = Tensor::from_f32({2, 2}, {1, 2, 3, 4});
  check_values(reference1("GatherElements", {data, Tensor::from_i64({2, 2}, {0, 0, 1, 0})},
                          attrs({{"axis", std::int64_t{1}}})),
               {2, 2}, {1, 1, 4, 3});
  // Along axis 0 with i32 indices of another shape (the output takes it), one negative.
  const Tensor x = iota({3, 3});
  Tensor indices(DType::i32, {2, 3});
  const std::vector<std::int32_t> raw = {1, 2, 0, 2, 0, -3};
  std::copy(raw.begin(), raw.end(), indices.values<std::int32_t>().begin());
  check_values(reference1("GatherElements", {x, indices}, attrs({})), {2, 3}, {3, 7, 2, 6, 1, 2});
  // Any dtype moves: i64 data along the last axis.
  const Tensor y = reference1("GatherElements", {Tensor::from_i64({1, 3}, {10, 20, 30}), Tensor::from_i64({1, 2}, {2, 2})},
                              attrs({{"axis", std::int64_t{-1}}}));
  BOOST_TEST((y.dtype() == DType::i64));
  BOOST_TEST((std::vector<std::int64_t>(y.values<std::int64_t>().begin(), y.values<std::int64_t>().end()) ==
              std::vector<std::int64_t>{30, 30}));
  // An index out of range is a user error naming it.
  try {
    reference("GatherElements", {x, Tensor::from_i64({1, 1}, {3})}, attrs({}));
    BOOST_ERROR("expected an error");
  } catch (const kiln::Error& e) {
    BOOST_TEST(std::string(e.what()).find("index 3 is out of range") != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_CASE(gather_elements_inference_errors) {
  const TensorType data{DType::f32, {2, 3}};
  check_error("GatherElements", {data, {DType::i64, {2}}}, attrs({}), ErrorKind::ShapeMismatch,
              "indices must have the rank of the data");
  check_error("GatherElements", {data, {DType::f32, {2, 3}}}, attrs({}), ErrorKind::ShapeMismatch,
              "indices must be i64 or i32");
  check_error("GatherElements", {data, {DType::i64, {2, 4}}}, attrs({}), ErrorKind::ShapeMismatch,
              "indices extent 4 exceeds the data's 3 on axis 1");
  check_error("GatherElements", {data, {DType::i64, {2, 3}}}, attrs({{"axis", std::int64_t{2}}}),
              ErrorKind::InvalidArgument, "out of range for rank 2");
  // Along the gathered axis the indices may be longer than the data.
  kiln::graph::Graph g;
  const auto out = g.add_node("GatherElements", {g.add_input("d", data), g.add_input("i", {DType::i64, {2, 7}})},
                              attrs({{"axis", std::int64_t{1}}}), "long");
  BOOST_TEST((g.value(out[0]).type == TensorType{DType::f32, {2, 7}}));
}

BOOST_AUTO_TEST_CASE(trilu_keeps_one_side_of_a_diagonal) {
  const Tensor x = Tensor::from_f32({3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  check_values(reference1("Trilu", {x}, attrs({})), {3, 4}, {1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12});
  check_values(reference1("Trilu", {x}, attrs({{"upper", std::int64_t{0}}})), {3, 4},
               {1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0});
  check_values(reference1("Trilu", {x}, attrs({{"k", std::int64_t{2}}})), {3, 4}, {0, 0, 3, 4, 0, 0, 0, 8, 0, 0, 0, 0});
  check_values(reference1("Trilu", {x}, attrs({{"upper", std::int64_t{0}}, {"k", std::int64_t{-1}}})), {3, 4},
               {0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0});
  // k far outside the matrix: everything or nothing.
  check_values(reference1("Trilu", {x}, attrs({{"k", kMinInt}})), {3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  check_values(reference1("Trilu", {x}, attrs({{"k", kMaxInt}})), {3, 4}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  // k as a runtime i64 input, on a batch of i64 matrices.
  const Tensor batch = Tensor::from_i64({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  const Tensor y = reference1("Trilu", {batch, Tensor::from_i64({}, {1})}, attrs({{"upper", std::int64_t{0}}}));
  BOOST_TEST((std::vector<std::int64_t>(y.values<std::int64_t>().begin(), y.values<std::int64_t>().end()) ==
              std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  const Tensor z = reference1("Trilu", {batch, Tensor::from_i64({}, {0})}, attrs({}));
  BOOST_TEST((std::vector<std::int64_t>(z.values<std::int64_t>().begin(), z.values<std::int64_t>().end()) ==
              std::vector<std::int64_t>{1, 2, 0, 4, 5, 6, 0, 8}));

  const TensorType vector{DType::f32, {5}};
  check_error("Trilu", {vector}, attrs({}), ErrorKind::ShapeMismatch, "rank >= 2");
  check_error("Trilu", {{DType::f32, {2, 2}}, {DType::i64, {2}}}, attrs({}), ErrorKind::ShapeMismatch,
              "k must be one i64 value");
  check_error("Trilu", {{DType::f32, {2, 2}}, {DType::i64, {}}}, attrs({{"k", std::int64_t{1}}}),
              ErrorKind::InvalidArgument, "both given");
  check_error("Trilu", {{DType::f32, {2, 2}}}, attrs({{"upper", std::int64_t{2}}}), ErrorKind::InvalidArgument,
              "'upper'");
}

BOOST_AUTO_TEST_CASE(views_and_broadcasts) {
  const Tensor x = iota({1, 3, 1});
  BOOST_TEST(reference1("Squeeze", {x}, attrs({})).shape() == (Shape{3}));
  BOOST_TEST(reference1("Unsqueeze", {x}, attrs({{"axes", Ints{-1, 0}}})).shape() == (Shape{1, 1, 3, 1, 1}));
  check_values(reference1("Expand", {iota({3, 1})}, attrs({{"shape", Ints{2, 1, 2}}})), {2, 3, 2},
               {0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2});
  check_values(reference1("Tile", {iota({2, 2})}, attrs({{"repeats", Ints{1, 2}}})), {2, 4}, {0, 1, 0, 1, 2, 3, 2, 3});
}

BOOST_AUTO_TEST_CASE(shape_and_constant_of_shape) {
  const Tensor x(DType::f32, {2, 3, 4, 5});
  const Tensor dims = reference1("Shape", {x}, attrs({{"start", std::int64_t{-3}}, {"end", std::int64_t{-1}}}));
  BOOST_TEST((dims.dtype() == DType::i64));
  BOOST_TEST((std::vector<std::int64_t>(dims.values<std::int64_t>().begin(), dims.values<std::int64_t>().end()) ==
              std::vector<std::int64_t>{3, 4}));

  const Tensor ones = reference1("ConstantOfShape", {}, attrs({{"shape", Ints{2, 2}}, {"value", 1.0},
                                                               {"dtype", std::int64_t{7}}}));
  BOOST_TEST((ones.dtype() == DType::i64));
  for (std::int64_t v : ones.values<std::int64_t>()) BOOST_TEST(v == 1);
  const Tensor half = reference1("ConstantOfShape", {}, attrs({{"shape", Ints{1}}, {"value", 1.5},
                                                               {"dtype", std::int64_t{10}}}));
  BOOST_TEST(half.values<std::uint16_t>()[0] == 0x3e00u);  // 1.5 in binary16
  // binary16 rounding at its edges: largest finite, ties to infinity, smallest subnormal, a tie to zero.
  const std::pair<double, unsigned> halves[] = {{65504.0, 0x7bffu}, {65520.0, 0x7c00u}, {-65520.0, 0xfc00u},
                                                {std::ldexp(1.0, -24), 0x0001u}, {std::ldexp(1.0, -25), 0x0000u}};
  for (const auto& [value, bits] : halves) {
    const Tensor h = reference1("ConstantOfShape", {}, attrs({{"shape", Ints{1}}, {"value", value},
                                                              {"dtype", std::int64_t{10}}}));
    BOOST_TEST(h.values<std::uint16_t>()[0] == bits, value << " -> " << std::hex << h.values<std::uint16_t>()[0]);
  }
  const Tensor zeros = reference1("ConstantOfShape", {}, attrs({{"shape", Ints{3}}}));
  check_values(zeros, {3}, {0, 0, 0});
}

BOOST_AUTO_TEST_CASE(pad_modes) {
  const Tensor x = Tensor::from_f32({3}, {1, 2, 3});
  check_values(reference1("Pad", {x}, attrs({{"pads", Ints{2, 1}}, {"value", 9.0}})), {6}, {9, 9, 1, 2, 3, 9});
  check_values(reference1("Pad", {x}, attrs({{"pads", Ints{2, 2}}, {"mode", std::string("reflect")}})), {7},
               {3, 2, 1, 2, 3, 2, 1});
  check_values(reference1("Pad", {x}, attrs({{"pads", Ints{1, 2}}, {"mode", std::string("edge")}})), {6},
               {1, 1, 2, 3, 3, 3});
  check_values(reference1("Pad", {x}, attrs({{"pads", Ints{-1, 1}}})), {3}, {2, 3, 0});
  // i64 padding takes the value as an integer.
  const Tensor y = reference1("Pad", {Tensor::from_i64({1}, {5})}, attrs({{"pads", Ints{1, 0}}, {"value", 7.0}}));
  BOOST_TEST(y.values<std::int64_t>()[0] == 7);
}

BOOST_AUTO_TEST_CASE(resize_matches_onnx_examples) {
  const Tensor x = Tensor::from_f32({1, 1, 2, 2}, {1, 2, 3, 4});
  // ONNX resize_upsample_scales_nearest.
  check_values(reference1("Resize", {x}, resize("nearest", "half_pixel", std::vector<double>{1, 1, 2, 3}, std::nullopt)),
               {1, 1, 4, 6}, {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
  // ONNX resize_upsample_scales_linear.
  check_values(reference1("Resize", {x}, resize("linear", "half_pixel", std::vector<double>{1, 1, 2, 2}, std::nullopt)),
               {1, 1, 4, 4},
               {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
  // ONNX resize_upsample_scales_linear_align_corners.
  const float t = 1.0f / 3.0f;
  check_values(
      reference1("Resize", {x}, resize("linear", "align_corners", std::vector<double>{1, 1, 2, 2}, std::nullopt)),
      {1, 1, 4, 4},
      {1, 1 + t, 1 + 2 * t, 2, 1 + 2 * t, 2, 2 + t, 2 + 2 * t, 2 + t, 2 + 2 * t, 3, 3 + t, 3, 3 + t, 3 + 2 * t, 4},
      1e-5f);
  // ONNX resize_downsample_scales_nearest: [[1, 2, 3, 4], [5, 6, 7, 8]] by 0.6.
  const Tensor wide = iota({1, 1, 2, 4});
  check_values(
      reference1("Resize", {wide}, resize("nearest", "half_pixel", std::vector<double>{1, 1, 0.6, 0.6}, std::nullopt)),
      {1, 1, 1, 2}, {0, 2});
  // Nearest modes on one axis of 4 -> 8 with asymmetric coordinates x / 2.
  const Tensor line = iota({4});
  check_values(reference1("Resize", {line}, resize("nearest", "asymmetric", std::nullopt, Ints{8}, "round_prefer_floor")),
               {8}, {0, 0, 1, 1, 2, 2, 3, 3});
  check_values(reference1("Resize", {line}, resize("nearest", "asymmetric", std::nullopt, Ints{8}, "round_prefer_ceil")),
               {8}, {0, 1, 1, 2, 2, 3, 3, 3});
  check_values(reference1("Resize", {line}, resize("nearest", "asymmetric", std::nullopt, Ints{8}, "ceil")), {8},
               {0, 1, 1, 2, 2, 3, 3, 3});
  // pytorch_half_pixel to a single output reads position 0.
  check_values(reference1("Resize", {line}, resize("linear", "pytorch_half_pixel", std::nullopt, Ints{1})), {1}, {0});
}

// ---- kernels on the interpreter vs the reference ------------------------------------

BOOST_AUTO_TEST_CASE(slice_split_gather_kernels) {
  const Tensor x = seeded({2, 5, 6}, 1);
  check_kernel("Slice", {x}, attrs({{"starts", Ints{1, -1}}, {"ends", Ints{kMaxInt, kMinInt}}, {"axes", Ints{1, 2}},
                                    {"steps", Ints{2, -3}}}));
  check_kernel("Slice", {x}, attrs({{"starts", Ints{0, 0, 2}}, {"ends", Ints{1, 5, 4}}}));
  check_kernel("Split", {x}, attrs({{"axis", std::int64_t{2}}, {"split", Ints{1, 4, 1}}}));
  check_kernel("Split", {x}, attrs({{"axis", std::int64_t{0}}, {"num_outputs", std::int64_t{2}}}));
  check_kernel("Gather", {x}, attrs({{"axis", std::int64_t{1}}, {"indices", Ints{4, 3, 2, 0, 0, -1, 1}},
                                     {"indices_shape", Ints{7}}}));
  check_kernel("Gather", {x}, attrs({{"axis", std::int64_t{-1}}, {"indices", Ints{5}}, {"indices_shape", Ints{}}}));
}

BOOST_AUTO_TEST_CASE(expand_tile_pad_kernels) {
  check_kernel("Expand", {seeded({4, 1, 3}, 2)}, attrs({{"shape", Ints{2, 1, 5, 1}}}));
  check_kernel("Tile", {seeded({2, 1, 3}, 3)}, attrs({{"repeats", Ints{3, 4, 2}}}));
  const Tensor x = seeded({2, 4, 5}, 4);
  check_kernel("Pad", {x}, attrs({{"pads", Ints{0, 1, 3, 1, 2, 0}}, {"value", -2.5}}));
  check_kernel("Pad", {x}, attrs({{"pads", Ints{1, 3, 4, 1, 2, 4}}, {"mode", std::string("reflect")}}));
  check_kernel("Pad", {x}, attrs({{"pads", Ints{0, 5, 0, 2, 7, 1}}, {"mode", std::string("edge")}}));
  check_kernel("Pad", {x}, attrs({{"pads", Ints{0, -1, 2, 0, 1, -3}}}));
}

BOOST_AUTO_TEST_CASE(trilu_kernels) {
  const Tensor x = seeded({2, 3, 5, 4}, 11);
  for (std::int64_t upper : {0, 1})
    for (std::int64_t k : {kMinInt, std::int64_t{-4}, std::int64_t{-1}, std::int64_t{0}, std::int64_t{2},
                           std::int64_t{3}, std::int64_t{9}, kMaxInt})
      BOOST_TEST_CONTEXT("upper " << upper << " k " << k)
      check_kernel("Trilu", {x}, attrs({{"upper", upper}, {"k", k}}), 0.0f);
  check_kernel("Trilu", {seeded({1, 6}, 12)}, attrs({}), 0.0f);
}

BOOST_AUTO_TEST_CASE(resize_kernels_every_mode) {
  const Tensor x = seeded({1, 2, 5, 7}, 5);
  const char* coordinates[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                               "asymmetric"};
  const char* nearest_modes[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  for (const char* coordinate : coordinates) {
    BOOST_TEST_CONTEXT(coordinate) {
      check_kernel("Resize", {x}, resize("linear", coordinate, std::nullopt, Ints{1, 2, 11, 4}));
      check_kernel("Resize", {x}, resize("linear", coordinate, std::vector<double>{1, 1, 2, 0.5}, std::nullopt));
      for (const char* nearest : nearest_modes) {
        check_kernel("Resize", {x}, resize("nearest", coordinate, std::nullopt, Ints{1, 2, 10, 3}, nearest));
        check_kernel("Resize", {x}, resize("nearest", coordinate, std::vector<double>{1, 1, 3, 2}, std::nullopt, nearest));
      }
    }
  }
  // Linear over a 3-D tensor interpolates only the axes that change.
  check_kernel("Resize", {seeded({3, 4, 6}, 6)}, resize("linear", "asymmetric", std::vector<double>{1, 2.5, 1}, std::nullopt));
}

BOOST_AUTO_TEST_CASE(nearest_kernels_pick_the_references_neighbour_at_every_size) {
  // The reference maps coordinates in double, which rounds some exact ties
  // (in 7 -> out 9, half_pixel, floor: position 4 maps to 3 - 1e-16); the
  // kernel must agree at every position of every size, not only typical ones.
  const char* coordinates[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                               "asymmetric", "tf_half_pixel_for_nn"};
  const char* nearest_modes[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  for (std::int64_t in = 1; in <= 12; ++in) {
    const Tensor x = iota({in});
    for (std::int64_t out = 1; out <= 20; ++out)
      for (const char* coordinate : coordinates)
        for (const char* nearest : nearest_modes)
          BOOST_TEST_CONTEXT(in << " -> " << out << " " << coordinate << " " << nearest)
          check_kernel("Resize", {x}, resize("nearest", coordinate, std::nullopt, Ints{out}, nearest), 0.0f);
  }
}

BOOST_AUTO_TEST_CASE(what_stays_off_the_device) {
  // Squeeze and Unsqueeze are views; Gather with a runtime indices tensor
  // into integer data and Shape have no kernel and say why.
  OneNode squeeze = one_node("Squeeze", {seeded({1, 3}, 7)}, attrs({}));
  BOOST_TEST((kiln::lower::lower_node(*squeeze.node, squeeze.input_types, squeeze.output_types).kind ==
              kiln::lower::LoweredNode::Kind::alias));
  OneNode gather = one_node("Gather", {Tensor::from_i64({4}, {5, 6, 7, 8}), Tensor::from_i64({2}, {1, 0})}, attrs({}));
  const auto reason = kiln::lower::unsupported_reason(*gather.node, gather.input_types, gather.output_types);
  BOOST_REQUIRE(reason.has_value());
  BOOST_TEST(reason->find("only f32 has") != std::string::npos, *reason);
  OneNode shape = one_node("Shape", {seeded({4, 3}, 9)}, attrs({}));
  BOOST_TEST(kiln::lower::unsupported_reason(*shape.node, shape.input_types, shape.output_types).has_value());
  // Irregular constant indices beyond what a select chain should hold.
  Ints scattered;
  for (std::int64_t i = 0; i < 40; ++i) scattered.push_back((i * i) % 40);
  OneNode wide = one_node("Gather", {seeded({40}, 10)}, attrs({{"indices", scattered}, {"indices_shape", Ints{40}}}));
  const auto wide_reason = kiln::lower::unsupported_reason(*wide.node, wide.input_types, wide.output_types);
  BOOST_REQUIRE(wide_reason.has_value());
  BOOST_TEST(wide_reason->find("arithmetic runs") != std::string::npos, *wide_reason);
  // GatherElements reads a runtime index tensor: f32 data only; Trilu lowers only with a constant k.
  OneNode elements = one_node("GatherElements", {seeded({4, 3}, 13), Tensor::from_i64({4, 3}, Ints(12, 1))}, attrs({}));
  BOOST_TEST(!kiln::lower::unsupported_reason(*elements.node, elements.input_types, elements.output_types).has_value());
  OneNode int_elements =
      one_node("GatherElements", {Tensor::from_i64({2, 2}, {1, 2, 3, 4}), Tensor::from_i64({2, 2}, Ints(4, 1))}, attrs({}));
  const auto elements_reason =
      kiln::lower::unsupported_reason(*int_elements.node, int_elements.input_types, int_elements.output_types);
  BOOST_REQUIRE(elements_reason.has_value());
  BOOST_TEST(elements_reason->find("i64") != std::string::npos, *elements_reason);
  OneNode trilu = one_node("Trilu", {seeded({3, 3}, 14), Tensor::from_i64({}, {1})}, attrs({}));
  BOOST_TEST(kiln::lower::unsupported_reason(*trilu.node, trilu.input_types, trilu.output_types).has_value());
}

// ScatterElements writes (or combines) updates at the indices along an axis;
// integer sums wrap; an index out of range is an error naming it.
BOOST_AUTO_TEST_CASE(scatter_elements_writes_or_combines_along_one_axis) {
  const Tensor data = Tensor::from_f32({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor indices = Tensor::from_i64({2, 2}, {2, 0, -1, 2});
  const Tensor updates = Tensor::from_f32({2, 2}, {10, 20, 30, 40});
  check_values(reference1("ScatterElements", {data, indices, updates}, attrs({{"axis", std::int64_t{1}}})), {2, 3},
               {20, 2, 10, 4, 5, 40});
  check_values(reference1("ScatterElements", {data, indices, updates},
                          attrs({{"axis", std::int64_t{1}}, {"reduction", std::string("add")}})),
               {2, 3}, {21, 2, 13, 4, 5, 76});
  const Tensor big = Tensor::from_i64({1}, {std::numeric_limits<std::int64_t>::max()});
  const Tensor y = reference1("ScatterElements", {big, Tensor::from_i64({1}, {0}), Tensor::from_i64({1}, {1})},
                              attrs({{"reduction", std::string("add")}}));
  BOOST_TEST(y.values<std::int64_t>()[0] == std::numeric_limits<std::int64_t>::min());
  try {
    reference("ScatterElements", {data, Tensor::from_i64({2, 2}, {0, 3, 0, 0}), updates}, attrs({{"axis", std::int64_t{1}}}));
    BOOST_ERROR("expected an error");
  } catch (const kiln::Error& e) {
    BOOST_TEST(std::string(e.what()).find("index 3 is out of range") != std::string::npos, e.what());
  }
}

// GatherND picks slices by index tuples, after shared batch axes; an index
// out of range is an error naming its axis.
BOOST_AUTO_TEST_CASE(gather_nd_picks_slices_by_index_tuples) {
  const Tensor data = iota({2, 2, 2});  // 0..7
  check_values(reference1("GatherND", {data, Tensor::from_i64({2, 2}, {0, 1, 1, 0})}, attrs({})), {2, 2}, {2, 3, 4, 5});
  check_values(reference1("GatherND", {data, Tensor::from_i64({2, 1}, {1, 0})}, attrs({{"batch_dims", std::int64_t{1}}})),
               {2, 2}, {2, 3, 4, 5});
  try {
    reference("GatherND", {data, Tensor::from_i64({1, 3}, {0, 2, 0})}, attrs({}));
    BOOST_ERROR("expected an error");
  } catch (const kiln::Error& e) {
    BOOST_TEST(std::string(e.what()).find("index 2 is out of range for axis 1") != std::string::npos, e.what());
  }
}

// OneHot puts values[1] where an index names a position along the new axis
// and values[0] elsewhere; negative indices count from the end, float indices
// are truncated, and an index outside [-depth, depth) (or NaN) leaves its row
// all off rather than failing.
BOOST_AUTO_TEST_CASE(one_hot_marks_the_named_position_along_a_new_axis) {
  const Tensor values = Tensor::from_f32({2}, {0, 5});
  check_values(reference1("OneHot", {Tensor::from_i64({3}, {0, -1, 7}), values}, attrs({{"depth", std::int64_t{3}}})), {3, 3},
               {5, 0, 0, 0, 0, 5, 0, 0, 0});
  check_values(reference1("OneHot", {Tensor::from_i64({3}, {0, 2, 1}), values},
                          attrs({{"depth", std::int64_t{3}}, {"axis", std::int64_t{0}}})),
               {3, 3}, {5, 0, 0, 0, 0, 5, 0, 5, 0});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  check_values(reference1("OneHot", {Tensor::from_f32({4}, {1.7f, -0.5f, nan, -3.5f}), values}, attrs({{"depth", std::int64_t{2}}})),
               {4, 2}, {0, 5, 5, 0, 0, 0, 0, 0});
  try {
    reference("OneHot", {Tensor::from_i64({1}, {0}), values}, attrs({{"depth", std::int64_t{0}}}));
    BOOST_ERROR("expected an error");
  } catch (const kiln::Error& e) {
    BOOST_TEST(std::string(e.what()).find("depth 0 must be positive") != std::string::npos, e.what());
  }
}

// TensorScatter (ONNX opset 24) writes each batch entry's update rows at its
// write index along the sequence axis; circular mode wraps them; without
// write_indices they land at 0; a linear write past the end is an error.
BOOST_AUTO_TEST_CASE(tensor_scatter_writes_update_rows_at_each_batch_entrys_index) {
  const Tensor past = iota({2, 1, 4, 2});  // [batch 2, heads 1, cache 4, dim 2]: 0..15
  const Tensor update = Tensor::from_f32({2, 1, 2, 2}, {100, 101, 102, 103, 200, 201, 202, 203});
  check_values(reference1("TensorScatter", {past, update, Tensor::from_i64({2}, {1, 2})}, attrs({})), {2, 1, 4, 2},
               {0, 1, 100, 101, 102, 103, 6, 7, 8, 9, 10, 11, 200, 201, 202, 203});
  check_values(reference1("TensorScatter", {past, update, Tensor::from_i64({2}, {3, 0})},
                          attrs({{"mode", std::string("circular")}})),
               {2, 1, 4, 2}, {102, 103, 2, 3, 4, 5, 100, 101, 200, 201, 202, 203, 12, 13, 14, 15});
  check_values(reference1("TensorScatter", {past, update}, attrs({})), {2, 1, 4, 2},
               {100, 101, 102, 103, 4, 5, 6, 7, 200, 201, 202, 203, 12, 13, 14, 15});
  // Along axis 1 of [batch 1, cache 3, dim 2].
  check_values(reference1("TensorScatter", {iota({1, 3, 2}), Tensor::from_f32({1, 1, 2}, {9, 9}), Tensor::from_i64({1}, {2})},
                          attrs({{"axis", std::int64_t{1}}})),
               {1, 3, 2}, {0, 1, 2, 3, 9, 9});
  try {
    reference("TensorScatter", {past, update, Tensor::from_i64({2}, {0, 3})}, attrs({}));
    BOOST_ERROR("expected an error");
  } catch (const kiln::Error& e) {
    BOOST_TEST(std::string(e.what()).find("write index 3 of batch entry 1 puts 2 rows outside a cache of 4") !=
                   std::string::npos,
               e.what());
  }
  try {
    reference("TensorScatter", {past, update}, attrs({{"axis", std::int64_t{0}}}));
    BOOST_ERROR("expected an error");
  } catch (const kiln::Error& e) {
    BOOST_TEST(std::string(e.what()).find("axis must not be the batch axis") != std::string::npos, e.what());
  }
}

// ScatterND replaces (or combines) the slices its index tuples name, in the
// indices' order; an index out of range is an error naming its axis.
BOOST_AUTO_TEST_CASE(scatter_nd_writes_the_slices_its_tuples_name) {
  const Tensor data = iota({2, 3});  // 0..5
  check_values(reference1("ScatterND", {data, Tensor::from_i64({2, 1}, {1, 0}), Tensor::from_f32({2, 3}, {7, 8, 9, 10, 11, 12})},
                          attrs({})),
               {2, 3}, {10, 11, 12, 7, 8, 9});
  check_values(reference1("ScatterND", {data, Tensor::from_i64({2, 2}, {0, 2, 0, -1}), Tensor::from_f32({2}, {10, 20})},
                          attrs({{"reduction", std::string("add")}})),
               {2, 3}, {0, 1, 32, 3, 4, 5});
  try {
    reference("ScatterND", {data, Tensor::from_i64({1, 2}, {2, 0}), Tensor::from_f32({1}, {1})}, attrs({}));
    BOOST_ERROR("expected an error");
  } catch (const kiln::Error& e) {
    BOOST_TEST(std::string(e.what()).find("index 2 is out of range for axis 0") != std::string::npos, e.what());
  }
}

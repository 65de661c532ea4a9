#define BOOST_TEST_MODULE graph_ir
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include <kiln/npy.h>

#include "graph/ir.h"
#include "graph/op_registry.h"

using namespace kiln;
using namespace kiln::graph;

namespace {

// Runs `body` and checks that it throws kiln::Error of `kind` whose message
// contains every one of `fragments`.
void expect_error(const std::function<void()>& body, ErrorKind kind, const std::vector<std::string>& fragments) {
  try {
    body();
  } catch (const Error& e) {
    BOOST_TEST(error_kind_name(e.kind()) == error_kind_name(kind), "message: " << e.what());
    for (const std::string& fragment : fragments)
      BOOST_TEST(std::string(e.what()).find(fragment) != std::string::npos,
                 "'" << fragment << "' not in: " << e.what());
    return;
  }
  BOOST_FAIL("no kiln::Error thrown");
}

Attributes attrs_of(std::initializer_list<std::pair<std::string, Attribute>> list) {
  Attributes attrs;
  for (const auto& [name, value] : list) attrs.set(name, value);
  return attrs;
}

// x[1, 3, 8, 8] -> Conv(w, b, pads 1) -> Relu: values %0 x, %1 w, %2 b, %3 conv, %4 relu.
Graph make_conv_relu() {
  Graph g;
  const ValueId x = g.add_input("x", {DType::f32, {1, 3, 8, 8}});
  const ValueId w = g.add_constant("w", Tensor(DType::f32, {8, 3, 3, 3}));
  const ValueId b = g.add_constant("b", Tensor(DType::f32, {8}));
  const ValueId conv =
      g.add_node("Conv", {x, w, b}, attrs_of({{"pads", std::vector<std::int64_t>{1, 1, 1, 1}}}), "conv1")[0];
  const ValueId relu = g.add_node("Relu", {conv})[0];
  g.set_outputs({relu});
  return g;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(building)

BOOST_AUTO_TEST_CASE(nodes_get_types_ids_and_names) {
  Graph g = make_conv_relu();
  BOOST_TEST(g.values().size() == 5u);
  BOOST_TEST(g.nodes().size() == 2u);
  const Value& conv = g.value(3);
  BOOST_TEST(conv.name == "conv1");
  BOOST_TEST(conv.producer == 0);
  BOOST_TEST(type_str(conv.type) == "f32[1, 8, 8, 8]");
  // An unnamed node is called "<op>_<n>" and its single output takes the node's name.
  BOOST_TEST(g.node(1).name == "Relu_1");
  BOOST_TEST(g.value(4).name == "Relu_1");
  BOOST_TEST(g.value(1).constant.has_value());
  BOOST_TEST(g.value(0).producer == kNoNode);
  g.verify();
}

BOOST_AUTO_TEST_CASE(generated_names_skip_taken_ones) {
  Graph g;
  const ValueId x = g.add_input("Relu_1", {DType::f32, {4}});
  const ValueId a = g.add_node("Relu", {x})[0];
  const ValueId b = g.add_node("Relu", {a})[0];
  BOOST_TEST(g.node(0).name == "Relu_0");
  BOOST_TEST(g.node(1).name == "Relu_2");
  g.set_outputs({b});
  g.verify();
}

BOOST_AUTO_TEST_CASE(renames_keep_the_name_index_current) {
  Graph g;
  const ValueId x = g.add_input("Relu_1", {DType::f32, {4}});
  const ValueId a = g.add_node("Relu", {x})[0];  // indexes the names: "Relu_1" is taken
  BOOST_TEST(g.node(0).name == "Relu_0");
  BOOST_TEST(g.name_taken("Relu_1"));
  g.rename_value(x, "x");
  BOOST_TEST(!g.name_taken("Relu_1"));
  BOOST_TEST(g.name_taken("x"));
  const ValueId b = g.add_node("Relu", {a})[0];
  BOOST_TEST(g.node(1).name == "Relu_1");  // free again
  Graph copy = g;
  copy.rename_value(b, "y");
  BOOST_TEST(copy.name_taken("y"));
  BOOST_TEST(!g.name_taken("y"));
  BOOST_TEST(copy.name_taken("Relu_1"));  // the node keeps the name its output gave up
  copy.set_outputs({b});
  copy.verify();
}

BOOST_AUTO_TEST_CASE(long_chains_of_unnamed_nodes_get_distinct_names) {
  Graph g;
  ValueId v = g.add_input("x", {DType::f32, {4}});
  for (int i = 0; i < 20000; ++i) v = g.add_node("Relu", {v})[0];
  g.set_outputs({v});
  BOOST_TEST(g.node(19999).name == "Relu_19999");
  g.verify();
}

BOOST_AUTO_TEST_CASE(bad_nodes_are_rejected_when_added) {
  Graph g;
  const ValueId x = g.add_input("x", {DType::f32, {1, 3, 8, 8}});
  const ValueId w = g.add_constant("w", Tensor(DType::f32, {8, 4, 3, 3}));
  expect_error(
      [&] {
        g.add_node("Conv", {x, w}, {}, "c");
      },
      ErrorKind::ShapeMismatch,
      {"node 'c' (Conv): ", "input has 3 channels but weight expects 4 (group 1)", "input f32[1, 3, 8, 8]",
       "weight f32[8, 4, 3, 3]"});
  expect_error([&] { g.add_node("Frobnicate", {x}); }, ErrorKind::Unsupported, {"unknown op 'Frobnicate'"});
  expect_error([&] { g.add_node("Relu", {7}); }, ErrorKind::InvalidArgument, {"value 7", "not in the graph"});
  expect_error([&] { g.add_node("Relu", {x, x}); }, ErrorKind::InvalidArgument, {"expects 1 inputs, got 2"});
  expect_error([&] { g.add_node("Conv", {x, -1}); }, ErrorKind::InvalidArgument, {"input 1 is required"});
  expect_error(
      [&] {
        g.add_node("Relu", {x}, attrs_of({{"alpha", 1.0}}));
      },
      ErrorKind::InvalidArgument, {"unknown attribute 'alpha'"});
  // Nothing was added by the failed calls.
  BOOST_TEST(g.nodes().empty());
}

BOOST_AUTO_TEST_CASE(value_and_node_lookups_check_ids) {
  Graph g = make_conv_relu();
  expect_error([&] { g.value(99); }, ErrorKind::InvalidArgument, {"no value with id 99"});
  expect_error([&] { g.node(-1); }, ErrorKind::InvalidArgument, {"no node with id -1"});
  expect_error([&] { g.set_outputs({42}); }, ErrorKind::InvalidArgument, {"value 42"});
}

BOOST_AUTO_TEST_CASE(use_counts_count_node_inputs_and_graph_outputs) {
  Graph g;
  const ValueId x = g.add_input("x", {DType::f32, {2, 2}});
  const ValueId y = g.add_node("Mul", {x, x})[0];
  const ValueId z = g.add_node("Add", {y, x})[0];
  g.set_outputs({z, y});
  const std::vector<int> counts = g.use_counts();
  BOOST_TEST(counts.size() == 3u);
  BOOST_TEST(counts[x] == 3);
  BOOST_TEST(counts[y] == 2);
  BOOST_TEST(counts[z] == 1);
}

BOOST_AUTO_TEST_CASE(registry_lists_every_op) {
  const std::vector<std::string> ops = registered_ops();
  for (const char* op : {"Conv",
                         "Gemm",
                         "MatMul",
                         "Add",
                         "Sub",
                         "Mul",
                         "Div",
                         "Relu",
                         "Sigmoid",
                         "Tanh",
                         "Gelu",
                         "Clip",
                         "Softmax",
                         "LayerNormalization",
                         "BatchNormalization",
                         "MaxPool",
                         "AveragePool",
                         "GlobalAveragePool",
                         "Reshape",
                         "Flatten",
                         "Transpose",
                         "Concat",
                         "Identity"}) {
    BOOST_TEST((std::find(ops.begin(), ops.end(), op) != ops.end()), op);
    BOOST_TEST(!get_op(op).summary.empty(), op);
  }
  BOOST_TEST(find_op("NoSuchOp") == nullptr);
  expect_error([] { get_op("NoSuchOp"); }, ErrorKind::Unsupported, {"unknown op 'NoSuchOp'"});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(verify)

BOOST_AUTO_TEST_CASE(accepts_a_good_graph) { BOOST_CHECK_NO_THROW(make_conv_relu().verify()); }

BOOST_AUTO_TEST_CASE(catches_duplicate_value_names) {
  Graph g;
  const ValueId a = g.add_input("x", {DType::f32, {2}});
  g.add_input("x", {DType::f32, {2}});
  g.set_outputs({a});
  expect_error([&] { g.verify(); }, ErrorKind::InvalidArgument, {"two values are named 'x'"});
}

BOOST_AUTO_TEST_CASE(catches_a_graph_without_outputs) {
  Graph g;
  g.add_input("x", {DType::f32, {2}});
  expect_error([&] { g.verify(); }, ErrorKind::InvalidArgument, {"no outputs"});
}

BOOST_AUTO_TEST_CASE(catches_a_stale_output_type) {
  Graph g = make_conv_relu();
  g.value(3).type.shape = {1, 8, 4, 4};
  expect_error([&] { g.verify(); }, ErrorKind::ShapeMismatch,
               {"node 'conv1' (Conv)", "typed f32[1, 8, 4, 4]", "inference gives f32[1, 8, 8, 8]"});
}

BOOST_AUTO_TEST_CASE(catches_a_constant_whose_type_disagrees_with_its_tensor) {
  Graph g = make_conv_relu();
  g.value(2).constant = Tensor(DType::f32, {9});
  expect_error([&] { g.verify(); }, ErrorKind::ShapeMismatch, {"constant 'b'", "f32[8]", "f32[9]"});
}

BOOST_AUTO_TEST_CASE(catches_inputs_that_no_longer_fit) {
  Graph g = make_conv_relu();
  // The weight now expects 4 input channels: shape inference fails on re-run.
  g.value(1).constant = Tensor(DType::f32, {8, 4, 3, 3});
  g.value(1).type = {DType::f32, {8, 4, 3, 3}};
  expect_error([&] { g.verify(); }, ErrorKind::ShapeMismatch, {"node 'conv1' (Conv)", "3 channels"});
}

BOOST_AUTO_TEST_CASE(catches_a_value_with_a_wrong_producer) {
  Graph g = make_conv_relu();
  g.value(4).producer = 0;
  expect_error([&] { g.verify(); }, ErrorKind::InvalidArgument, {"names another producer"});
}

BOOST_AUTO_TEST_CASE(catches_a_graph_input_that_is_also_a_constant) {
  Graph g = make_conv_relu();
  g.value(0).constant = Tensor(DType::f32, {1, 3, 8, 8});
  expect_error([&] { g.verify(); }, ErrorKind::InvalidArgument, {"graph input 'x'"});
}

BOOST_AUTO_TEST_CASE(catches_a_value_without_a_definition) {
  Graph g = make_conv_relu();
  // Detach the bias from being a constant: nothing defines it any more.
  g.value(2).constant.reset();
  expect_error([&] { g.verify(); }, ErrorKind::InvalidArgument, {"'b' is used before it is defined"});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(printer)

BOOST_AUTO_TEST_CASE(prints_inputs_constants_nodes_and_outputs) {
  Graph g = make_conv_relu();
  const std::string text = g.to_string();
  BOOST_TEST_MESSAGE(text);
  for (const char* line :
       {"%0 = input : f32[1, 3, 8, 8]  # x\n", "%1 = constant : f32[8, 3, 3, 3]  # w\n",
        "%2 = constant : f32[8]  # b\n", "%3 = Conv(%0, %1, %2) {pads=[1, 1, 1, 1]} : f32[1, 8, 8, 8]  # conv1\n",
        "%4 = Relu(%3) : f32[1, 8, 8, 8]  # Relu_1\n", "return %4\n"})
    BOOST_TEST(text.find(line) != std::string::npos, "missing: " << line);
  // Constants show their shape, never their values.
  BOOST_TEST(text.find("0, 0, 0") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(prints_every_attribute_kind_and_omitted_inputs) {
  Graph g;
  const ValueId a = g.add_input("a", {DType::f32, {2, 3}});
  const ValueId b = g.add_input("b", {DType::f32, {3, 4}});
  Attributes attrs = attrs_of({{"alpha", 0.5}, {"transA", std::int64_t{0}}, {"activation", std::string("Relu")}});
  g.add_node("Gemm", {a, b, -1}, attrs, "fc");
  const ValueId y = g.add_node("Clip", {g.nodes()[0].outputs[0]}, attrs_of({{"min", 0.0}, {"max", 6.0}}), "clip")[0];
  g.set_outputs({y});
  const std::string text = g.to_string();
  BOOST_TEST(text.find("%2 = Gemm(%0, %1, _) {activation=\"Relu\", alpha=0.5, transA=0} : f32[2, 4]  # fc") !=
                 std::string::npos,
             text);
  BOOST_TEST(text.find("Clip(%2) {max=6, min=0}") != std::string::npos, text);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(attributes)

BOOST_AUTO_TEST_CASE(getters_return_values_or_fallbacks) {
  Attributes attrs = attrs_of({{"group", std::int64_t{2}},
                               {"alpha", 0.25},
                               {"mode", std::string("tanh")},
                               {"pads", std::vector<std::int64_t>{1, 2, 3, 4}}});
  BOOST_TEST(attrs.get_int("group", 1) == 2);
  BOOST_TEST(attrs.get_int("missing", 7) == 7);
  BOOST_TEST(attrs.get_float("alpha", 1.0) == 0.25);
  BOOST_TEST(attrs.get_float("group", 1.0) == 2.0);  // an int reads as a float
  BOOST_TEST(attrs.get_string("mode", "") == "tanh");
  BOOST_TEST(attrs.get_ints("pads", {}) == std::vector<std::int64_t>({1, 2, 3, 4}));
  BOOST_TEST(attrs.get_ints("strides", {1, 1}) == std::vector<std::int64_t>({1, 1}));
  BOOST_TEST(attrs.has("mode"));
  BOOST_TEST(!attrs.has("missing"));
}

BOOST_AUTO_TEST_CASE(getters_reject_another_type) {
  Attributes attrs = attrs_of({{"mode", std::string("tanh")}, {"alpha", 0.5}, {"pads", std::vector<std::int64_t>{1}}});
  expect_error([&] { attrs.get_int("mode", 0); }, ErrorKind::InvalidArgument,
               {"attribute 'mode' is string, expected int"});
  expect_error([&] { attrs.get_int("alpha", 0); }, ErrorKind::InvalidArgument,
               {"attribute 'alpha' is float, expected int"});
  expect_error([&] { attrs.get_float("mode", 0); }, ErrorKind::InvalidArgument,
               {"attribute 'mode' is string, expected float"});
  expect_error([&] { attrs.get_string("pads", ""); }, ErrorKind::InvalidArgument,
               {"attribute 'pads' is ints, expected string"});
  expect_error([&] { attrs.get_ints("alpha", {}); }, ErrorKind::InvalidArgument,
               {"attribute 'alpha' is float, expected ints"});
}

BOOST_AUTO_TEST_CASE(node_attribute_type_errors_name_the_node) {
  Graph g;
  const ValueId x = g.add_input("x", {DType::f32, {1, 1, 4, 4}});
  expect_error(
      [&] {
        g.add_node("MaxPool", {x}, attrs_of({{"kernel_shape", std::string("2x2")}}), "pool");
      },
      ErrorKind::InvalidArgument, {"node 'pool' (MaxPool)", "attribute 'kernel_shape' is string"});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(bounded_messages)

BOOST_AUTO_TEST_CASE(shape_and_attribute_printers_list_at_most_32_entries) {
  const std::vector<std::int64_t> long_list(2'000'000, 7);
  const std::string shape = shape_str(long_list);
  BOOST_TEST(shape.size() < 200u, shape);
  BOOST_TEST(shape.find(", ... (1999968 more)]") != std::string::npos, shape);
  BOOST_TEST(shape_str({1, 3, 224, 224}) == "[1, 3, 224, 224]");
  BOOST_TEST(type_str(dynamic_type(DType::f32, Shape(100, kDynamicDim))).find("... (68 more)") != std::string::npos);

  Graph g;
  const ValueId x = g.add_input("x", {DType::f32, {1, 1, 8}});
  g.set_outputs(g.add_node("Resize", {x},
                           attrs_of({{"scales", std::vector<double>{1.0, 1.0, 2.0}},
                                     {"sizes", std::vector<std::int64_t>{1, 1, 16}}}),
                           "resize"));
  BOOST_TEST(g.to_string().find("scales=[1, 1, 2]") != std::string::npos, g.to_string());
}

// The 17 MB message of the hostile-input probe: an attribute of two million
// values in an error. The printer bounds the list, so the whole message is short.
BOOST_AUTO_TEST_CASE(an_error_about_a_two_million_entry_attribute_stays_short) {
  Graph g;
  const ValueId x = g.add_input("x", {DType::f32, {1, 1, 8, 8}});
  try {
    g.add_node("MaxPool", {x},
               attrs_of({{"kernel_shape", std::vector<std::int64_t>(2'000'000, 2)}}), "pool");
    BOOST_FAIL("expected an error");
  } catch (const Error& e) {
    const std::string message = e.what();
    BOOST_TEST(message.size() < 400u, message);
    BOOST_TEST(message.find("node 'pool' (MaxPool)") != std::string::npos, message);
    BOOST_TEST(message.find("got 2000000") != std::string::npos, message);
    BOOST_TEST(message.find("(1999968 more)") != std::string::npos, message);
  }
}

BOOST_AUTO_TEST_CASE(error_cuts_a_message_past_its_limit_and_says_how_much) {
  const Error huge(ErrorKind::Corrupt, "model.onnx: " + std::string(17'000'000, 'x'));
  const std::string message = huge.what();
  BOOST_TEST(message.size() <= kMaxErrorMessageBytes + 100);
  BOOST_TEST(message.rfind("model.onnx: xxx", 0) == 0);
  BOOST_TEST(message.find("[message cut: 16995916 of 17000012 bytes left out]") != std::string::npos,
             message.substr(kMaxErrorMessageBytes));
  BOOST_TEST(huge.kind() == ErrorKind::Corrupt);

  // A context prefix added by a re-throw keeps the first cut's note.
  const Error rethrown(huge.kind(), "node 'n' (Relu): " + message);
  BOOST_TEST(std::string(rethrown.what()) == "node 'n' (Relu): " + message);

  // A cut never splits a UTF-8 sequence: 'é' is two bytes, straddling the limit.
  std::string accented(kMaxErrorMessageBytes - 1, 'a');
  for (int i = 0; i < 1000; ++i) accented += "\xc3\xa9";
  const std::string cut = Error(ErrorKind::Internal, accented).what();
  BOOST_TEST(cut.substr(0, kMaxErrorMessageBytes - 1) == std::string(kMaxErrorMessageBytes - 1, 'a'));
  BOOST_TEST(cut.substr(kMaxErrorMessageBytes - 1, 5) == " ... ");

  // Messages within the limit are untouched.
  BOOST_TEST(std::string(Error(ErrorKind::Io, "short").what()) == "short");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(run_reference_inputs)

BOOST_AUTO_TEST_CASE(runs_a_small_graph) {
  Graph g;
  const ValueId x = g.add_input("x", {DType::f32, {2, 2}});
  const ValueId c = g.add_constant("c", Tensor::from_f32({2}, {1.0f, -10.0f}));
  const ValueId y = g.add_node("Relu", {g.add_node("Add", {x, c})[0]})[0];
  g.set_outputs({y, x});
  const Tensor input = Tensor::from_f32({2, 2}, {1, 2, 3, 4});
  const std::vector<Tensor> out = run_reference(g, std::vector<Tensor>{input});
  BOOST_REQUIRE(out.size() == 2u);
  const std::vector<float> expected{2, 0, 4, 0};
  BOOST_TEST(std::vector<float>(out[0].values<float>().begin(), out[0].values<float>().end()) == expected,
             boost::test_tools::per_element());
  // A graph input returned as an output is a copy, not the caller's tensor.
  BOOST_TEST(max_abs_diff(out[1], input) == 0.0f);
  BOOST_TEST(out[1].bytes().data() != input.bytes().data());
}

BOOST_AUTO_TEST_CASE(checks_count_dtype_and_shape) {
  Graph g;
  const ValueId x = g.add_input("image", {DType::f32, {1, 3}});
  g.set_outputs({g.add_node("Relu", {x})[0]});
  expect_error([&] { run_reference(g, std::vector<Tensor>{}); }, ErrorKind::InvalidArgument, {"takes 1 inputs, got 0"});
  expect_error(
      [&] {
        run_reference(g, std::vector<Tensor>{Tensor(DType::f32, {1, 4})});
      },
      ErrorKind::ShapeMismatch, {"input 'image'", "f32[1, 3]", "f32[1, 4]"});
  expect_error(
      [&] {
        run_reference(g, std::vector<Tensor>{Tensor(DType::i64, {1, 3})});
      },
      ErrorKind::ShapeMismatch, {"input 'image'", "i64[1, 3]"});
}

BOOST_AUTO_TEST_CASE(direct_reference_calls_validate_their_tensors) {
  Node node;
  node.op = "Add";
  node.name = "add";
  node.inputs = {0, 1};
  const std::vector<Tensor> args{Tensor(DType::f32, {2, 3}), Tensor(DType::f32, {4})};
  expect_error([&] { get_op("Add").reference(node, args); }, ErrorKind::ShapeMismatch,
               {"node 'add' (Add)", "cannot broadcast shapes [2, 3] and [4]"});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(a_wrapped_tensor_uses_the_callers_bytes_and_checks_their_size_and_alignment) {
  auto owner = std::make_shared<std::vector<float>>(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7});
  // Elements 2..5 of the owner's buffer, as a [2, 2] tensor; the tensor keeps the owner alive.
  std::shared_ptr<std::byte> at(owner, reinterpret_cast<std::byte*>(owner->data() + 2));
  kiln::Tensor t = kiln::Tensor::wrap(kiln::DType::f32, {2, 2}, at, 4 * sizeof(float));
  const std::weak_ptr<std::vector<float>> watch = owner;
  owner.reset();
  BOOST_TEST(!watch.expired());
  BOOST_TEST(t.values<float>()[0] == 2.0f);
  BOOST_TEST(t.values<float>()[3] == 5.0f);
  t.values<float>()[1] = 30.0f;  // no copy: the owner sees the write
  BOOST_TEST((*watch.lock())[3] == 30.0f);
  BOOST_TEST(t.clone().values<float>()[1] == 30.0f);

  expect_error([&] { kiln::Tensor::wrap(kiln::DType::f32, {2, 2}, at, 3 * sizeof(float)); },
               ErrorKind::InvalidArgument, {"12 bytes", "needs 16"});
  std::shared_ptr<std::byte> odd(at, at.get() + 1);
  expect_error([&] { kiln::Tensor::wrap(kiln::DType::f32, {1}, odd, sizeof(float)); }, ErrorKind::InvalidArgument,
               {"aligned to 4 bytes"});
  expect_error([&] { kiln::Tensor::wrap(kiln::DType::f32, {1}, nullptr, sizeof(float)); },
               ErrorKind::InvalidArgument, {"no data"});
  BOOST_TEST(kiln::Tensor::wrap(kiln::DType::f32, {0, 3}, nullptr, 0).numel() == 0);
}

// kiln::save_npy / load_npy: every dtype, a scalar and a zero-size array
// round-trip through a file; bad files are errors naming them.
BOOST_AUTO_TEST_CASE(npy_files_round_trip_and_bad_ones_are_named) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kiln_npy_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<kiln::Tensor> tensors = {kiln::Tensor::from_f32({2, 3}, {1, -2, 3.5f, 0, 5, 6}),
                                       kiln::Tensor::from_i64({4}, {1, -1, 1LL << 40, 7}),
                                       kiln::Tensor(kiln::DType::i32, {}), kiln::Tensor(kiln::DType::f32, {1, 2, 0, 32}),
                                       kiln::Tensor(kiln::DType::boolean, {3}), kiln::Tensor(kiln::DType::f16, {2, 2}),
                                       kiln::Tensor(kiln::DType::u8, {5})};
  tensors[2].values<std::int32_t>()[0] = 16000;
  tensors[4].bytes()[1] = std::byte{1};
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::string path = (dir / ("t" + std::to_string(i) + ".npy")).string();
    kiln::save_npy(path, tensors[i]);
    const kiln::Tensor back = kiln::load_npy(path);
    BOOST_TEST((back.dtype() == tensors[i].dtype()));
    BOOST_TEST(back.shape() == tensors[i].shape(), boost::test_tools::per_element());
    BOOST_TEST(std::memcmp(back.bytes().data(), tensors[i].bytes().data(), back.nbytes()) == 0);
  }
  // Nothing but the files: the temporary ones were renamed.
  BOOST_TEST(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == static_cast<long>(tensors.size()));
  auto error_of = [](const auto& fn) -> std::string {
    try {
      fn();
    } catch (const kiln::Error& e) {
      return e.what();
    }
    return "no error";
  };
  std::string truncated = kiln::format_npy(tensors[0]);
  truncated.resize(truncated.size() - 4);
  BOOST_TEST(error_of([&] { kiln::parse_npy(truncated, "x.npy"); }).find("x.npy") == 0u);
  BOOST_TEST(error_of([&] { kiln::parse_npy("not numpy", "y.npy"); }).find("not a .npy file") != std::string::npos);
  BOOST_TEST(error_of([&] { kiln::load_npy((dir / "missing.npy").string()); }).find("missing.npy") != std::string::npos);
  // Found by fuzz_npy: an empty shape whose other extents multiply past
  // int64 is an empty tensor, not an overflow.
  {
    const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (60961682, 22, 2, 22048, 9, 228, 916, 0), }";
    std::string text = header + std::string(118 - header.size(), ' ') + "\n";
    const kiln::Tensor empty = kiln::parse_npy(std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(text.size()) + '\0' + text, "e.npy");
    BOOST_TEST(empty.numel() == 0);
    BOOST_TEST(empty.shape().size() == 8u);
  }
  // Bytes of the header in a message are escaped: a dtype or a key holding
  // ESC [ 2 J (a terminal's "clear the screen") cannot act on the terminal.
  const auto npy_with_header = [](const std::string& header) {
    std::string text = header + std::string(118 - header.size(), ' ') + "\n";
    return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(text.size()) + '\0' + text;
  };
  const std::string bad_dtype =
      error_of([&] { kiln::parse_npy(npy_with_header("{'descr': '\x1b[2J', 'fortran_order': False, 'shape': (1,), }"), "z.npy"); });
  BOOST_TEST(bad_dtype.find(".npy dtype '\\x1b[2J' is not supported") != std::string::npos, bad_dtype);
  const std::string bad_key =
      error_of([&] { kiln::parse_npy(npy_with_header("{'\x1b[2J': 1}"), "k.npy"); });
  BOOST_TEST(bad_key.find("unknown key '\\x1b[2J'") != std::string::npos, bad_key);
  BOOST_TEST(bad_dtype.find('\x1b') == std::string::npos);
  BOOST_TEST(bad_key.find('\x1b') == std::string::npos);
  fs::remove_all(dir);
}

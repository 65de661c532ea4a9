#define BOOST_TEST_MODULE onnx_import
#include <boost/test/unit_test.hpp>

// ONNX import: models are built here with ONNX's own protobuf classes,
// serialized, imported and checked against the reference implementation;
// hostile files must give the right error kind, naming the file and node.

#include <kiln/onnx.h>

#include "graph/ir.h"
#include "graph/op_registry.h"
#include "graph/passes/passes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#if KILN_HAVE_ONNX
#include "graph/onnx/options.h"
#include "src/runtime/internal_access.h"

#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cstdlib>

namespace {

using kiln::DType;
using kiln::ErrorKind;
using kiln::Tensor;
using kiln::graph::Graph;

// A small ONNX model under construction.
class OnnxModel {
 public:
  explicit OnnxModel(int opset = 13) {
    model_.set_ir_version(8);
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }

  onnx::ModelProto& proto() { return model_; }
  onnx::GraphProto& graph() { return *model_.mutable_graph(); }

  // dims < 0 become the symbolic dim "batch".
  void input(const std::string& name, std::vector<std::int64_t> dims, int elem = onnx::TensorProto_DataType_FLOAT) {
    auto* v = graph().add_input();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    auto* shape = t->mutable_shape();
    for (auto d : dims) {
      if (d < 0) shape->add_dim()->set_dim_param("batch");
      else shape->add_dim()->set_dim_value(d);
    }
  }
  void output(const std::string& name) { graph().add_output()->set_name(name); }

  onnx::TensorProto* initializer(const std::string& name, const Tensor& t) {
    auto* p = graph().add_initializer();
    fill_tensor(*p, name, t);
    return p;
  }
  static void fill_tensor(onnx::TensorProto& p, const std::string& name, const Tensor& t) {
    p.set_name(name);
    p.set_data_type(t.dtype() == DType::f32    ? onnx::TensorProto_DataType_FLOAT
                    : t.dtype() == DType::f16  ? onnx::TensorProto_DataType_FLOAT16
                    : t.dtype() == DType::bf16 ? onnx::TensorProto_DataType_BFLOAT16
                                               : onnx::TensorProto_DataType_INT64);
    for (auto d : t.shape()) p.add_dims(d);
    p.set_raw_data(std::string(reinterpret_cast<const char*>(t.bytes().data()), t.nbytes()));
  }
  void ints(const std::string& name, std::vector<std::int64_t> values) {
    const auto n = static_cast<std::int64_t>(values.size());
    initializer(name, Tensor::from_i64({n}, std::move(values)));
  }
  void scalar(const std::string& name, float value) { initializer(name, Tensor::scalar_f32(value)); }

  onnx::NodeProto* node(const std::string& op, std::vector<std::string> inputs, std::vector<std::string> outputs,
                        const std::string& name = "") {
    auto* n = graph().add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? outputs.at(0) + "_node" : name);
    for (auto& i : inputs) n->add_input(i);
    for (auto& o : outputs) n->add_output(o);
    return n;
  }

  std::string bytes() const { return model_.SerializeAsString(); }
  kiln::Model load(const kiln::OnnxOptions& options = {}) const { return kiln::load_onnx_bytes(bytes(), "test.onnx", "", options); }

 private:
  onnx::ModelProto model_;
};

void attr(onnx::NodeProto* n, const std::string& name, std::int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto_AttributeType_INT);
  a->set_i(v);
}
void attr(onnx::NodeProto* n, const std::string& name, std::vector<std::int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto_AttributeType_INTS);
  for (auto x : v) a->add_ints(x);
}
void attr(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto_AttributeType_STRING);
  a->set_s(v);
}

Tensor random_f32(kiln::Shape shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(static_cast<std::size_t>(kiln::num_elements(shape)));
  for (float& v : values) v = dist(rng);
  return Tensor::from_f32(std::move(shape), std::move(values));
}

std::vector<std::string> ops_of(const Graph& g) {
  std::vector<std::string> ops;
  for (const auto& n : g.nodes()) ops.push_back(n.op);
  return ops;
}
bool has_op(const Graph& g, const std::string& op) {
  const auto ops = ops_of(g);
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}
const kiln::graph::Node& only_node(const Graph& g, const std::string& op) {
  for (const auto& n : g.nodes())
    if (n.op == op) return n;
  BOOST_FAIL("no " + op + " node in\n" + g.to_string());
  return g.nodes().front();
}

std::vector<Tensor> run(const kiln::Model& m, std::vector<Tensor> inputs) {
  return kiln::graph::run_reference(kiln::internal::graph(m), inputs);
}

// The error thrown by `fn`, which must throw kiln::Error.
template <class Fn> kiln::Error error_of(Fn&& fn) {
  try {
    fn();
  } catch (const kiln::Error& e) {
    BOOST_TEST_MESSAGE("error: " << e.what());
    return e;
  }
  BOOST_FAIL("expected a kiln::Error");
  return kiln::Error(ErrorKind::Internal, "unreachable");
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

// ---- conversion rules --------------------------------------------------------------

BOOST_AUTO_TEST_CASE(conv_same_upper_becomes_explicit_pads_and_matches_reference) {
  OnnxModel m;
  m.input("x", {1, 2, 5, 5});
  m.initializer("w", random_f32({3, 2, 3, 3}, 1));
  m.initializer("b", random_f32({3}, 2));
  auto* conv = m.node("Conv", {"x", "w", "b"}, {"y"}, "conv");
  attr(conv, "auto_pad", std::string("SAME_UPPER"));
  attr(conv, "strides", std::vector<std::int64_t>{2, 2});
  m.output("y");
  const kiln::Model model = m.load();
  const auto& node = only_node(kiln::internal::graph(model), "Conv");
  BOOST_TEST(!node.attrs.has("auto_pad"));
  // in 5, stride 2 -> out 3; total padding (3-1)*2+3-5 = 2, split 1/1.
  BOOST_TEST(node.attrs.get_ints("pads", {}) == (std::vector<std::int64_t>{1, 1, 1, 1}), boost::test_tools::per_element());
  BOOST_TEST(model.outputs().at(0).shape == (kiln::Shape{1, 3, 3, 3}), boost::test_tools::per_element());
  BOOST_TEST(model.outputs().at(0).name == "y");

  // Same numbers as a graph built with explicit pads.
  Graph g;
  auto x = g.add_input("x", {DType::f32, {1, 2, 5, 5}});
  auto w = g.add_constant("w", random_f32({3, 2, 3, 3}, 1));
  auto b = g.add_constant("b", random_f32({3}, 2));
  kiln::graph::Attributes a;
  a.set("pads", std::vector<std::int64_t>{1, 1, 1, 1});
  a.set("strides", std::vector<std::int64_t>{2, 2});
  g.set_outputs(g.add_node("Conv", {x, w, b}, a, "conv"));
  const Tensor input = random_f32({1, 2, 5, 5}, 3);
  const Tensor expected = kiln::graph::run_reference(g, std::vector<Tensor>{input}).at(0);
  BOOST_TEST(kiln::max_abs_diff(run(model, {input}).at(0), expected) == 0.0f);
}

BOOST_AUTO_TEST_CASE(torch_shape_chain_folds_away) {
  // x.reshape(x.shape[0], -1) as torch.onnx.export writes it.
  OnnxModel m;
  m.input("x", {2, 3, 4});
  m.node("Shape", {"x"}, {"shape"});
  m.initializer("zero", Tensor::from_i64({}, {0}));
  m.node("Gather", {"shape", "zero"}, {"batch"});
  m.ints("axes0", {0});
  m.node("Unsqueeze", {"batch", "axes0"}, {"batch1"});
  m.ints("minus1", {-1});
  auto* cat = m.node("Concat", {"batch1", "minus1"}, {"target"});
  attr(cat, "axis", std::int64_t{0});
  m.node("Reshape", {"x", "target"}, {"y"});
  m.output("y");
  const kiln::Model model = m.load();
  BOOST_TEST(ops_of(kiln::internal::graph(model)) == (std::vector<std::string>{"Reshape"}), boost::test_tools::per_element());
  const auto& reshape = only_node(kiln::internal::graph(model), "Reshape");
  BOOST_TEST(reshape.attrs.get_ints("shape", {}) == (std::vector<std::int64_t>{2, -1}), boost::test_tools::per_element());
  BOOST_TEST(model.outputs().at(0).shape == (kiln::Shape{2, 12}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(constants_identity_and_dropout_disappear) {
  OnnxModel m;
  m.input("x", {2, 3});
  auto* c = m.node("Constant", {}, {"c"});
  auto* a = c->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto_AttributeType_TENSOR);
  OnnxModel::fill_tensor(*a->mutable_t(), "c", Tensor::from_f32({3}, {1, 2, 3}));
  m.ints("shape", {2, 3});
  auto* cos = m.node("ConstantOfShape", {"shape"}, {"twos"});
  auto* v = cos->add_attribute();
  v->set_name("value");
  v->set_type(onnx::AttributeProto_AttributeType_TENSOR);
  OnnxModel::fill_tensor(*v->mutable_t(), "v", Tensor::from_f32({1}, {2}));
  m.node("Add", {"c", "twos"}, {"bias"});  // folds: both constants
  m.node("Identity", {"x"}, {"xi"});
  m.node("Dropout", {"xi"}, {"xd"});
  m.node("Mul", {"xd", "bias"}, {"y"});
  m.output("y");
  const kiln::Model model = m.load();
  BOOST_TEST(ops_of(kiln::internal::graph(model)) == (std::vector<std::string>{"Mul"}), boost::test_tools::per_element());
  const auto y = run(model, {Tensor::from_f32({2, 3}, {1, 1, 1, 2, 2, 2})}).at(0);
  BOOST_TEST(std::vector<float>(y.values<float>().begin(), y.values<float>().end()) ==
                 (std::vector<float>{3, 4, 5, 6, 8, 10}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_long_chain_of_mostly_unnamed_nodes_imports_whole) {
  // Import is linear in the node count; this suite's timeout is the bound.
  constexpr int kNodes = 30000;
  OnnxModel m;
  m.input("x", {2, 3});
  m.scalar("one", 1.0f);
  std::string previous = "x";
  for (int i = 0; i < kNodes; ++i) {
    const std::string out = "v" + std::to_string(i);
    auto* n = i % 2 ? m.node("Relu", {previous}, {out}) : m.node("Add", {previous, "one"}, {out});
    if (i % 3 != 0) n->set_name("");
    previous = out;
  }
  m.output(previous);
  const kiln::Model model = m.load();
  BOOST_TEST(kiln::internal::graph(model).nodes().size() == static_cast<std::size_t>(kNodes));
  const auto y = run(model, {Tensor::from_f32({2, 3}, {-1, 0, 1, 2, 0, -1})}).at(0);
  const float added = kNodes / 2;
  BOOST_TEST(std::vector<float>(y.values<float>().begin(), y.values<float>().end()) ==
                 (std::vector<float>{added - 1, added, added + 1, added + 2, added, added - 1}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(clip_inputs_become_attributes) {
  OnnxModel m;
  m.input("x", {4});
  m.scalar("lo", 0.0f);
  m.scalar("hi", 6.0f);
  m.node("Clip", {"x", "lo", "hi"}, {"y"});
  m.output("y");
  const kiln::Model model = m.load();
  const auto& clip = only_node(kiln::internal::graph(model), "Clip");
  BOOST_TEST(clip.inputs.size() == 1u);
  BOOST_TEST(clip.attrs.get_float("min", -1) == 0.0);
  BOOST_TEST(clip.attrs.get_float("max", -1) == 6.0);
  const auto y = run(model, {Tensor::from_f32({4}, {-1, 3, 7, 6})}).at(0);
  BOOST_TEST(std::vector<float>(y.values<float>().begin(), y.values<float>().end()) == (std::vector<float>{0, 3, 6, 6}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(softmax_opset_11_uses_flatten_semantics) {
  OnnxModel m(11);
  m.input("x", {2, 2, 3});
  auto* s = m.node("Softmax", {"x"}, {"y"});
  attr(s, "axis", std::int64_t{1});
  m.output("y");
  const kiln::Model model = m.load();
  const Tensor x = random_f32({2, 2, 3}, 4);
  const auto y = run(model, {x}).at(0);
  BOOST_TEST(y.shape() == (kiln::Shape{2, 2, 3}), boost::test_tools::per_element());
  // Each batch row's 6 values (axes 1 and 2 together) sum to 1.
  for (int b = 0; b < 2; ++b) {
    double sum = 0, expected0 = 0;
    for (int i = 0; i < 6; ++i) sum += std::exp(static_cast<double>(x.values<float>()[b * 6 + i]));
    expected0 = std::exp(static_cast<double>(x.values<float>()[b * 6])) / sum;
    BOOST_TEST(std::fabs(static_cast<double>(y.values<float>()[b * 6]) - expected0) < 1e-6);
  }
  // axis == rank-1 maps to one Softmax.
  OnnxModel last(12);
  last.input("x", {2, 3});
  auto* s2 = last.node("Softmax", {"x"}, {"y"});
  attr(s2, "axis", std::int64_t{1});
  last.output("y");
  BOOST_TEST(ops_of(kiln::internal::graph(last.load())) == (std::vector<std::string>{"Softmax"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(split_sizes_from_input_and_num_outputs) {
  OnnxModel m(13);
  m.input("x", {2, 5});
  m.ints("sizes", {2, 3});
  auto* s = m.node("Split", {"x", "sizes"}, {"a", "b"});
  attr(s, "axis", std::int64_t{1});
  m.output("a");
  m.output("b");
  const kiln::Model model = m.load();
  BOOST_TEST(only_node(kiln::internal::graph(model), "Split").attrs.get_ints("split", {}) == (std::vector<std::int64_t>{2, 3}),
             boost::test_tools::per_element());
  BOOST_TEST(model.outputs().at(1).shape == (kiln::Shape{2, 3}), boost::test_tools::per_element());

  OnnxModel m18(18);
  m18.input("x", {7});
  auto* s18 = m18.node("Split", {"x"}, {"a", "b", "c"});
  attr(s18, "num_outputs", std::int64_t{3});
  m18.output("a");
  m18.output("b");
  m18.output("c");
  BOOST_TEST(only_node(kiln::internal::graph(m18.load()), "Split").attrs.get_ints("split", {}) == (std::vector<std::int64_t>{3, 3, 1}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(squeeze_slice_reduce_and_pad_inputs_become_attributes) {
  OnnxModel m(18);
  m.input("x", {1, 4, 6});
  m.ints("axes0", {0});
  m.node("Squeeze", {"x", "axes0"}, {"s"});
  m.ints("starts", {1});
  m.ints("ends", {INT64_MAX});
  m.ints("axes1", {-1});
  m.node("Slice", {"s", "starts", "ends", "axes1"}, {"sl"});
  m.ints("raxes", {1});
  m.node("ReduceMean", {"sl", "raxes"}, {"r"});
  m.ints("pads", {1, 0, 2, 0});
  m.node("Pad", {"r", "pads"}, {"y"});
  m.output("y");
  const kiln::Model model = m.load();
  const Graph& g = kiln::internal::graph(model);
  BOOST_TEST(only_node(g, "Squeeze").attrs.get_ints("axes", {}) == (std::vector<std::int64_t>{0}), boost::test_tools::per_element());
  BOOST_TEST(only_node(g, "Slice").attrs.get_ints("starts", {}) == (std::vector<std::int64_t>{1}), boost::test_tools::per_element());
  BOOST_TEST(only_node(g, "ReduceMean").attrs.get_ints("axes", {}) == (std::vector<std::int64_t>{1}), boost::test_tools::per_element());
  BOOST_TEST(only_node(g, "Pad").attrs.get_ints("pads", {}) == (std::vector<std::int64_t>{1, 0, 2, 0}), boost::test_tools::per_element());
  for (const auto& n : g.nodes()) BOOST_TEST(n.inputs.size() == 1u, n.op << " keeps only its data input");
  // [1, 4, 6] -> squeeze [4, 6] -> slice [4, 5] -> mean (keepdims) [4, 1] -> pad [7, 1]
  BOOST_TEST(model.outputs().at(0).shape == (kiln::Shape{7, 1}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(resize_scales_become_sizes_with_the_floor_rule) {
  OnnxModel m(13);
  m.input("x", {1, 1, 3, 5});
  auto* scales = m.initializer("scales", Tensor::from_f32({4}, {1, 1, 2, 1.5f}));
  (void)scales;
  auto* r = m.node("Resize", {"x", "", "scales"}, {"y"});
  attr(r, "mode", std::string("nearest"));
  m.output("y");
  const kiln::Model model = m.load();
  const auto& resize = only_node(kiln::internal::graph(model), "Resize");
  BOOST_TEST(resize.inputs.size() == 1u);
  BOOST_TEST(resize.attrs.get_ints("sizes", {}) == (std::vector<std::int64_t>{1, 1, 6, 7}), boost::test_tools::per_element());
  BOOST_TEST(model.outputs().at(0).shape == (kiln::Shape{1, 1, 6, 7}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(gather_with_constant_indices_takes_the_constant_form) {
  OnnxModel m;
  m.input("x", {3, 4});
  m.initializer("idx", Tensor::from_i64({2}, {2, 0}));
  m.node("Gather", {"x", "idx"}, {"y"});
  m.output("y");
  const kiln::Model model = m.load();
  const auto& gather = only_node(kiln::internal::graph(model), "Gather");
  BOOST_TEST(gather.inputs.size() == 1u);
  BOOST_TEST(gather.attrs.get_ints("indices", {}) == (std::vector<std::int64_t>{2, 0}), boost::test_tools::per_element());
  const Tensor x = random_f32({3, 4}, 5);
  const auto y = run(model, {x}).at(0);
  BOOST_TEST(y.values<float>()[0] == x.values<float>()[8]);
  BOOST_TEST(y.values<float>()[4] == x.values<float>()[0]);
}

BOOST_AUTO_TEST_CASE(typed_fields_initializer_inputs_and_symbolic_dims) {
  OnnxModel m;
  m.input("x", {-1, 3});
  auto* w = m.graph().add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto_DataType_FLOAT);
  w->add_dims(3);
  for (float f : {1.0f, 2.0f, 3.0f}) w->add_float_data(f);
  m.input("w", {3});  // an initializer also listed as an input is a constant
  m.node("Mul", {"x", "w"}, {"y"});
  m.output("y");
  const kiln::Model model = m.load({.input_shapes = {}, .default_dim = 4});
  BOOST_TEST(model.inputs().size() == 1u);
  BOOST_TEST(model.inputs().at(0).shape == (kiln::Shape{4, 3}), boost::test_tools::per_element());
  const kiln::Model two = m.load({.input_shapes = {{"x", {2, 3}}}, .default_dim = 1});
  BOOST_TEST(two.inputs().at(0).shape == (kiln::Shape{2, 3}), boost::test_tools::per_element());
  const auto y = run(two, {Tensor::from_f32({2, 3}, {1, 1, 1, 2, 2, 2})}).at(0);
  BOOST_TEST(y.values<float>()[5] == 6.0f);
}

// A model as onnxconverter-common's convert_float_to_float16(keep_io_types)
// writes one: f32 input and output, Casts at the edges, f16 weights and
// compute, and an op kept in f32 (its op_block_list) between two Casts. It
// imports as itself (the weights stay f16) and runs on the device, every
// node in kernels, as the reference computes it.
BOOST_AUTO_TEST_CASE(an_f16_model_with_an_f32_island_runs_as_itself) {
  for (const DType half : {DType::f16, DType::bf16}) {
    const std::int64_t code = half == DType::f16 ? 10 : 16;
    OnnxModel m;
    m.input("x", {2, 3, 8, 8});
    m.initializer("w", random_f32({4, 3, 3, 3}, 1).to(half));
    m.initializer("b", random_f32({4}, 2).to(half));
    m.initializer("fc", random_f32({256, 5}, 3).to(half));
    m.ints("flat", {2, 256});
    attr(m.node("Cast", {"x"}, {"x16"}), "to", code);
    attr(m.node("Conv", {"x16", "w", "b"}, {"conv"}), "pads", std::vector<std::int64_t>{1, 1, 1, 1});
    m.node("Relu", {"conv"}, {"relu"});
    attr(m.node("Cast", {"relu"}, {"relu32"}), "to", std::int64_t{1});
    attr(m.node("Softmax", {"relu32"}, {"soft"}), "axis", std::int64_t{1});  // the f32 island
    attr(m.node("Cast", {"soft"}, {"soft16"}), "to", code);
    m.node("Reshape", {"soft16", "flat"}, {"rows"});
    m.node("MatMul", {"rows", "fc"}, {"logits16"});
    attr(m.node("Cast", {"logits16"}, {"logits"}), "to", std::int64_t{1});
    m.output("logits");
    const kiln::Model model = m.load();
    for (const auto& v : kiln::internal::graph(model).values())
      if (v.name == "w" || v.name == "fc") BOOST_TEST((v.type.dtype == half), v.name);
    BOOST_TEST((model.outputs().at(0).dtype == DType::f32));
    const Tensor x = random_f32({2, 3, 8, 8}, 4);
    const Tensor want = kiln::graph::run_reference(kiln::internal::graph(model), std::vector<Tensor>{x}).at(0);
    auto eager = kiln::eager(model);
    auto compiled = kiln::compile(model, {.fullgraph = true});
    const float epsilon = half == DType::f16 ? 0x1p-10f : 0x1p-7f;
    float scale = 1.0f;
    for (float v : want.values<float>()) scale = std::max(scale, std::fabs(v));
    BOOST_TEST(kiln::max_abs_diff(eager({x}).at(0), want) <= 2 * epsilon * scale);
    BOOST_TEST(kiln::max_abs_diff(compiled({x}).at(0), want) <= 4 * epsilon * scale);
    BOOST_TEST(eager.stats().host_steps_per_run == 0);
    BOOST_TEST(compiled.stats().host_steps_per_run == 0);
  }
}

BOOST_AUTO_TEST_CASE(external_data_is_read_from_the_models_folder) {
  const auto dir = std::filesystem::temp_directory_path() / ("kiln_onnx_ext_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const Tensor weights = random_f32({2, 3}, 6);
  {
    std::ofstream out(dir / "weights.bin", std::ios::binary);
    const std::string pad(16, '\0');
    out.write(pad.data(), 16);
    out.write(reinterpret_cast<const char*>(weights.bytes().data()), static_cast<std::streamsize>(weights.nbytes()));
  }
  auto make = [&](const std::string& location) {
    OnnxModel m;
    m.input("x", {2, 3});
    auto* w = m.graph().add_initializer();
    w->set_name("w");
    w->set_data_type(onnx::TensorProto_DataType_FLOAT);
    w->add_dims(2);
    w->add_dims(3);
    w->set_data_location(onnx::TensorProto_DataLocation_EXTERNAL);
    auto entry = [&](const std::string& k, const std::string& v) {
      auto* e = w->add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    entry("location", location);
    entry("offset", "16");
    entry("length", std::to_string(weights.nbytes()));
    m.node("Add", {"x", "w"}, {"y"});
    m.output("y");
    return m;
  };
  const std::string path = (dir / "model.onnx").string();
  {
    std::ofstream out(path, std::ios::binary);
    out << make("weights.bin").bytes();
  }
  const kiln::Model model = kiln::load_onnx(path);
  const auto y = run(model, {Tensor(DType::f32, {2, 3})}).at(0);
  BOOST_TEST(kiln::max_abs_diff(y, weights) == 0.0f);

  const auto escape = error_of([&] { kiln::load_onnx_bytes(make("../weights.bin").bytes(), "evil.onnx", dir.string()); });
  BOOST_TEST(escape.kind() == ErrorKind::Corrupt);
  BOOST_TEST(contains(escape.what(), "evil.onnx"));
  BOOST_TEST(contains(escape.what(), "leaves the model's folder"));
  const auto absolute = error_of([&] { kiln::load_onnx_bytes(make("/etc/passwd").bytes(), "evil.onnx", dir.string()); });
  BOOST_TEST(absolute.kind() == ErrorKind::Corrupt);
  const auto in_memory = error_of([&] { kiln::load_onnx_bytes(make("weights.bin").bytes(), "mem.onnx", ""); });
  BOOST_TEST(in_memory.kind() == ErrorKind::Unsupported);
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(onnx_tensor_files_load) {
  const auto path = std::filesystem::temp_directory_path() / ("kiln_tensor_" + std::to_string(::getpid()) + ".pb");
  onnx::TensorProto p;
  OnnxModel::fill_tensor(p, "t", Tensor::from_i64({2}, {7, -3}));
  {
    std::ofstream out(path, std::ios::binary);
    out << p.SerializeAsString();
  }
  const Tensor t = kiln::load_onnx_tensor(path.string());
  BOOST_TEST((t.dtype() == DType::i64));
  BOOST_TEST(t.values<std::int64_t>()[1] == -3);
  std::filesystem::remove(path);
  BOOST_TEST(!kiln::onnx_supported_ops().empty());
}

// ---- decomposed patterns, as torch.onnx.export (opset 13) writes them -------------

BOOST_AUTO_TEST_CASE(torch_layer_norm_is_recognised) {
  for (bool scale_first : {false, true}) {
    OnnxModel m;
    m.input("x", {2, 3, 8});
    auto* mean = m.node("ReduceMean", {"x"}, {"mean"});
    attr(mean, "axes", std::vector<std::int64_t>{-1});
    m.node("Sub", {"x", "mean"}, {"d"});
    m.scalar("two", 2.0f);
    m.node("Pow", {"d", "two"}, {"p"});
    auto* var = m.node("ReduceMean", {"p"}, {"var"});
    attr(var, "axes", std::vector<std::int64_t>{-1});
    m.scalar("eps", 1e-5f);
    m.node("Add", scale_first ? std::vector<std::string>{"eps", "var"} : std::vector<std::string>{"var", "eps"}, {"ve"});
    m.node("Sqrt", {"ve"}, {"s"});
    m.node("Div", {"d", "s"}, {"n"});
    m.initializer("gamma", random_f32({8}, 7));
    m.initializer("beta", random_f32({8}, 8));
    m.node("Mul", scale_first ? std::vector<std::string>{"gamma", "n"} : std::vector<std::string>{"n", "gamma"}, {"ns"});
    m.node("Add", {"ns", "beta"}, {"y"});
    m.output("y");
    const kiln::Model model = m.load();
    const auto compiled = kiln::graph::passes::run_compile_passes(kiln::internal::graph(model));
    BOOST_TEST(ops_of(compiled.graph) == (std::vector<std::string>{"LayerNormalization"}), boost::test_tools::per_element());
    const Tensor x = random_f32({2, 3, 8}, 9);
    const auto before = kiln::graph::run_reference(kiln::internal::graph(model), std::vector<Tensor>{x}).at(0);
    const auto after = kiln::graph::run_reference(compiled.graph, std::vector<Tensor>{x}).at(0);
    BOOST_TEST(kiln::max_abs_diff(before, after) < 1e-5f);
    BOOST_TEST(compiled.graph.value(compiled.graph.outputs()[0]).name == "y");
    // The model in 16 bits (its constants rounded) is recognised too, and the
    // one op computes its statistics in f32 where the pattern rounded each step.
    for (const DType half : {DType::f16, DType::bf16}) {
      const kiln::graph::Graph narrow = kiln::graph::passes::convert_float_type(
          kiln::internal::graph(model), {.to = half, .keep_io_types = false}).graph;
      const auto narrow_compiled = kiln::graph::passes::run_compile_passes(narrow);
      BOOST_TEST(ops_of(narrow_compiled.graph) == (std::vector<std::string>{"LayerNormalization"}),
                 boost::test_tools::per_element());
      const Tensor x16 = x.to(half);
      const auto want = kiln::graph::run_reference(narrow, std::vector<Tensor>{x16}).at(0).to(DType::f32);
      const auto got = kiln::graph::run_reference(narrow_compiled.graph, std::vector<Tensor>{x16}).at(0).to(DType::f32);
      float scale = 1.0f;
      for (float v : want.values<float>()) scale = std::max(scale, std::fabs(v));
      // Rounding each of the pattern's steps costs a few epsilons at the output's scale.
      BOOST_TEST(kiln::max_abs_diff(want, got) <= 4 * (half == DType::f16 ? 0x1p-10f : 0x1p-7f) * scale);
    }
  }
}

BOOST_AUTO_TEST_CASE(layer_norm_with_a_shared_intermediate_is_left_alone) {
  OnnxModel m;
  m.input("x", {2, 8});
  auto* mean = m.node("ReduceMean", {"x"}, {"mean"});
  attr(mean, "axes", std::vector<std::int64_t>{-1});
  m.node("Sub", {"x", "mean"}, {"d"});
  m.scalar("two", 2.0f);
  m.node("Pow", {"d", "two"}, {"p"});
  auto* var = m.node("ReduceMean", {"p"}, {"var"});
  attr(var, "axes", std::vector<std::int64_t>{-1});
  m.scalar("eps", 1e-5f);
  m.node("Add", {"var", "eps"}, {"ve"});
  m.node("Sqrt", {"ve"}, {"s"});
  m.node("Div", {"d", "s"}, {"y"});
  m.output("y");
  m.output("var");  // the variance is also an output: the pattern must stay
  const auto compiled = kiln::graph::passes::run_compile_passes(kiln::internal::graph(m.load()));
  BOOST_TEST(!has_op(compiled.graph, "LayerNormalization"));
}

BOOST_AUTO_TEST_CASE(torch_gelu_is_recognised) {
  for (int variant = 0; variant < 2; ++variant) {
    OnnxModel m;
    m.input("x", {2, 5});
    m.scalar("sqrt2", 1.4142135f);
    m.node("Div", {"x", "sqrt2"}, {"a"});
    m.node("Erf", {"a"}, {"e"});
    m.scalar("one", 1.0f);
    m.node("Add", variant ? std::vector<std::string>{"one", "e"} : std::vector<std::string>{"e", "one"}, {"c"});
    m.scalar("half", 0.5f);
    if (variant == 0) {
      m.node("Mul", {"x", "c"}, {"xc"});
      m.node("Mul", {"xc", "half"}, {"y"});
    } else {
      m.node("Mul", {"half", "x"}, {"hx"});
      m.node("Mul", {"c", "hx"}, {"y"});
    }
    m.output("y");
    const kiln::Model model = m.load();
    const auto compiled = kiln::graph::passes::run_compile_passes(kiln::internal::graph(model));
    BOOST_TEST(ops_of(compiled.graph) == (std::vector<std::string>{"Gelu"}), boost::test_tools::per_element());
    const Tensor x = random_f32({2, 5}, 10);
    const auto before = kiln::graph::run_reference(kiln::internal::graph(model), std::vector<Tensor>{x}).at(0);
    const auto after = kiln::graph::run_reference(compiled.graph, std::vector<Tensor>{x}).at(0);
    BOOST_TEST(kiln::max_abs_diff(before, after) < 1e-6f);
    // In 16 bits, 1/sqrt(2) and sqrt(2) are rounded constants: still GELU.
    for (const DType half : {DType::f16, DType::bf16}) {
      const kiln::graph::Graph narrow = kiln::graph::passes::convert_float_type(
          kiln::internal::graph(model), {.to = half, .keep_io_types = false}).graph;
      BOOST_TEST(ops_of(kiln::graph::passes::run_compile_passes(narrow).graph) == (std::vector<std::string>{"Gelu"}),
                 boost::test_tools::per_element());
    }
  }
}

// ---- malformed and hostile files -------------------------------------------------------

OnnxModel relu_model() {
  OnnxModel m;
  m.input("x", {2, 2});
  m.node("Relu", {"x"}, {"y"}, "the_relu");
  m.output("y");
  return m;
}

BOOST_AUTO_TEST_CASE(random_bytes_and_truncated_files_are_corrupt) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    std::string bytes(static_cast<std::size_t>(1 + trial * 37), '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    const auto e = error_of([&] { kiln::load_onnx_bytes(bytes, "noise.onnx"); });
    BOOST_TEST((e.kind() == ErrorKind::Corrupt || e.kind() == ErrorKind::Unsupported));
    BOOST_TEST(contains(e.what(), "noise.onnx"));
  }
  OnnxModel m = relu_model();
  m.initializer("w", random_f32({64}, 12));
  const std::string full = m.bytes();
  for (std::size_t cut : {full.size() / 2, full.size() - 3, std::size_t{5}}) {
    const auto e = error_of([&] { kiln::load_onnx_bytes(full.substr(0, cut), "cut.onnx"); });
    BOOST_TEST(e.kind() == ErrorKind::Corrupt);
    BOOST_TEST(contains(e.what(), "cut.onnx"));
  }
  const auto missing = error_of([] { kiln::load_onnx("/no/such/model.onnx"); });
  BOOST_TEST(missing.kind() == ErrorKind::Io);
}

BOOST_AUTO_TEST_CASE(a_missing_initializer_names_the_node) {
  OnnxModel m;
  m.input("x", {2, 2});
  m.node("Add", {"x", "w"}, {"y"}, "add_w");
  m.output("y");
  const auto e = error_of([&] { m.load(); });
  BOOST_TEST(e.kind() == ErrorKind::Corrupt);
  BOOST_TEST(contains(e.what(), "test.onnx"));
  BOOST_TEST(contains(e.what(), "add_w"));
  BOOST_TEST(contains(e.what(), "'w'"));
}

BOOST_AUTO_TEST_CASE(kiln_internal_conv_attributes_in_a_file_are_corrupt) {
  // weight_layout / activation are set by kiln's compile passes; from a file
  // they would make kiln misread the weights or apply an activation twice.
  for (const char* internal : {"weight_layout", "activation"}) {
    OnnxModel m;
    m.input("x", {1, 2, 5, 5});
    m.initializer("w", random_f32({4, 2, 3, 3}, 1));
    auto* conv = m.node("Conv", {"x", "w"}, {"y"}, "conv");
    attr(conv, internal, std::string(std::string(internal) == "activation" ? "Relu" : "OIhw4o"));
    m.output("y");
    const auto e = error_of([&] { m.load(); });
    BOOST_TEST(e.kind() == ErrorKind::Corrupt);
    BOOST_TEST(contains(e.what(), "'conv'"));
    BOOST_TEST(contains(e.what(), internal));
  }
}

BOOST_AUTO_TEST_CASE(kiln_internal_matmul_weight_layout_in_a_file_is_corrupt) {
  // A file claiming B is packed (NK16n) with the packed shape would be read
  // in the wrong order: a silent wrong answer.
  OnnxModel m;
  m.input("x", {2, 8});
  m.initializer("w", random_f32({1, 8, 16}, 2));
  attr(m.node("MatMul", {"x", "w"}, {"y"}, "packed_mm"), "weight_layout", std::string("NK16n"));
  m.output("y");
  const auto e = error_of([&] { m.load(); });
  BOOST_TEST(e.kind() == ErrorKind::Corrupt);
  BOOST_TEST(contains(e.what(), "'packed_mm'"), e.what());
  BOOST_TEST(contains(e.what(), "attribute 'weight_layout' is not an ONNX MatMul attribute"), e.what());
}

BOOST_AUTO_TEST_CASE(raw_data_of_the_wrong_size_is_corrupt) {
  OnnxModel m = relu_model();
  auto* w = m.initializer("w", random_f32({4}, 13));
  w->set_raw_data(w->raw_data().substr(0, 12));
  const auto e = error_of([&] { m.load(); });
  BOOST_TEST(e.kind() == ErrorKind::Corrupt);
  BOOST_TEST(contains(e.what(), "'w'"));
  BOOST_TEST(contains(e.what(), "12 bytes"));
}

BOOST_AUTO_TEST_CASE(absurd_and_negative_dims_are_rejected_without_allocating) {
  {
    OnnxModel m = relu_model();
    auto* w = m.graph().add_initializer();
    w->set_name("huge");
    w->set_data_type(onnx::TensorProto_DataType_FLOAT);
    w->add_dims(std::int64_t{1} << 40);
    const auto e = error_of([&] { m.load(); });
    BOOST_TEST(e.kind() == ErrorKind::Corrupt);
    BOOST_TEST(contains(e.what(), "huge"));
  }
  {
    OnnxModel m = relu_model();
    auto* w = m.graph().add_initializer();
    w->set_name("big_but_empty");  // within limits, but no data behind it
    w->set_data_type(onnx::TensorProto_DataType_INT64);
    w->add_dims(std::int64_t{1} << 31);
    const auto e = error_of([&] { m.load(); });
    BOOST_TEST(e.kind() == ErrorKind::Corrupt);
  }
  {
    OnnxModel m = relu_model();  // an initializer's dims are never symbolic
    auto* w = m.graph().add_initializer();
    w->set_name("negative");
    w->set_data_type(onnx::TensorProto_DataType_FLOAT);
    w->add_dims(-5);
    const auto e = error_of([&] { m.load(); });
    BOOST_TEST(e.kind() == ErrorKind::Corrupt);
    BOOST_TEST(contains(e.what(), "negative"));
  }
  {
    OnnxModel m;  // ConstantOfShape asked for 2^40 elements
    m.input("x", {2});
    m.ints("shape", {std::int64_t{1} << 20, std::int64_t{1} << 20});
    m.node("ConstantOfShape", {"shape"}, {"big"}, "make_big");
    m.node("Add", {"x", "big"}, {"y"});
    m.output("y");
    const auto e = error_of([&] { m.load(); });
    BOOST_TEST(e.kind() == ErrorKind::Corrupt);
    BOOST_TEST(contains(e.what(), "make_big"));
  }
}

BOOST_AUTO_TEST_CASE(an_unknown_opset_is_unsupported_and_named) {
  for (int opset : {0, 19}) {
    OnnxModel m(opset);
    m.input("x", {2});
    m.node("Relu", {"x"}, {"y"});
    m.output("y");
    const auto e = error_of([&] { m.load(); });
    BOOST_TEST(e.kind() == ErrorKind::Unsupported);
    BOOST_TEST(contains(e.what(), "opset " + std::to_string(opset) + " of the default domain"), e.what());
  }
}

// An opset older than 11 is read when each op kept its definition since
// (Relu since 6, Elu since 6, Add since 7); otherwise the ops that changed
// are named, each once.
BOOST_AUTO_TEST_CASE(an_old_opset_is_read_when_its_ops_are_unchanged_since) {
  OnnxModel m(7);
  m.input("x", {2, 3});
  m.node("Elu", {"x"}, {"a"});
  m.node("Relu", {"a"}, {"b"});
  m.node("Add", {"b", "x"}, {"y"});
  m.output("y");
  const kiln::Model model = m.load();
  BOOST_TEST(ops_of(kiln::internal::graph(model)) == (std::vector<std::string>{"Elu", "Relu", "Add"}),
             boost::test_tools::per_element());

  OnnxModel old(6);  // Add's numpy broadcasting begins at opset 7
  old.input("x", {2, 3});
  old.node("Relu", {"x"}, {"a"});
  old.node("Add", {"a", "x"}, {"b"});
  old.node("Clip", {"b"}, {"c"});
  old.node("Clip", {"c"}, {"y"});
  old.output("y");
  const auto e = error_of([&] { old.load(); });
  BOOST_TEST(e.kind() == ErrorKind::Unsupported);
  BOOST_TEST(contains(e.what(), "opset 6 of the default domain is not supported for Add, Clip ("), e.what());
}

BOOST_AUTO_TEST_CASE(unsupported_ops_are_listed_at_once_with_node_names) {
  OnnxModel m;
  m.input("x", {2});
  m.node("Relu", {"x"}, {"a"});
  m.node("FancyOp", {"a"}, {"b"}, "fancy1");
  m.node("OtherOp", {"b"}, {"c"}, "other");
  m.node("FancyOp", {"c"}, {"y"}, "fancy2");
  m.graph().mutable_node(3)->set_domain("");
  m.output("y");
  const auto e = error_of([&] { m.load(); });
  BOOST_TEST(e.kind() == ErrorKind::Unsupported);
  for (const char* part : {"FancyOp", "OtherOp", "'fancy1'", "'fancy2'", "'other'", "test.onnx"})
    BOOST_TEST(contains(e.what(), part), "message names " << part);
}

BOOST_AUTO_TEST_CASE(a_non_constant_shape_input_is_unsupported) {
  OnnxModel m;
  m.input("x", {2, 3});
  m.input("s", {2}, onnx::TensorProto_DataType_INT64);
  m.node("Reshape", {"x", "s"}, {"y"}, "dyn_reshape");
  m.output("y");
  const auto e = error_of([&] { m.load(); });
  BOOST_TEST(e.kind() == ErrorKind::Unsupported);
  BOOST_TEST(contains(e.what(), "dyn_reshape"));
  BOOST_TEST(contains(e.what(), "shape input must be a constant"));
}

// ---- sizes from the file: checked arithmetic, the fold budget, bounded messages ------

BOOST_AUTO_TEST_CASE(external_data_counts_past_int64_or_malformed_are_corrupt) {
  const auto dir = std::filesystem::temp_directory_path() / ("kiln_onnx_counts_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "w.bin", std::ios::binary) << std::string(16, '\0');
  auto load_with = [&](const std::string& key, const std::string& value) {
    OnnxModel m = relu_model();
    auto* w = m.graph().add_initializer();
    w->set_name("w");
    w->set_data_type(onnx::TensorProto_DataType_FLOAT);
    w->add_dims(4);
    w->set_data_location(onnx::TensorProto_DataLocation_EXTERNAL);
    for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
             {"location", "w.bin"}, {"offset", key == "offset" ? value : "0"}, {"length", key == "length" ? value : "16"}}) {
      auto* e = w->add_external_data();
      e->set_key(k);
      e->set_value(v);
    }
    return error_of([&] { kiln::load_onnx_bytes(m.bytes(), "counts.onnx", dir.string()); });
  };
  for (const char* key : {"offset", "length"}) {
    // 19 digits past INT64_MAX (std::stoll threw std::out_of_range here), and far more.
    for (const std::string huge : {"9999999999999999999", "123456789012345678901234567890"}) {
      const auto e = load_with(key, huge);
      BOOST_TEST(e.kind() == ErrorKind::Corrupt);
      BOOST_TEST(contains(e.what(), "initializer 'w'"), e.what());
      BOOST_TEST(contains(e.what(), std::string("external data '") + key + "'"), e.what());
      BOOST_TEST(contains(e.what(), "larger than 9223372036854775807"), e.what());
    }
    for (const std::string bad : {"-1", "+5", "12abc", " 7", ""}) {
      const auto e = load_with(key, bad);
      BOOST_TEST(e.kind() == ErrorKind::Corrupt);
      BOOST_TEST(contains(e.what(), "is not a non-negative integer"), e.what());
    }
  }
  const auto past_end = load_with("offset", "9223372036854775807");  // in range, past the file's end
  BOOST_TEST(past_end.kind() == ErrorKind::Corrupt);
  BOOST_TEST(contains(past_end.what(), "past the end"), past_end.what());
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(reshape_targets_whose_product_overflows_name_the_node) {
  OnnxModel m;
  m.input("x", {2, 3});
  m.ints("shape", {std::int64_t{1} << 40, std::int64_t{1} << 40, std::int64_t{1} << 40});
  m.node("Reshape", {"x", "shape"}, {"y"}, "huge_reshape");
  m.output("y");
  const auto e = error_of([&] { m.load(); });
  BOOST_TEST(e.kind() == ErrorKind::InvalidArgument);
  BOOST_TEST(contains(e.what(), "test.onnx"), e.what());
  BOOST_TEST(contains(e.what(), "huge_reshape"), e.what());
  BOOST_TEST(contains(e.what(), "overflows int64"), e.what());
}

BOOST_AUTO_TEST_CASE(resize_scales_and_sizes_out_of_range_are_corrupt) {
  auto resize_with_scales = [](std::vector<float> scales) {
    OnnxModel m(13);
    m.input("x", {1, 1, 3, 5});
    m.initializer("scales", Tensor::from_f32({4}, std::move(scales)));
    m.node("Resize", {"x", "", "scales"}, {"y"}, "big_resize");
    m.output("y");
    return error_of([&] { m.load(); });
  };
  // 3 x 1e30 is no int64: converting it was undefined behaviour.
  const auto huge = resize_with_scales({1, 1, 1e30f, 1});
  BOOST_TEST(huge.kind() == ErrorKind::Corrupt);
  BOOST_TEST(contains(huge.what(), "big_resize"), huge.what());
  BOOST_TEST(contains(huge.what(), "scale 1e+30 makes axis 2 (extent 3) 3e+30 long"), huge.what());
  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), -2.0f}) {
    const auto e = resize_with_scales({1, 1, bad, 1});
    BOOST_TEST(e.kind() == ErrorKind::Corrupt);
    BOOST_TEST(contains(e.what(), "scales must be positive and finite"), e.what());
  }
  // keep_aspect_ratio_policy over an empty axis: the scale would be infinite.
  OnnxModel m(18);
  m.input("x", {1, 1, 4, 0});
  m.ints("sizes", {8, 8});
  auto* r = m.node("Resize", {"x", "", "", "sizes"}, {"y"}, "aspect_resize");
  attr(r, "axes", std::vector<std::int64_t>{2, 3});
  attr(r, "keep_aspect_ratio_policy", std::string("not_smaller"));
  m.output("y");
  const auto e = error_of([&] { m.load(); });
  BOOST_TEST(e.kind() == ErrorKind::Corrupt);
  BOOST_TEST(contains(e.what(), "aspect_resize"), e.what());
  BOOST_TEST(contains(e.what(), "axis 3 of extent 0"), e.what());
}

BOOST_AUTO_TEST_CASE(split_counts_and_auto_pad_windows_from_the_file_are_checked) {
  OnnxModel split(18);
  split.input("x", {4});
  auto* s = split.node("Split", {"x"}, {"a", "b"}, "many_parts");
  attr(s, "num_outputs", std::numeric_limits<std::int64_t>::max());
  split.output("a");
  const auto parts = error_of([&] { split.load(); });
  BOOST_TEST(parts.kind() == ErrorKind::Corrupt);
  BOOST_TEST(contains(parts.what(), "cannot split 4 into 9223372036854775807 parts"), parts.what());

  OnnxModel conv;
  conv.input("x", {1, 1, 8, 8});
  conv.initializer("w", random_f32({1, 1, 3, 3}, 3));
  auto* c = conv.node("Conv", {"x", "w"}, {"y"}, "same_conv");
  attr(c, "auto_pad", std::string("SAME_UPPER"));
  attr(c, "strides", std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::max(), 1});
  attr(c, "dilations", std::vector<std::int64_t>{std::int64_t{1} << 62, 1});
  conv.output("y");
  const auto window = error_of([&] { conv.load(); });
  BOOST_TEST(window.kind() == ErrorKind::Corrupt);
  BOOST_TEST(contains(window.what(), "same_conv"), window.what());
  BOOST_TEST(contains(window.what(), "needs more padding than kiln's limit"), window.what());
}

BOOST_AUTO_TEST_CASE(constant_of_shape_and_range_keep_int64_values_exact) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  OnnxModel m;
  m.input("x", {1});
  m.ints("shape", {3});
  auto* c = m.node("ConstantOfShape", {"shape"}, {"filled"}, "fill_max");
  auto* value = c->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto_AttributeType_TENSOR);
  OnnxModel::fill_tensor(*value->mutable_t(), "v", Tensor::from_i64({1}, {kMax}));
  m.initializer("start", Tensor::from_i64({}, {kMax - 2}));
  m.initializer("limit", Tensor::from_i64({}, {kMax}));
  m.initializer("delta", Tensor::from_i64({}, {1}));
  m.node("Range", {"start", "limit", "delta"}, {"range"}, "range_top");
  m.output("filled");
  m.output("range");
  const auto out = run(m.load(), {Tensor(DType::f32, {1})});
  BOOST_TEST(out.at(0).values<std::int64_t>()[2] == kMax);  // through double it was 2^63: undefined
  BOOST_TEST(out.at(1).shape() == (kiln::Shape{2}), boost::test_tools::per_element());
  BOOST_TEST(out.at(1).values<std::int64_t>()[1] == kMax - 1);

  OnnxModel wide;
  wide.input("x", {1});
  wide.initializer("start", Tensor::from_i64({}, {std::numeric_limits<std::int64_t>::min()}));
  wide.initializer("limit", Tensor::from_i64({}, {kMax}));
  wide.initializer("delta", Tensor::from_i64({}, {1}));
  wide.node("Range", {"start", "limit", "delta"}, {"y"}, "range_all");
  wide.output("y");
  const auto e = error_of([&] { wide.load(); });
  BOOST_TEST(e.kind() == ErrorKind::Corrupt);
  BOOST_TEST(contains(e.what(), "range_all"), e.what());
  BOOST_TEST(contains(e.what(), "the distance overflows int64"), e.what());
}

// The hostile-input probe's model: a few hundred bytes whose folds, each under
// the per-fold limit, asked for gigabytes in total.
OnnxModel many_big_folds(int count, std::int64_t elements) {
  OnnxModel m;
  m.input("x", {1});
  m.ints("shape", {elements});
  for (int i = 0; i < count; ++i) m.node("ConstantOfShape", {"shape"}, {"c" + std::to_string(i)}, "fill" + std::to_string(i));
  m.node("Add", {"x", "c0"}, {"y"}, "add");
  m.output("y");
  return m;
}

BOOST_AUTO_TEST_CASE(folding_past_the_budget_is_refused_before_allocating) {
  const OnnxModel probe = many_big_folds(10, std::int64_t{1} << 27);  // 10 x 512 MiB of f32
  BOOST_TEST(probe.bytes().size() < 1000u);  // under a kilobyte
  kiln::OnnxOptions options;
  options.max_folded_bytes = std::int64_t{64} << 20;
  const auto e = error_of([&] { probe.load(options); });
  BOOST_TEST(e.kind() == ErrorKind::InvalidArgument);
  for (const char* part : {"test.onnx: node 'fill0' (ConstantOfShape)", "would add 536870912 bytes",
                           "to the 0 bytes folded so far", "budget of 67108864 bytes",
                           "OnnxOptions::max_folded_bytes", "KILN_MAX_FOLDED_BYTES"})
    BOOST_TEST(contains(e.what(), part), "message names " << part << ": " << e.what());

  // Within the budget, the same structure imports; the third fold of three 4 MiB ones passes 10 MiB.
  options.max_folded_bytes = std::int64_t{16} << 20;
  BOOST_TEST(many_big_folds(3, std::int64_t{1} << 20).load(options).inputs().size() == 1u);
  options.max_folded_bytes = std::int64_t{10} << 20;
  const auto third = error_of([&] { many_big_folds(3, std::int64_t{1} << 20).load(options); });
  BOOST_TEST(contains(third.what(), "node 'fill2'"), third.what());
  BOOST_TEST(contains(third.what(), "4194304 bytes of constants to the 8388608 bytes folded so far"), third.what());
}

BOOST_AUTO_TEST_CASE(every_kind_of_fold_is_charged_to_the_budget) {
  kiln::OnnxOptions options;
  options.max_folded_bytes = std::int64_t{1} << 20;  // 1 MiB
  // The generic fold of an all-constant node: Tile of an initializer, 4 MiB.
  OnnxModel tile;
  tile.input("x", {1});
  tile.initializer("w", random_f32({1024}, 4));
  tile.ints("repeats", {1024});
  tile.node("Tile", {"w", "repeats"}, {"t"}, "tile_weights");
  tile.node("Add", {"x", "t"}, {"y"});
  tile.output("y");
  const auto tiled = error_of([&] { tile.load(options); });
  BOOST_TEST(tiled.kind() == ErrorKind::InvalidArgument);
  BOOST_TEST(contains(tiled.what(), "node 'tile_weights' (Tile)"), tiled.what());
  BOOST_TEST(contains(tiled.what(), "would add 4194304 bytes"), tiled.what());
  // Range, 8 MiB of i64.
  OnnxModel range;
  range.input("x", {1});
  range.initializer("start", Tensor::from_i64({}, {0}));
  range.initializer("limit", Tensor::from_i64({}, {1 << 20}));
  range.initializer("delta", Tensor::from_i64({}, {1}));
  range.node("Range", {"start", "limit", "delta"}, {"y"}, "long_range");
  range.output("y");
  const auto ranged = error_of([&] { range.load(options); });
  BOOST_TEST(contains(ranged.what(), "node 'long_range' (Range)"), ranged.what());
  BOOST_TEST(contains(ranged.what(), "would add 8388608 bytes"), ranged.what());
  // Dropout's all-true mask, 2 MiB of bool.
  OnnxModel dropout;
  dropout.input("x", {2048, 1024});
  dropout.node("Dropout", {"x"}, {"y", "mask"}, "drop");
  dropout.output("y");
  dropout.output("mask");
  const auto masked = error_of([&] { dropout.load(options); });
  BOOST_TEST(contains(masked.what(), "node 'drop' (Dropout)"), masked.what());
  BOOST_TEST(contains(masked.what(), "would add 2097152 bytes"), masked.what());
}

BOOST_AUTO_TEST_CASE(the_fold_budget_comes_from_the_option_then_the_environment) {
  const OnnxModel model = many_big_folds(1, std::int64_t{1} << 20);  // one 4 MiB fold
  BOOST_TEST_REQUIRE(::setenv("KILN_MAX_FOLDED_BYTES", "1048576", 1) == 0);
  const auto from_env = error_of([&] { model.load(); });
  BOOST_TEST(from_env.kind() == ErrorKind::InvalidArgument);
  BOOST_TEST(contains(from_env.what(), "budget of 1048576 bytes"), from_env.what());
  kiln::OnnxOptions options;
  options.max_folded_bytes = std::int64_t{8} << 20;  // an explicit option wins
  BOOST_TEST(model.load(options).inputs().size() == 1u);
  for (const char* bad : {"lots", "-5", "0", "99999999999999999999", "12 MiB"}) {
    BOOST_TEST_REQUIRE(::setenv("KILN_MAX_FOLDED_BYTES", bad, 1) == 0);
    const auto e = error_of([&] { model.load(); });
    BOOST_TEST(e.kind() == ErrorKind::InvalidArgument);
    BOOST_TEST(contains(e.what(), "KILN_MAX_FOLDED_BYTES is '" + std::string(bad) + "'"), e.what());
  }
  BOOST_TEST_REQUIRE(::unsetenv("KILN_MAX_FOLDED_BYTES") == 0);
  const std::int64_t fallback = kiln::onnx_import::resolve_max_folded_bytes({});
  BOOST_TEST(fallback == kiln::onnx_import::default_max_folded_bytes());
  BOOST_TEST(fallback >= kiln::onnx_import::kMinDefaultFoldedBytes);
  BOOST_TEST(fallback <= kiln::onnx_import::kMaxDefaultFoldedBytes);
  options.max_folded_bytes = -1;
  const auto negative = error_of([&] { model.load(options); });
  BOOST_TEST(negative.kind() == ErrorKind::InvalidArgument);
  BOOST_TEST(contains(negative.what(), "max_folded_bytes is -1"), negative.what());
}

BOOST_AUTO_TEST_CASE(topk_k_past_its_axis_names_the_node_k_and_the_extent) {
  OnnxModel m;
  m.input("x", {4});
  m.ints("k", {5});
  m.node("TopK", {"x", "k"}, {"values", "indices"}, "top5");
  m.output("values");
  const auto e = error_of([&] { m.load(); });
  BOOST_TEST(e.kind() == ErrorKind::InvalidArgument);
  for (const char* part : {"top5", "k = 5", "the 4 elements along axis 0"})
    BOOST_TEST(contains(e.what(), part), "message names " << part << ": " << e.what());

  // kiln's clamp_k (min(k, extent)) is for built-in models only.
  OnnxModel clamp;
  clamp.input("x", {4});
  clamp.ints("k", {2});
  attr(clamp.node("TopK", {"x", "k"}, {"values", "indices"}, "top2"), "clamp_k", std::int64_t{1});
  clamp.output("values");
  const auto internal = error_of([&] { clamp.load(); });
  BOOST_TEST(internal.kind() == ErrorKind::Corrupt);
  BOOST_TEST(contains(internal.what(), "attribute 'clamp_k' is not an ONNX TopK attribute"), internal.what());
}

BOOST_AUTO_TEST_CASE(messages_about_huge_files_stay_short) {
  // A two-million-entry attribute in an error: the list is cut at 32 entries.
  OnnxModel m;
  m.input("x", {1, 1, 8, 8});
  auto* pool = m.node("MaxPool", {"x"}, {"y"}, "pool");
  attr(pool, "kernel_shape", std::vector<std::int64_t>(2'000'000, 2));
  m.output("y");
  const auto e = error_of([&] { m.load(); });
  BOOST_TEST(std::string(e.what()).size() < 1000u);
  BOOST_TEST(contains(e.what(), "(1999968 more)"), e.what());

  // A thousand unsupported nodes: each op lists 32 of them.
  OnnxModel fancy;
  fancy.input("x", {2});
  std::string last = "x";
  for (int i = 0; i < 1000; ++i) {
    const std::string out = "f" + std::to_string(i);
    fancy.node("FancyOp", {last}, {out}, "fancy" + std::to_string(i));
    last = out;
  }
  fancy.output(last);
  const auto unsupported = error_of([&] { fancy.load(); });
  BOOST_TEST(unsupported.kind() == ErrorKind::Unsupported);
  BOOST_TEST(std::string(unsupported.what()).size() < 1000u, unsupported.what());
  BOOST_TEST(contains(unsupported.what(), "'fancy31', ... (968 more)"), unsupported.what());
}

// DepthToSpace is a reshape, transpose and reshape; a shape it cannot split
// is named, with the numbers.
BOOST_AUTO_TEST_CASE(depth_to_space_is_written_as_reshape_transpose_reshape) {
  OnnxModel m;
  m.input("x", {1, 8, 2, 3});
  attr(m.node("DepthToSpace", {"x"}, {"y"}, "d2s"), "blocksize", std::int64_t{2});
  m.output("y");
  const kiln::Model model = m.load();
  BOOST_TEST(ops_of(kiln::internal::graph(model)) == (std::vector<std::string>{"Reshape", "Transpose", "Reshape"}),
             boost::test_tools::per_element());
  BOOST_TEST(model.outputs().at(0).shape == (kiln::Shape{1, 2, 4, 6}), boost::test_tools::per_element());

  OnnxModel bad;
  bad.input("x", {1, 6, 2, 3});
  attr(bad.node("DepthToSpace", {"x"}, {"y"}, "d2s"), "blocksize", std::int64_t{2});
  bad.output("y");
  const auto e = error_of([&] { bad.load(); });
  BOOST_TEST(e.kind() == ErrorKind::ShapeMismatch);
  BOOST_TEST(contains(e.what(), "6 channels do not divide into blocks of 4"), e.what());
}

// EyeLike folds at import; a diagonal that misses the matrix (k near the
// int64 limits, where r + k would overflow) leaves it all zero.
BOOST_AUTO_TEST_CASE(eye_like_folds_and_a_diagonal_past_the_matrix_is_zero) {
  for (const std::int64_t k : {std::int64_t{1}, std::numeric_limits<std::int64_t>::max(),
                               std::numeric_limits<std::int64_t>::min()}) {
    OnnxModel m;
    m.input("x", {2, 3});
    attr(m.node("EyeLike", {"x"}, {"eye"}, "eye"), "k", k);
    m.node("Add", {"x", "eye"}, {"y"});
    m.output("y");
    const Tensor x = Tensor::from_f32({2, 3}, {0, 0, 0, 0, 0, 0});
    const std::vector<float> expected = k == 1 ? std::vector<float>{0, 1, 0, 0, 0, 1} : std::vector<float>(6, 0.0f);
    const Tensor out = run(m.load(), {x}).at(0);
    const auto y = out.values<float>();
    BOOST_TEST(std::vector<float>(y.begin(), y.end()) == expected, boost::test_tools::per_element());
  }
}

// Shape of a value whose extents are known only at run time is read then,
// never folded with -1 for the unknown extent; Size of one is refused.
BOOST_AUTO_TEST_CASE(shape_of_a_data_dependent_value_is_read_at_run_time) {
  OnnxModel m;
  m.input("x", {5});
  m.node("NonZero", {"x"}, {"nz"});
  m.node("Shape", {"nz"}, {"y"});
  m.output("y");
  const Tensor out = run(m.load(), {Tensor::from_f32({5}, {1, 0, 2, 0, 3})}).at(0);
  const auto y = out.values<std::int64_t>();
  BOOST_TEST(std::vector<std::int64_t>(y.begin(), y.end()) == (std::vector<std::int64_t>{1, 3}),
             boost::test_tools::per_element());

  OnnxModel size;
  size.input("x", {5});
  size.node("NonZero", {"x"}, {"nz"});
  size.node("Size", {"nz"}, {"y"});
  size.output("y");
  const auto e = error_of([&] { size.load(); });
  BOOST_TEST(e.kind() == ErrorKind::Unsupported);
  BOOST_TEST(contains(e.what(), "only known at run time"), e.what());
}

// DOUBLE constants (torch.onnx writes Python floats so) are taken where a
// Cast converts them at once, from the doubles themselves; any other use
// of one is refused with its name.
BOOST_AUTO_TEST_CASE(double_constants_are_taken_through_a_cast) {
  auto make = [](const std::string& cast_to_or_use) {
    OnnxModel m;
    m.input("x", {3});
    auto* c = m.node("Constant", {}, {"d"});
    auto* a = c->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto_AttributeType_TENSOR);
    onnx::TensorProto* t = a->mutable_t();
    t->set_data_type(onnx::TensorProto_DataType_DOUBLE);
    t->add_dims(3);
    for (double v : {4.135166556742356, -2.9999999999, 1e300}) t->add_double_data(v);
    if (cast_to_or_use == "Add") {
      m.node("Add", {"x", "d"}, {"y"});
    } else {
      attr(m.node("Cast", {"d"}, {"dd"}), "to", std::int64_t{onnx::TensorProto_DataType_DOUBLE});
      attr(m.node("Cast", {"dd"}, {"c"}), "to", std::int64_t{cast_to_or_use == "f32" ? onnx::TensorProto_DataType_FLOAT
                                                                                      : onnx::TensorProto_DataType_INT64});
      if (cast_to_or_use == "f32") m.node("Mul", {"x", "c"}, {"y"});
      else m.node("Identity", {"c"}, {"y"});
    }
    m.output("y");
    return m;
  };
  const Tensor x = Tensor::from_f32({3}, {1, 2, 0});
  const Tensor scaled = run(make("f32").load(), {x}).at(0);
  BOOST_TEST(scaled.values<float>()[0] == static_cast<float>(4.135166556742356));
  BOOST_TEST(scaled.values<float>()[1] == 2.0f * static_cast<float>(-2.9999999999));
  BOOST_TEST(std::isinf(static_cast<float>(1e300)));  // 1e300 rounds to inf in f32; times 0 is NaN
  BOOST_TEST(std::isnan(scaled.values<float>()[2]));
  // To int64 from the double: -2.9999999999 truncates to -2 (through f32 it
  // would round to -3 first); 1e300 saturates as kiln's Cast does.
  const Tensor ints = run(make("i64").load(), {x}).at(0);
  const auto i = ints.values<std::int64_t>();
  BOOST_TEST(std::vector<std::int64_t>(i.begin(), i.end()) ==
                 (std::vector<std::int64_t>{4, -2, std::numeric_limits<std::int64_t>::max()}),
             boost::test_tools::per_element());
  const auto e = error_of([&] { make("Add").load(); });
  BOOST_TEST(e.kind() == ErrorKind::Unsupported);
  BOOST_TEST(contains(e.what(), "input 'd' is a DOUBLE tensor"), e.what());
}

// Einsum by its definition: every assignment of the letters, the product of
// the operands' elements summed into the output's. `explicit_eq` has no
// ellipsis and names its output.
Tensor naive_einsum(const std::string& explicit_eq, const std::vector<Tensor>& in) {
  const std::size_t arrow = explicit_eq.find("->");
  std::vector<std::string> terms;
  std::string lhs = explicit_eq.substr(0, arrow) + ",";
  for (std::size_t start = 0, comma; (comma = lhs.find(',', start)) != std::string::npos; start = comma + 1)
    terms.push_back(lhs.substr(start, comma - start));
  const std::string out_term = explicit_eq.substr(arrow + 2);
  std::map<char, std::int64_t> extent;
  for (std::size_t k = 0; k < terms.size(); ++k)
    for (std::size_t d = 0; d < terms[k].size(); ++d) extent[terms[k][d]] = in[k].shape()[d];
  kiln::Shape out_shape;
  for (char c : out_term) out_shape.push_back(extent.at(c));
  Tensor out(DType::f32, out_shape);
  std::vector<char> letters;
  for (const auto& [c, e] : extent) letters.push_back(c);
  std::map<char, std::int64_t> at;
  for (char c : letters) at[c] = 0;
  auto offset = [&](const std::string& term, const kiln::Shape& shape) {
    std::int64_t o = 0;
    for (std::size_t d = 0; d < term.size(); ++d) o = o * shape[d] + at[term[d]];
    return static_cast<std::size_t>(o);
  };
  for (bool done = kiln::num_elements(out_shape) == 0; !done;) {
    double product = 1;
    for (std::size_t k = 0; k < terms.size(); ++k) product *= in[k].values<float>()[offset(terms[k], in[k].shape())];
    out.values<float>()[offset(out_term, out_shape)] += static_cast<float>(product);
    done = true;
    for (auto c = letters.rbegin(); c != letters.rend(); ++c) {
      if (++at[*c] < extent[*c]) {
        done = false;
        break;
      }
      at[*c] = 0;
    }
  }
  return out;
}

// Einsum becomes ReduceSum, Transpose, Reshape and MatMul: the contractions
// exporters emit (attention, linear layers, outer products, traces, three
// operands, implicit outputs, ellipses) match the definition; a diagonal is
// refused with the equation.
BOOST_AUTO_TEST_CASE(einsum_is_written_as_matmuls_and_matches_its_definition) {
  struct Case {
    std::string equation;
    std::vector<kiln::Shape> shapes;
    std::string explicit_eq;  // for naive_einsum
  };
  const std::vector<Case> cases = {
      {"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}, "bij,bjk->bik"},
      {"bhqd,bhkd->bhqk", {{1, 2, 3, 4}, {1, 2, 5, 4}}, "bhqd,bhkd->bhqk"},
      {"bnd,dm->bnm", {{2, 3, 4}, {4, 6}}, "bnd,dm->bnm"},
      {"i,i", {{7}, {7}}, "i,i->"},
      {"ij->i", {{3, 4}}, "ij->i"},
      {"ij->ji", {{3, 4}}, "ij->ji"},
      {"ji", {{3, 4}}, "ji->ij"},
      {"i,j->ij", {{3}, {4}}, "i,j->ij"},
      {"ij,jk", {{2, 3}, {3, 4}}, "ij,jk->ik"},
      {"...ij,...jk->...ik", {{2, 2, 3}, {2, 3, 4}}, "aij,ajk->aik"},
      {"ijk,jl,lk->i", {{2, 3, 4}, {3, 5}, {5, 4}}, "ijk,jl,lk->i"},
      {"bij,bjk->k", {{2, 3, 4}, {2, 4, 5}}, "bij,bjk->k"},
      {"ij->", {{3, 4}}, "ij->"},
  };
  unsigned seed = 1;
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.equation) {
      OnnxModel m(12);
      std::vector<std::string> names;
      std::vector<Tensor> inputs;
      for (std::size_t k = 0; k < c.shapes.size(); ++k) {
        names.push_back("x" + std::to_string(k));
        m.input(names.back(), c.shapes[k]);
        inputs.push_back(random_f32(c.shapes[k], seed++));
      }
      auto* n = m.node("Einsum", names, {"y"});
      auto* a = n->add_attribute();
      a->set_name("equation");
      a->set_type(onnx::AttributeProto_AttributeType_STRING);
      a->set_s(c.equation);
      m.output("y");
      const kiln::Model model = m.load();
      BOOST_TEST(!has_op(kiln::internal::graph(model), "Einsum"));
      const Tensor got = run(model, inputs).at(0);
      const Tensor want = naive_einsum(c.explicit_eq, inputs);
      BOOST_TEST_REQUIRE((got.shape() == want.shape()));
      BOOST_TEST(kiln::max_abs_diff(got, want) <= 1e-5f);
    }
  }
  OnnxModel diagonal(12);
  diagonal.input("x", {3, 3});
  auto* n = diagonal.node("Einsum", {"x"}, {"y"});
  auto* a = n->add_attribute();
  a->set_name("equation");
  a->set_type(onnx::AttributeProto_AttributeType_STRING);
  a->set_s("ii->i");
  diagonal.output("y");
  const auto e = error_of([&] { diagonal.load(); });
  BOOST_TEST(e.kind() == ErrorKind::Unsupported);
  BOOST_TEST(contains(e.what(), "'ii->i': the letter 'i' labels two axes of one operand"), e.what());
}

// An If whose condition is a constant at import is replaced by the branch it
// takes (both ways); a condition computed from the inputs, and an op kiln
// lacks inside a branch, are named.
BOOST_AUTO_TEST_CASE(an_if_with_a_constant_condition_takes_its_branch) {
  auto make = [](bool constant, bool value, const std::string& else_op) {
    OnnxModel m;
    m.input("x", {2, 3});
    if (constant) {
      auto* c = m.node("Constant", {}, {"cond"});
      auto* a = c->add_attribute();
      a->set_name("value");
      a->set_type(onnx::AttributeProto_AttributeType_TENSOR);
      a->mutable_t()->set_data_type(onnx::TensorProto_DataType_BOOL);
      a->mutable_t()->add_int32_data(value ? 1 : 0);
    } else {
      m.input("cond", {}, onnx::TensorProto_DataType_BOOL);
    }
    auto* node = m.node("If", {"cond"}, {"y"}, "choose");
    for (const auto& [name, op, out] : {std::tuple<std::string, std::string, std::string>{"then_branch", "Relu", "a"},
                                        {"else_branch", else_op, "b"}}) {
      auto* a = node->add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto_AttributeType_GRAPH);
      onnx::GraphProto* g = a->mutable_g();
      g->set_name(name);
      auto* inner = g->add_node();
      inner->set_op_type(op);
      inner->set_name(name + "_node");
      inner->add_input("x");
      inner->add_output(out);
      g->add_output()->set_name(out);
    }
    m.output("y");
    return m;
  };
  const Tensor x = Tensor::from_f32({2, 3}, {-1, 2, -3, 4, -5, 6});
  const kiln::Model taken = make(true, true, "Neg").load();
  BOOST_TEST(has_op(kiln::internal::graph(taken), "Relu"));
  BOOST_TEST(!has_op(kiln::internal::graph(taken), "Neg"));
  const Tensor relu = run(taken, {x}).at(0);
  BOOST_TEST(relu.values<float>()[0] == 0.0f);
  BOOST_TEST(relu.values<float>()[1] == 2.0f);
  const kiln::Model other = make(true, false, "Neg").load();
  BOOST_TEST(has_op(kiln::internal::graph(other), "Neg"));
  BOOST_TEST(!has_op(kiln::internal::graph(other), "Relu"));
  const Tensor neg = run(other, {x}).at(0);
  BOOST_TEST(neg.values<float>()[0] == 1.0f);

  // A condition read at run time: both branches become subgraphs of an If
  // node, a host step; compiled, the chosen branch runs either way, and
  // fullgraph names the If as a break.
  const kiln::Model computed = make(false, true, "Neg").load();
  const auto& choose = only_node(kiln::internal::graph(computed), "If");
  BOOST_TEST(choose.subgraphs.size() == 2u);
  BOOST_TEST(!has_op(kiln::internal::graph(computed), "Relu"));
  auto compiled = kiln::compile(computed);
  auto eager = kiln::eager(computed);
  for (const bool cond : {true, false}) {
    Tensor c(DType::boolean, {});
    c.bytes()[0] = std::byte{cond};
    const Tensor want = cond ? relu : neg;
    BOOST_TEST(kiln::max_abs_diff(run(computed, {x, c}).at(0), want) == 0.0f);
    BOOST_TEST(kiln::max_abs_diff(compiled({x, c}).at(0), want) == 0.0f);
    BOOST_TEST(kiln::max_abs_diff(eager({x, c}).at(0), want) == 0.0f);
  }
  // Each branch ran as a compiled model of its own, with its own kernel.
  const std::string explained = compiled.explain();
  BOOST_TEST(contains(explained, "/choose/then': compiled, 1 kernels, 1 shape set(s), 1 call(s)"), explained);
  BOOST_TEST(contains(explained, "/choose/else': compiled, 1 kernels, 1 shape set(s), 1 call(s)"), explained);
  const auto fullgraph = error_of([&] { kiln::compile(computed, {.fullgraph = true})({x, Tensor(DType::boolean, {})}); });
  BOOST_TEST(contains(fullgraph.what(), "If 'choose': control flow"), fullgraph.what());
  const auto inside = error_of([&] { make(true, true, "NoSuchOp").load(); });
  BOOST_TEST(inside.kind() == ErrorKind::Unsupported);
  BOOST_TEST(contains(inside.what(), "NoSuchOp: 'else_branch_node'"), inside.what());
}

// A run-time If whose branch cannot be imported at these shapes (an
// exporter's path for another input rank or sample rate, as silero-vad
// ships) imports anyway, as ONNX Runtime checks only the branch it runs: the
// good branch runs, and choosing the other is an error that says why.
BOOST_AUTO_TEST_CASE(a_run_time_if_whose_other_branch_cannot_import_runs_the_good_one) {
  OnnxModel m;
  m.input("x", {2, 3});
  m.input("cond", {}, onnx::TensorProto_DataType_BOOL);
  auto* node = m.node("If", {"cond"}, {"y"}, "choose");
  for (const auto& [name, op, out] : {std::tuple<std::string, std::string, std::string>{"then_branch", "Relu", "a"},
                                      {"else_branch", "MatMul", "b"}}) {
    auto* a = node->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto_AttributeType_GRAPH);
    onnx::GraphProto* g = a->mutable_g();
    g->set_name(name);
    auto* inner = g->add_node();
    inner->set_op_type(op);
    inner->set_name(name + "_node");
    inner->add_input("x");
    if (op == "MatMul") inner->add_input("x");  // [2, 3] x [2, 3]: no product
    inner->add_output(out);
    g->add_output()->set_name(out);
  }
  m.output("y");
  const kiln::Model model = m.load();
  const Tensor x = Tensor::from_f32({2, 3}, {-1, 2, -3, 4, -5, 6});
  Tensor yes(DType::boolean, {}), no(DType::boolean, {});
  yes.bytes()[0] = std::byte{1};
  auto compiled = kiln::compile(model);
  for (const auto& y : {run(model, {x, yes}).at(0), compiled({x, yes}).at(0)}) {
    BOOST_TEST(y.values<float>()[0] == 0.0f);
    BOOST_TEST(y.values<float>()[1] == 2.0f);
  }
  for (const auto& e : {error_of([&] { run(model, {x, no}); }), error_of([&] { compiled({x, no}); })}) {
    BOOST_TEST(e.kind() == ErrorKind::ShapeMismatch);
    BOOST_TEST(contains(e.what(), "the condition chose the else-branch, which could not be imported at these shapes"),
               e.what());
    BOOST_TEST(contains(e.what(), "else_branch_node"), e.what());
  }
}

// Expand to a shape computed at run time (from a data-dependent length, as
// TensorFlow's converters write a loop's output length) runs on the host.
BOOST_AUTO_TEST_CASE(expand_to_a_shape_read_at_run_time) {
  OnnxModel m;
  m.input("x", {3, 1});
  m.input("mask", {4}, onnx::TensorProto_DataType_BOOL);
  m.node("NonZero", {"mask"}, {"where"});
  m.node("Shape", {"where"}, {"dims"});  // [1, count]
  m.node("Expand", {"x", "dims"}, {"y"}, "spread");
  m.output("y");
  const kiln::Model model = m.load();
  Tensor mask(DType::boolean, {4});
  for (int i : {0, 2, 3}) mask.bytes()[static_cast<std::size_t>(i)] = std::byte{1};
  const Tensor x = Tensor::from_f32({3, 1}, {1, 2, 3});
  for (const auto& y : {run(model, {x, mask}).at(0), kiln::compile(model)({x, mask}).at(0)}) {
    BOOST_TEST(y.shape() == (kiln::Shape{3, 3}), boost::test_tools::per_element());
    BOOST_TEST(y.values<float>()[8] == 3.0f);
  }
}

// What a file lacks (a dtype, an op) is its own error at load, even with
// symbolic dims at placeholders: it would fail at every shape.
BOOST_AUTO_TEST_CASE(unsupported_features_are_not_blamed_on_placeholders) {
  OnnxModel m;
  m.input("x", {-1, 3, 4, 4}, onnx::TensorProto_DataType_DOUBLE);
  m.initializer("w", random_f32({2, 3, 1, 1}, 1));
  m.node("Conv", {"x", "w"}, {"y"}, "conv");
  m.output("y");
  const auto e = error_of([&] { m.load(); });
  BOOST_TEST(!contains(e.what(), "placeholder"), e.what());
}

// Loop: the body (a subgraph with inputs of its own) runs on the host until
// the trip count or the body's condition stops it; loop-carried values come
// out final, scan outputs stacked over the iterations. The trip count may be
// a constant or an input; compiled, fullgraph names the Loop as a break.
BOOST_AUTO_TEST_CASE(a_loop_runs_its_body_until_the_trip_count_or_condition_stops_it) {
  auto make = [](bool trip_count_input, bool stop_after_two) {
    OnnxModel m;
    m.input("x", {2, 3});
    if (trip_count_input) m.input("trips", {}, onnx::TensorProto_DataType_INT64);
    else m.initializer("trips", Tensor::from_i64({}, {3}));
    m.initializer("one", Tensor::from_i64({}, {1}));
    auto* node = m.node("Loop", {"trips", "", "x"}, {"acc_final", "doubled"}, "repeat");
    auto* a = node->add_attribute();
    a->set_name("body");
    a->set_type(onnx::AttributeProto_AttributeType_GRAPH);
    onnx::GraphProto* g = a->mutable_g();
    g->set_name("body");
    for (const char* name : {"i", "cond_in", "acc"}) g->add_input()->set_name(name);
    auto add = [&](const std::string& op, std::vector<std::string> in, const std::string& out) {
      auto* inner = g->add_node();
      inner->set_op_type(op);
      inner->set_name(out + "_node");
      for (const std::string& i : in) inner->add_input(i);
      inner->add_output(out);
    };
    if (stop_after_two) add("Less", {"i", "one"}, "cond_out");  // false from the second iteration
    else add("Identity", {"cond_in"}, "cond_out");
    add("Add", {"acc", "x"}, "acc_out");  // x from the enclosing graph
    add("Add", {"acc_out", "acc_out"}, "twice");
    for (const char* name : {"cond_out", "acc_out", "twice"}) g->add_output()->set_name(name);
    m.output("acc_final");
    m.output("doubled");
    return m;
  };
  const Tensor x = Tensor::from_f32({2, 3}, {-1, 2, -3, 4, -5, 6});
  auto check = [&](const std::vector<Tensor>& out, int iterations, const std::string& what) {
    BOOST_TEST_CONTEXT(what) {
      BOOST_TEST_REQUIRE(out.size() == 2u);
      BOOST_TEST((out[0].shape() == kiln::Shape{2, 3}));
      BOOST_TEST((out[1].shape() == kiln::Shape{iterations, 2, 3}));
      for (std::size_t e = 0; e < 6; ++e) {
        const float v = x.values<float>()[e];
        BOOST_TEST(out[0].values<float>()[e] == v * static_cast<float>(1 + iterations));
        for (int k = 0; k < iterations; ++k)
          BOOST_TEST(out[1].values<float>()[static_cast<std::size_t>(k) * 6 + e] == 2 * v * static_cast<float>(2 + k));
      }
    }
  };
  const kiln::Model constant = make(false, false).load();
  BOOST_TEST(only_node(kiln::internal::graph(constant), "Loop").subgraphs.size() == 1u);
  check(run(constant, {x}), 3, "three trips");
  check(kiln::compile(constant)({x}), 3, "three trips, compiled");
  check(run(make(false, true).load(), {x}), 2, "stopped by the condition");
  const kiln::Model counted = make(true, false).load();
  auto compiled = kiln::compile(counted);
  for (const std::int64_t trips : {0, 1, 4})
    check(compiled({x, Tensor::from_i64({}, {trips})}), static_cast<int>(trips), std::to_string(trips) + " trips given");
  // The body ran compiled, once per iteration: its two Adds fuse into kernels of its own.
  const std::string explained = compiled.explain();
  BOOST_TEST(contains(explained, "/repeat/body': compiled, "), explained);
  BOOST_TEST(contains(explained, "1 shape set(s), 5 call(s)"), explained);
  check(kiln::eager(counted)({x, Tensor::from_i64({}, {2})}), 2, "two trips, eager");
  const auto fullgraph = error_of([&] { kiln::compile(constant, {.fullgraph = true})({x}); });
  BOOST_TEST(contains(fullgraph.what(), "Loop 'repeat': control flow"), fullgraph.what());
}

// Scan: the body runs once per slice of the scan input along axis 0 (in
// reverse with scan_input_directions = 1), carrying its state; the running
// sums come out stacked. Other scan axes are refused naming the attribute.
BOOST_AUTO_TEST_CASE(a_scan_carries_state_over_the_slices_in_either_direction) {
  auto make = [](std::int64_t direction, std::int64_t axis) {
    OnnxModel m;
    m.input("init", {2});
    m.input("x", {3, 2});
    auto* node = m.node("Scan", {"init", "x"}, {"total", "running"}, "cumulate");
    attr(node, "num_scan_inputs", std::int64_t{1});
    attr(node, "scan_input_directions", std::vector<std::int64_t>{direction});
    attr(node, "scan_input_axes", std::vector<std::int64_t>{axis});
    auto* a = node->add_attribute();
    a->set_name("body");
    a->set_type(onnx::AttributeProto_AttributeType_GRAPH);
    onnx::GraphProto* g = a->mutable_g();
    g->set_name("body");
    for (const char* name : {"sum_in", "row"}) g->add_input()->set_name(name);
    auto* add = g->add_node();
    add->set_op_type("Add");
    add->add_input("sum_in");
    add->add_input("row");
    add->add_output("sum_out");
    auto* copy = g->add_node();
    copy->set_op_type("Identity");
    copy->add_input("sum_out");
    copy->add_output("each");
    for (const char* name : {"sum_out", "each"}) g->add_output()->set_name(name);
    m.output("total");
    m.output("running");
    return m;
  };
  const Tensor init = Tensor::from_f32({2}, {10, 20});
  const Tensor x = Tensor::from_f32({3, 2}, {1, 2, 3, 4, 5, 6});
  for (const std::int64_t direction : {0, 1}) {
    const kiln::Model model = make(direction, 0).load();
    const std::vector<float> want = direction == 0 ? std::vector<float>{11, 22, 14, 26, 19, 32}
                                                   : std::vector<float>{15, 26, 18, 30, 19, 32};
    for (const auto& out : {run(model, {init, x}), kiln::compile(model)({init, x}), kiln::eager(model)({init, x})}) {
      BOOST_TEST(out.at(0).values<float>()[0] == 19.0f);
      BOOST_TEST(out.at(0).values<float>()[1] == 32.0f);
      BOOST_TEST((out.at(1).shape() == kiln::Shape{3, 2}));
      const auto got = out.at(1).values<float>();
      BOOST_TEST(std::vector<float>(got.begin(), got.end()) == want, boost::test_tools::per_element());
    }
  }
  const auto other_axis = error_of([&] { make(0, 1).load(); });
  BOOST_TEST(other_axis.kind() == ErrorKind::Unsupported);
  BOOST_TEST(contains(other_axis.what(), "'scan_input_axes' scans along axis 1"), other_axis.what());
}

// Symbolic dims take default_dim, except an image input's height and width,
// which take image_size when it is given (kiln run's --image-size).
BOOST_AUTO_TEST_CASE(symbolic_height_and_width_take_the_image_size) {
  OnnxModel m;
  m.input("x", {-1, 3, -1, -1});
  m.node("Relu", {"x"}, {"y"});
  m.output("y");
  kiln::OnnxOptions options;
  options.default_dim = 2;
  BOOST_TEST(m.load(options).inputs().at(0).shape == (kiln::Shape{2, 3, 2, 2}), boost::test_tools::per_element());
  options.image_size = 40;
  BOOST_TEST(m.load(options).inputs().at(0).shape == (kiln::Shape{2, 3, 40, 40}), boost::test_tools::per_element());
}

// Input dims as ONNX Runtime reads them: a negative dim_value (paddle2onnx's
// -1), an unnamed dim and a dim named "?" are each an extent of their own; a
// dim_param names one extent wherever it appears.
BOOST_AUTO_TEST_CASE(exporters_dim_conventions_follow_onnx_runtime) {
  OnnxModel m;
  m.input("x", {1, 3, 1, 1});
  auto* dims = m.graph().mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  dims->mutable_dim(0)->set_dim_value(-1);
  dims->mutable_dim(2)->set_dim_param("?");  // paddle2onnx's [-1, 3, ?, ?]
  dims->mutable_dim(3)->set_dim_param("?");
  m.input("z", {1, 1});
  m.graph().mutable_input(1)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->Clear();
  m.node("Relu", {"x"}, {"y"});
  m.node("Neg", {"z"}, {"w"});
  m.output("y");
  m.output("w");
  const kiln::Model model = m.load({.image_size = 8});
  const kiln::TensorSpec x = model.inputs().at(0);
  BOOST_TEST(x.shape == (kiln::Shape{1, 3, 8, 8}), boost::test_tools::per_element());
  BOOST_TEST(x.symbolic_dims == (std::vector<std::string>{"?", "", "?", "?"}), boost::test_tools::per_element());
  BOOST_TEST(model.inputs().at(1).symbolic_dims == (std::vector<std::string>{"", "?"}), boost::test_tools::per_element());
  // Each unknown dim takes its own extent: height 5 and width 7 in one call,
  // and the unnamed dim of the other input 9.
  const Tensor input = random_f32({2, 3, 5, 7}, 3);
  const auto out = kiln::eager(model)({input, random_f32({1, 9}, 5)});
  const Tensor& y = out.at(0);
  BOOST_TEST(y.shape() == (kiln::Shape{2, 3, 5, 7}), boost::test_tools::per_element());
  BOOST_TEST(out.at(1).shape() == (kiln::Shape{1, 9}), boost::test_tools::per_element());
  BOOST_TEST(y.values<float>()[4] == std::max(input.values<float>()[4], 0.0f));
  const auto fixed = error_of([&] { kiln::eager(model)({random_f32({2, 4, 5, 7}, 4), random_f32({1, 9}, 5)}); });
  BOOST_TEST(fixed.kind() == ErrorKind::ShapeMismatch);
  BOOST_TEST(contains(fixed.what(), "dim 1 is fixed at 3"), fixed.what());

  // Named dims tie together, in calls and in given shapes; a given shape
  // sets its names in the other inputs.
  OnnxModel named;
  named.input("a", {1, 4});
  named.input("b", {1, 4});
  for (int i = 0; i < 2; ++i)
    named.graph().mutable_input(i)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("n");
  named.node("Add", {"a", "b"}, {"y"});
  named.output("y");
  const kiln::Model tied = named.load({.input_shapes = {{"a", {3, 4}}}});
  BOOST_TEST(tied.inputs().at(1).shape == (kiln::Shape{3, 4}), boost::test_tools::per_element());
  const auto disagree = error_of([&] { kiln::eager(tied)({random_f32({3, 4}, 1), random_f32({2, 4}, 2)}); });
  BOOST_TEST(disagree.kind() == ErrorKind::ShapeMismatch);
  BOOST_TEST(contains(disagree.what(), "('n')"), disagree.what());
  const auto given = error_of([&] { named.load({.input_shapes = {{"a", {3, 4}}, {"b", {2, 4}}}}); });
  BOOST_TEST(given.kind() == ErrorKind::ShapeMismatch);
  BOOST_TEST(contains(given.what(), "dims of one name must agree"), given.what());
}

// Given shapes must fit the file: a name that is no input is refused with
// the inputs listed, as are another rank and another fixed extent.
BOOST_AUTO_TEST_CASE(given_input_shapes_must_fit_the_file) {
  OnnxModel m;
  m.input("images", {-1, 3, 4, 4});
  m.node("Relu", {"images"}, {"y"});
  m.output("y");
  const auto unknown = error_of([&] { m.load({.input_shapes = {{"image", {1, 3, 4, 4}}}}); });
  BOOST_TEST(unknown.kind() == ErrorKind::InvalidArgument);
  BOOST_TEST(contains(unknown.what(), "'image', which is not an input of the model (its inputs: 'images')"),
             unknown.what());
  const auto rank = error_of([&] { m.load({.input_shapes = {{"images", {3, 4, 4}}}}); });
  BOOST_TEST(rank.kind() == ErrorKind::ShapeMismatch);
  BOOST_TEST(contains(rank.what(), "has rank 3; the file's input has rank 4"), rank.what());
  const auto fixed = error_of([&] { m.load({.input_shapes = {{"images", {2, 1, 4, 4}}}}); });
  BOOST_TEST(fixed.kind() == ErrorKind::ShapeMismatch);
  BOOST_TEST(contains(fixed.what(), "differs in dim 1, which the file fixes at 3"), fixed.what());
  BOOST_TEST(m.load({.input_shapes = {{"images", {5, 3, 4, 4}}}}).inputs().at(0).shape == (kiln::Shape{5, 3, 4, 4}),
             boost::test_tools::per_element());
}

// A model whose import fails only at the placeholder extents of its
// symbolic dims loads anyway and waits for real shapes: its first call
// imports it at that call's shapes. Until then what needs the graph throws
// the placeholder's error, which names the dims, their extents and options.
BOOST_AUTO_TEST_CASE(import_that_fails_at_placeholders_waits_for_the_first_call) {
  OnnxModel m;
  m.input("x", {1, 6});
  m.graph().mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_param(
      "length");
  m.ints("to", {1, 2, 3});
  m.node("Reshape", {"x", "to"}, {"y"}, "fold");
  m.output("y");
  const kiln::Model pending = m.load();
  BOOST_TEST(pending.import_pending());
  BOOST_TEST(pending.has_symbolic_dims());
  BOOST_TEST(pending.inputs().at(0).shape == (kiln::Shape{1, 1}), boost::test_tools::per_element());
  const auto why = error_of([&] { pending.outputs(); });
  BOOST_TEST(why.kind() == ErrorKind::ShapeMismatch);
  for (const char* part : {"placeholder extents", "input 'x' dim 1 ('length') = 1", "OnnxOptions::default_dim",
                           "cannot reshape", "first call", "OnnxOptions::input_shapes", "--input-shape"})
    BOOST_TEST(contains(why.what(), part), "'" << part << "' in: " << why.what());
  BOOST_TEST(contains(error_of([&] { kiln::internal::graph(pending); }).what(), "placeholder"));
  BOOST_TEST(contains(error_of([&] { kiln::compile(pending).prepare(); }).what(), "placeholder"));
  BOOST_TEST(contains(kiln::compile(pending).explain(), "import: waits for the first call's input shapes"));

  const Tensor x = random_f32({1, 6}, 5);
  for (auto run_model : {std::function<std::vector<Tensor>(const Tensor&)>(
                             [&](const Tensor& in) { return kiln::eager(pending)({in}); }),
                         std::function<std::vector<Tensor>(const Tensor&)>(
                             [&](const Tensor& in) { return kiln::compile(pending)({in}); })}) {
    const Tensor y = run_model(x).at(0);
    BOOST_TEST(y.shape() == (kiln::Shape{1, 2, 3}), boost::test_tools::per_element());
    BOOST_TEST(y.values<float>()[5] == x.values<float>()[5]);
    // At a real shape that does not fit, the error is the model's, not a placeholder's.
    const auto real = error_of([&] { run_model(random_f32({1, 5}, 6)); });
    BOOST_TEST(!contains(real.what(), "placeholder"), real.what());
    BOOST_TEST(contains(real.what(), "cannot reshape"), real.what());
  }
  // The placeholder's own extent, given as a call, is imported again and fails as the model's error.
  const auto same = error_of([&] { kiln::eager(pending)({random_f32({1, 1}, 7)}); });
  BOOST_TEST(!contains(same.what(), "placeholder"), same.what());
  // Shapes given at load import it at once.
  const kiln::Model given = m.load({.input_shapes = {{"x", {1, 6}}}});
  BOOST_TEST(!given.import_pending());
  BOOST_TEST(given.outputs().at(0).shape == (kiln::Shape{1, 2, 3}), boost::test_tools::per_element());
}

// A 1-D Conv (audio and text models) runs as a 2-D one of height 1; auto_pad,
// stride, dilation and groups keep ONNX's meaning.
BOOST_AUTO_TEST_CASE(conv_1d_runs_as_2d_with_onnx_semantics) {
  OnnxModel m;
  m.input("x", {1, 4, 11});
  m.initializer("w", random_f32({6, 2, 3}, 1));
  m.initializer("b", random_f32({6}, 2));
  auto* conv = m.node("Conv", {"x", "w", "b"}, {"y"}, "conv1d");
  attr(conv, "auto_pad", std::string("SAME_UPPER"));
  attr(conv, "strides", std::vector<std::int64_t>{2});
  attr(conv, "dilations", std::vector<std::int64_t>{2});
  attr(conv, "group", std::int64_t{2});
  m.output("y");
  const kiln::Model model = m.load();
  BOOST_TEST(model.outputs().at(0).shape == (kiln::Shape{1, 6, 6}), boost::test_tools::per_element());
  const Tensor x = random_f32({1, 4, 11}, 3), w = random_f32({6, 2, 3}, 1), b = random_f32({6}, 2);
  const Tensor y = run(model, {x}).at(0);
  // SAME_UPPER: total padding (6 - 1) * 2 + 5 - 11 = 4, two at each end.
  for (int o = 0; o < 6; ++o)
    for (int t = 0; t < 6; ++t) {
      double want = b.values<float>()[o];
      for (int c = 0; c < 2; ++c)
        for (int k = 0; k < 3; ++k) {
          const int at = t * 2 - 2 + k * 2;
          if (at >= 0 && at < 11)
            want += double(w.values<float>()[(o * 2 + c) * 3 + k]) * x.values<float>()[((o / 3) * 2 + c) * 11 + at];
        }
      BOOST_TEST(y.values<float>()[o * 6 + t] == want, boost::test_tools::tolerance(1e-5));
    }
}

// An LSTM imports as one projection of every step (MatMul, bias Add) and the
// Recurrence loop, the weights rearranged at import; compiled, the whole
// sequence takes a fixed number of dispatches however long it is.
BOOST_AUTO_TEST_CASE(lstm_imports_as_a_projection_and_one_loop) {
  const std::int64_t T = 64, B = 2, I = 3, H = 8;
  OnnxModel m;
  m.input("x", {T, B, I});
  m.initializer("w", random_f32({1, 4 * H, I}, 1));
  m.initializer("r", random_f32({1, 4 * H, H}, 2));
  m.initializer("b", random_f32({1, 8 * H}, 3));
  attr(m.node("LSTM", {"x", "w", "r", "b"}, {"y", "y_h", "y_c"}, "lstm"), "hidden_size", H);
  m.output("y");
  m.output("y_h");
  m.output("y_c");
  const kiln::Model model = m.load();
  BOOST_TEST(ops_of(kiln::internal::graph(model)) == (std::vector<std::string>{"MatMul", "Add", "Recurrence"}),
             boost::test_tools::per_element());
  BOOST_TEST(model.outputs().at(0).shape == (kiln::Shape{T, 1, B, H}), boost::test_tools::per_element());
  const Tensor x = random_f32({T, B, I}, 4);
  const auto want = run(model, {x});
  kiln::CompiledModel compiled = kiln::compile(model, {.fullgraph = true});
  const auto got = compiled({x});
  for (std::size_t i = 0; i < want.size(); ++i)
    for (std::int64_t k = 0; k < want[i].numel(); ++k)
      BOOST_REQUIRE_SMALL(got[i].values<float>()[k] - want[i].values<float>()[k], 1e-4f);
  BOOST_TEST(compiled.stats().dispatches_per_run <= 3, compiled.stats().dispatches_per_run << " dispatches");
}

// ConvTranspose: auto_pad SAME_UPPER and output_shape become explicit pads
// (a longer target extends the end as output_padding), and 1-D runs as 2-D
// between reshapes; all match ONNX's output extents.
BOOST_AUTO_TEST_CASE(conv_transpose_padding_rules_become_explicit_and_1d_runs_as_2d) {
  OnnxModel same;
  same.input("x", {1, 1, 3, 3});
  same.initializer("w", random_f32({1, 2, 3, 3}, 1));
  auto* node = same.node("ConvTranspose", {"x", "w"}, {"y"}, "up");
  attr(node, "strides", std::vector<std::int64_t>{2, 2});
  attr(node, "auto_pad", std::string("SAME_UPPER"));
  same.output("y");
  const kiln::Model same_model = same.load();
  BOOST_TEST(same_model.outputs().at(0).shape == (kiln::Shape{1, 2, 6, 6}), boost::test_tools::per_element());
  BOOST_TEST(only_node(kiln::internal::graph(same_model), "ConvTranspose").attrs.get_ints("pads", {}) ==
                 (std::vector<std::int64_t>{0, 0, 1, 1}),
             boost::test_tools::per_element());

  OnnxModel target;
  target.input("x", {1, 1, 3, 3});
  target.initializer("w", random_f32({1, 2, 3, 3}, 2));
  node = target.node("ConvTranspose", {"x", "w"}, {"y"}, "up");
  attr(node, "strides", std::vector<std::int64_t>{3, 2});
  attr(node, "output_shape", std::vector<std::int64_t>{10, 8});
  target.output("y");
  const kiln::Model target_model = target.load();
  BOOST_TEST(target_model.outputs().at(0).shape == (kiln::Shape{1, 2, 10, 8}), boost::test_tools::per_element());
  BOOST_TEST(only_node(kiln::internal::graph(target_model), "ConvTranspose").attrs.get_ints("output_padding", {}) ==
                 (std::vector<std::int64_t>{1, 1}),
             boost::test_tools::per_element());

  OnnxModel one_d;
  one_d.input("x", {2, 3, 5});
  one_d.initializer("w", random_f32({3, 4, 3}, 3));
  attr(one_d.node("ConvTranspose", {"x", "w"}, {"y"}, "up"), "strides", std::vector<std::int64_t>{2});
  one_d.output("y");
  const kiln::Model one_d_model = one_d.load();
  BOOST_TEST(one_d_model.outputs().at(0).shape == (kiln::Shape{2, 4, 11}), boost::test_tools::per_element());
  BOOST_TEST(ops_of(kiln::internal::graph(one_d_model)) ==
                 (std::vector<std::string>{"Reshape", "ConvTranspose", "Reshape"}),
             boost::test_tools::per_element());

  OnnxModel three_d;
  three_d.input("x", {1, 1, 2, 2, 2});
  three_d.initializer("w", random_f32({1, 1, 2, 2, 2}, 4));
  three_d.node("ConvTranspose", {"x", "w"}, {"y"}, "up3d");
  three_d.output("y");
  const auto e = error_of([&] { three_d.load(); });
  BOOST_TEST(e.kind() == ErrorKind::Unsupported);
  BOOST_TEST(contains(e.what(), "only 1-D and 2-D ConvTranspose"), e.what());
}

#else  // built without ONNX

BOOST_AUTO_TEST_CASE(load_onnx_says_onnx_support_is_missing) {
  try {
    kiln::load_onnx("model.onnx");
    BOOST_FAIL("expected an error");
  } catch (const kiln::Error& e) {
    BOOST_TEST(e.kind() == kiln::ErrorKind::Unsupported);
    BOOST_TEST(std::string(e.what()).find("without ONNX support") != std::string::npos);
  }
}

#endif

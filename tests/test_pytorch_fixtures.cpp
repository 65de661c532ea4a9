#define BOOST_TEST_MODULE pytorch_fixtures
#include <boost/test/unit_test.hpp>

#include <kiln/kiln.h>
#include <kiln/onnx.h>

#include "graph/ir.h"
#include "tools/npy.h"
#include "src/runtime/internal_access.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

// kiln against PyTorch itself. tests/fixtures/pytorch/make_fixtures.py exports
// torchvision's architectures (and Hugging Face's DETR and SegFormer, written
// in tests/fixtures/pytorch/hf_models.py) without their weights (the weights are graph
// inputs named by their state_dict names) and saves PyTorch's outputs for
// weights and an image made by a counter-based generator. This suite makes
// the same weights bit for bit (generated_tensor below), puts them back into
// the ONNX graph as initializers, runs kiln eagerly and compiled on Vulkan and
// compares with PyTorch; and it checks that the built-in model of the same
// family has the export's graph shape: the same parameters (names and
// shapes), outputs and number of convolutions and matrix products.

namespace {

namespace fs = std::filesystem;

fs::path fixture_dir() {
  const char* root = std::getenv("KILN_SOURCE_ROOT");
  BOOST_TEST_REQUIRE(root != nullptr, "KILN_SOURCE_ROOT is not set (run through meson test)");
  return fs::path(root) / "tests" / "fixtures" / "pytorch";
}

// ---- the generator (make_fixtures.py's `fill`, bit for bit) ----------------

std::uint64_t name_seed(const std::string& name) {
  std::uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a 64
  for (unsigned char byte : name) h = (h ^ byte) * 0x100000001B3ull;
  return h;
}

// The i-th (from 0) uniform float in [0, 1) of `seed`'s stream: splitmix64 of
// seed + (i + 1) * golden, top 24 bits (exact in f32).
float uniform01(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * 0x1p-24f;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

kiln::Tensor generated_tensor(const std::string& name, const kiln::Shape& shape) {
  kiln::Tensor t(kiln::DType::f32, shape);
  auto values = t.values<float>();
  const std::uint64_t seed = name_seed(name);
  std::int64_t fan_in = 1;
  for (std::size_t d = 1; d < shape.size(); ++d) fan_in *= shape[d];
  const float he_scale = static_cast<float>(std::sqrt(6.0 / static_cast<double>(fan_in)));
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float u = uniform01(seed, i);
    const float signed_u = 2.0f * u - 1.0f;
    float v;
    if (ends_with(name, "running_var")) v = 0.5f + u;
    else if (ends_with(name, "running_mean")) v = 0.2f * signed_u;
    else if (shape.size() <= 1 && ends_with(name, "weight")) v = 1.0f + 0.2f * signed_u;
    else if (shape.size() <= 1) v = 0.2f * signed_u;
    else v = he_scale * signed_u;
    values[i] = v;
  }
  return t;
}

// ---- fixtures ---------------------------------------------------------------

// How the built-in model of a family relates to the exported graph.
enum class Builtin {
  // The same network: same parameters, outputs, Conv and MatMul + Gemm counts.
  same_network,
  // The export stops at the network's raw outputs (SSDLite's head: box
  // regression and class logits per anchor), where the built-in goes on with
  // detection post-processing to boxes, scores and labels: the same
  // parameters and Conv count, but other outputs.
  adds_post_processing,
};

struct Family {
  std::string name;
  std::int64_t image_size;
  std::vector<std::string> outputs;  // the export's, as make_fixtures.py names them
  Builtin builtin = Builtin::same_network;
};

const std::vector<Family>& families() {
  static const std::vector<Family> kFamilies = {
      {"resnet50", 64, {"logits"}},
      {"mobilenet_v2", 64, {"logits"}},
      {"efficientnet_b0", 64, {"logits"}},
      {"convnext_tiny", 64, {"logits"}},
      {"vit_b_16", 32, {"logits"}},
      {"deeplabv3_mobilenet_v3_large", 32, {"out"}},
      {"lraspp_mobilenet_v3_large", 32, {"out"}},
      {"fcn_resnet50", 32, {"out"}},
      {"ssdlite320_mobilenet_v3_large", 64, {"bbox_regression", "cls_logits"}, Builtin::adds_post_processing},
      {"detr_resnet50", 64, {"logits", "boxes"}},
      {"segformer_b0", 64, {"logits"}},
  };
  return kFamilies;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  BOOST_TEST_REQUIRE(static_cast<bool>(in), "cannot read fixture " << path << " (run make_fixtures.py)");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

struct Export {
  kiln::Model model;
  std::map<std::string, kiln::Shape> parameters;  // the graph inputs that hold weights
  // Nodes per op type as exported, before the import folds whatever the
  // generated weights make constant (DETR's first decoder self-attention
  // sees only weights: its queries start as zeros).
  std::map<std::string, int> exported_ops;
};

// The exported graph with every weight input turned into a generated initializer.
Export load_export(const Family& family) {
  onnx::ModelProto proto;
  BOOST_TEST_REQUIRE(proto.ParseFromString(read_file(fixture_dir() / (family.name + ".onnx"))));
  onnx::GraphProto& graph = *proto.mutable_graph();
  std::map<std::string, kiln::Shape> parameters;
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> inputs;
  for (const onnx::ValueInfoProto& input : graph.input()) {
    if (input.name() == "input") {
      *inputs.Add() = input;
      continue;
    }
    kiln::Shape shape;
    for (const auto& dim : input.type().tensor_type().shape().dim()) shape.push_back(dim.dim_value());
    parameters[input.name()] = shape;
    const kiln::Tensor value = generated_tensor(input.name(), shape);
    onnx::TensorProto& init = *graph.add_initializer();
    init.set_name(input.name());
    init.set_data_type(onnx::TensorProto_DataType_FLOAT);
    for (std::int64_t d : shape) init.add_dims(d);
    const auto values = value.values<float>();
    init.set_raw_data(values.data(), values.size() * sizeof(float));
  }
  graph.mutable_input()->Swap(&inputs);
  std::map<std::string, int> exported_ops;
  for (const onnx::NodeProto& node : graph.node()) ++exported_ops[node.op_type()];
  return Export{kiln::load_onnx_bytes(proto.SerializeAsString(), family.name + ".onnx"), std::move(parameters),
                std::move(exported_ops)};
}

float max_abs(std::span<const float> values) {
  float m = 0;
  for (float v : values) m = std::max(m, std::fabs(v));
  return m;
}

// kiln's output agrees with PyTorch's to within `relative` of PyTorch's largest magnitude.
void check_close(const kiln::Tensor& got, const kiln::Tensor& want, const std::string& what) {
  BOOST_TEST_CONTEXT(what) {
    BOOST_TEST_REQUIRE((got.shape() == want.shape()));
    const auto g = got.values<float>();
    const auto w = want.values<float>();
    float worst = 0;
    for (std::size_t i = 0; i < w.size(); ++i) {
      BOOST_TEST_REQUIRE(std::isfinite(g[i]));
      worst = std::max(worst, std::fabs(g[i] - w[i]));
    }
    const float scale = max_abs(w);
    BOOST_TEST_MESSAGE(what << ": max |kiln - torch| = " << worst << " (outputs up to " << scale << ")");
    BOOST_TEST(scale > 0.0f);
    BOOST_TEST(worst <= 2e-3f * scale);
  }
}

// Names and shapes of the built-in model's weights that the export also
// names, plus the built-in's weights the export lacks; then outputs and op
// counts as far as family.builtin says the two graphs share them.
void check_same_graph_shape(const Family& family, const Export& exported) {
  const kiln::Model builtin = kiln::models::build(family.name, {.image_size = family.image_size});
  std::map<std::string, kiln::Shape> builtin_constants;
  std::map<std::string, bool> matmul_weight;  // the constant is a MatMul's right operand
  for (const auto& v : kiln::internal::graph(builtin).values())
    if (v.constant) builtin_constants[v.name] = v.type.shape;
  for (const auto& node : kiln::internal::graph(builtin).nodes())
    if (node.op == "MatMul" && kiln::internal::graph(builtin).value(node.inputs[1]).constant)
      matmul_weight[kiln::internal::graph(builtin).value(node.inputs[1]).name] = true;
  for (const auto& [name, shape] : exported.parameters) {
    BOOST_TEST_CONTEXT(family.name << ": the export's parameter " << name) {
      const auto it = builtin_constants.find(name);
      BOOST_TEST_REQUIRE((it != builtin_constants.end()), "the built-in model has no " << name);
      // The one layout difference: the built-in stores a Linear layer's weight
      // [out, in] pre-transposed as MatMul's [in, out] operand (torch's export
      // transposes it in the graph instead).
      const bool pre_transposed = shape.size() == 2 && matmul_weight.count(name) &&
                                  it->second == kiln::Shape{shape[1], shape[0]};
      BOOST_TEST((it->second == shape || pre_transposed));
    }
  }
  // Every parameter-like constant of the built-in model exists in the export.
  for (const auto& [name, shape] : builtin_constants) {
    const bool state_dict_like = ends_with(name, ".weight") || ends_with(name, ".bias") ||
                                 ends_with(name, "running_mean") || ends_with(name, "running_var");
    if (state_dict_like) BOOST_TEST(exported.parameters.count(name) == 1u, family.name << ": export lacks " << name);
  }
  auto count = [](const kiln::Model& m, std::initializer_list<const char*> ops) {
    int n = 0;
    for (const auto& node : kiln::internal::graph(m).nodes())
      for (const char* op : ops) n += node.op == op;
    return n;
  };
  auto exported_count = [&](std::initializer_list<const char*> ops) {
    int n = 0;
    for (const char* op : ops)
      if (const auto it = exported.exported_ops.find(op); it != exported.exported_ops.end()) n += it->second;
    return n;
  };
  BOOST_TEST(count(builtin, {"Conv"}) == exported_count({"Conv"}), family.name << ": Conv count");
  if (family.builtin == Builtin::adds_post_processing) return;
  // Same outputs, same number of matrix products.
  BOOST_TEST_REQUIRE(kiln::internal::graph(builtin).outputs().size() == kiln::internal::graph(exported.model).outputs().size());
  for (std::size_t i = 0; i < kiln::internal::graph(builtin).outputs().size(); ++i)
    BOOST_TEST((kiln::internal::graph(builtin).value(kiln::internal::graph(builtin).outputs()[i]).type.shape ==
                kiln::internal::graph(exported.model).value(kiln::internal::graph(exported.model).outputs()[i]).type.shape));
  BOOST_TEST(count(builtin, {"MatMul", "Gemm"}) == exported_count({"MatMul", "Gemm"}),
             family.name << ": MatMul + Gemm count");
}

void check_family(const std::string& name) {
  const auto it = std::find_if(families().begin(), families().end(), [&](const Family& f) { return f.name == name; });
  BOOST_TEST_REQUIRE((it != families().end()));
  const Family& family = *it;
  const Export exported = load_export(family);
  check_same_graph_shape(family, exported);

  const kiln::Tensor image = generated_tensor("input", {1, 3, family.image_size, family.image_size});
  std::vector<kiln::Tensor> want;
  for (const std::string& output : family.outputs)
    want.push_back(kiln::tools::read_npy((fixture_dir() / (family.name + "." + output + ".npy")).string()));

  auto eager = kiln::eager(exported.model, {.backend = "vulkan"});
  const std::vector<kiln::Tensor> eager_out = eager({image});
  auto compiled = kiln::compile(exported.model, {.backend = "vulkan", .fullgraph = true});
  const std::vector<kiln::Tensor> compiled_out = compiled({image});
  BOOST_TEST_REQUIRE(eager_out.size() == want.size());
  BOOST_TEST_REQUIRE(compiled_out.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    check_close(eager_out[i], want[i], family.name + " eager " + family.outputs[i]);
    check_close(compiled_out[i], want[i], family.name + " compiled " + family.outputs[i]);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(generator_matches_the_python_one) {
  // Values make_fixtures.py's fill() gives (numpy float32, printed as doubles):
  // equal bit for bit, or every fixture's weights would differ.
  auto check = [](const std::string& name, const kiln::Shape& shape, const std::vector<double>& python) {
    const kiln::Tensor t = generated_tensor(name, shape);
    const auto v = t.values<float>();
    BOOST_TEST_REQUIRE(v.size() == python.size());
    for (std::size_t i = 0; i < v.size(); ++i) BOOST_TEST(v[i] == static_cast<float>(python[i]), name << "[" << i << "]");
  };
  check("conv1.weight", {2, 1, 1, 3},
        {0.12749117612838745, 0.6934220194816589, -1.3493812084197998, 0.6680681705474854, -0.36953362822532654,
         1.3131622076034546});
  check("bn1.running_var", {4}, {1.1423075199127197, 1.2867534160614014, 1.4707788228988647, 0.9438512325286865});
  check("input", {1, 1, 1, 3}, {-1.1375415325164795, 0.4309402108192444, -0.8382772207260132});
}

BOOST_AUTO_TEST_CASE(resnet50) { check_family("resnet50"); }
BOOST_AUTO_TEST_CASE(mobilenet_v2) { check_family("mobilenet_v2"); }
BOOST_AUTO_TEST_CASE(efficientnet_b0) { check_family("efficientnet_b0"); }
BOOST_AUTO_TEST_CASE(convnext_tiny) { check_family("convnext_tiny"); }
BOOST_AUTO_TEST_CASE(vit_b_16) { check_family("vit_b_16"); }
BOOST_AUTO_TEST_CASE(deeplabv3_mobilenet_v3_large) { check_family("deeplabv3_mobilenet_v3_large"); }
BOOST_AUTO_TEST_CASE(lraspp_mobilenet_v3_large) { check_family("lraspp_mobilenet_v3_large"); }
BOOST_AUTO_TEST_CASE(fcn_resnet50) { check_family("fcn_resnet50"); }
BOOST_AUTO_TEST_CASE(ssdlite320_mobilenet_v3_large) { check_family("ssdlite320_mobilenet_v3_large"); }
BOOST_AUTO_TEST_CASE(detr_resnet50) { check_family("detr_resnet50"); }
BOOST_AUTO_TEST_CASE(segformer_b0) { check_family("segformer_b0"); }

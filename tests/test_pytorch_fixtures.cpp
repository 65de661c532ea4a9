#define BOOST_TEST_MODULE pytorch_fixtures
#include <boost/test/unit_test.hpp>

#include <kiln/generate.h>
#include <kiln/kiln.h>
#include <kiln/npy.h>
#include <kiln/onnx.h>

#include "backends/registry.h"
#include "graph/ir.h"
#include "graph/model_access.h"
#include "src/base/log.h"
#include "src/compile/plan.h"
#include "src/render/cstyle.h"
#include "src/runtime/internal_access.h"
#include "pytorch_exports.h"
#include "test_backend.h"

#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

// kiln against PyTorch itself. tests/fixtures/pytorch/make_fixtures.py exports
// torchvision's architectures (and Hugging Face's DETR and SegFormer, written
// in tests/fixtures/pytorch/hf_models.py) without their weights (the weights are graph
// inputs named by their state_dict names) and saves PyTorch's outputs for
// weights and an image made by a counter-based generator. This suite makes
// the same weights bit for bit (pytorch_exports.h), puts them back into
// the ONNX graph as initializers, runs kiln eagerly and compiled on Vulkan and
// compares with PyTorch; and it checks that the built-in model of the same
// family has the export's graph shape: the same parameters (names and
// shapes), outputs and number of convolutions and matrix products.

namespace {

namespace fs = std::filesystem;
using pytorch_exports::generate_weights;
using pytorch_exports::generated_tensor;

fs::path fixture_dir() {
  const char* root = std::getenv("KILN_SOURCE_ROOT");
  BOOST_TEST_REQUIRE(root != nullptr, "KILN_SOURCE_ROOT is not set (run through meson test)");
  return fs::path(root) / "tests" / "fixtures" / "pytorch";
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
  // No built-in model: the family checks import and kernels only.
  none,
};

struct Family {
  std::string name;
  std::int64_t image_size;
  std::vector<std::string> outputs;  // the export's, as make_fixtures.py names them
  Builtin builtin = Builtin::same_network;
  // Exported with symbolic batch, height and width: also run at these image
  // sizes, each imported with the input's shape given (<family>.<output>.<size>.npy).
  std::vector<std::int64_t> extra_image_sizes = {};
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
      {"unet_small", 32, {"mask"}, Builtin::none, {48}},
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
Export load_export(const Family& family, std::int64_t image_size) {
  onnx::ModelProto proto;
  BOOST_TEST_REQUIRE(proto.ParseFromString(read_file(fixture_dir() / (family.name + ".onnx"))));
  std::map<std::string, int> exported_ops;
  for (const onnx::NodeProto& node : proto.graph().node()) ++exported_ops[node.op_type()];
  std::map<std::string, kiln::Shape> parameters =
      generate_weights(proto, [](const std::string& name) { return name == "input"; });
  kiln::OnnxOptions options;
  options.input_shapes["input"] = {1, 3, image_size, image_size};
  return Export{kiln::load_onnx_bytes(proto.SerializeAsString(), family.name + ".onnx", "", options),
                std::move(parameters), std::move(exported_ops)};
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
    const bool state_dict_like = name.ends_with(".weight") || name.ends_with(".bias") ||
                                 name.ends_with("running_mean") || name.ends_with("running_var");
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

void check_outputs(const Family& family, const Export& exported, std::int64_t image_size,
                   const std::vector<kiln::Tensor>& want);

void check_family(const std::string& name) {
  const auto it = std::find_if(families().begin(), families().end(), [&](const Family& f) { return f.name == name; });
  BOOST_TEST_REQUIRE((it != families().end()));
  const Family& family = *it;
  std::vector<std::int64_t> sizes = {family.image_size};
  sizes.insert(sizes.end(), family.extra_image_sizes.begin(), family.extra_image_sizes.end());
  for (const std::int64_t size : sizes) {
    const Export exported = load_export(family, size);
    if (family.builtin != Builtin::none && size == family.image_size) check_same_graph_shape(family, exported);
    const std::string suffix = size == family.image_size ? "" : "." + std::to_string(size);
    std::vector<kiln::Tensor> want;
    for (const std::string& output : family.outputs)
      want.push_back(kiln::load_npy((fixture_dir() / (family.name + "." + output + suffix + ".npy")).string()));
    check_outputs(family, exported, size, want);
  }
}

// The export run eagerly and compiled (fullgraph) on Vulkan against PyTorch's outputs.
void check_outputs(const Family& family, const Export& exported, std::int64_t image_size,
                   const std::vector<kiln::Tensor>& want) {
  const kiln::Tensor image = generated_tensor("input", {1, 3, image_size, image_size});

  auto eager = kiln::eager(exported.model, {.backend = kiln::testing::test_backend()});
  const std::vector<kiln::Tensor> eager_out = eager({image});
  auto compiled = kiln::compile(exported.model, {.backend = kiln::testing::test_backend(), .fullgraph = true});
  const std::vector<kiln::Tensor> compiled_out = compiled({image});
  BOOST_TEST_REQUIRE(eager_out.size() == want.size());
  BOOST_TEST_REQUIRE(compiled_out.size() == want.size());
  const std::string at = " at " + std::to_string(image_size) + "x" + std::to_string(image_size) + " ";
  for (std::size_t i = 0; i < want.size(); ++i) {
    check_close(eager_out[i], want[i], family.name + at + "eager " + family.outputs[i]);
    check_close(compiled_out[i], want[i], family.name + at + "compiled " + family.outputs[i]);
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
BOOST_AUTO_TEST_CASE(unet_small) { check_family("unet_small"); }

// One compiled U-Net (symbolic batch, height and width) serves calls of
// several image sizes: each new size compiles once, is kept, and matches
// PyTorch; explain() lists the symbolic dims and each shape set with what
// changed; past the recompile limit a call is an error naming it, or runs
// eagerly when asked; shapes the file fixes (3 channels) are refused.
BOOST_AUTO_TEST_CASE(unet_small_compiles_once_per_input_shape_set) {
  const auto it = std::find_if(families().begin(), families().end(), [](const Family& f) { return f.name == "unet_small"; });
  BOOST_TEST_REQUIRE((it != families().end()));
  const Export exported = load_export(*it, 32);
  BOOST_TEST_REQUIRE(exported.model.has_symbolic_dims());
  BOOST_TEST(exported.model.inputs().at(0).symbolic_dims ==
                 (std::vector<std::string>{"batch", "", "height", "width"}),
             boost::test_tools::per_element());
  auto compiled = kiln::compile(exported.model, {.backend = kiln::testing::test_backend(), .fullgraph = true});
  auto want = [](const std::string& suffix) {
    return kiln::load_npy((fixture_dir() / ("unet_small.mask" + suffix + ".npy")).string());
  };
  for (const std::int64_t size : {32, 48, 32}) {
    const kiln::Tensor image = generated_tensor("input", {1, 3, size, size});
    check_close(compiled({image}).at(0), want(size == 32 ? "" : ".48"),
                "unet_small, one compiled model, at " + std::to_string(size));
  }
  BOOST_TEST(compiled.stats().shape_sets == 2);
  // Height and width changed once, so the second set was compiled with them
  // dynamic (automatic_dynamic): other sizes are planned again and served by
  // it, adding no shape set. 40x40 compiles the few kernels whose structure
  // depends on how the extents divide (see the next test); 56x56, divisible
  // as 40 is, loads no kernel at all (none compiled, none from the disk cache).
  auto eager = kiln::eager(exported.model, {.backend = kiln::testing::test_backend()});
  for (const std::int64_t size : {40, 56}) {
    const kiln::Tensor image = generated_tensor("input", {1, 3, size, size});
    std::vector<std::string> info;
    const auto previous = kiln::base::set_log_sink(
        [&](kiln::base::LogLevel, const std::string& message) { info.push_back(message); },
        kiln::base::LogLevel::info);
    const kiln::Tensor got = compiled({image}).at(0);
    kiln::base::set_log_sink(previous);
    check_close(got, eager({image}).at(0), "unet_small at " + std::to_string(size) + ", served by the dynamic set");
    const kiln::RunStats stats = compiled.stats();
    BOOST_TEST(stats.shape_sets == 2);
    const int loaded = stats.kernel_cache_misses + stats.kernel_cache_hits;
    BOOST_TEST(loaded * 3 <= (size == 40 ? stats.kernels : 0), size << ": " << loaded << " kernels loaded again");
    // The log says what the new extents cost: the kernels reused, and each new one by name.
    const auto line = std::find_if(info.begin(), info.end(), [](const std::string& m) {
      return m.find("at new extents of shape set 2") != std::string::npos;
    });
    BOOST_REQUIRE_MESSAGE(line != info.end(), size << ": no line for the new extents");
    const std::string reused = std::to_string(stats.kernels - loaded) + " of " + std::to_string(stats.kernels) +
                               " kernels reused";
    BOOST_TEST(line->find(reused) != std::string::npos, *line);
    const std::string new_ones = "new (" + std::to_string(stats.kernel_cache_misses) + " compiled, " +
                                 std::to_string(stats.kernel_cache_hits) + " from the disk cache): ";
    BOOST_TEST((line->find(new_ones) != std::string::npos) == (loaded > 0), *line);
    // Each new kernel with why: a structure of its own, or more parameters.
    if (loaded > 0)
      BOOST_TEST((line->find("with a structure no kernel of the set has") != std::string::npos ||
                  line->find("more of their constants made parameters") != std::string::npos),
                 *line);
    BOOST_TEST(line->find("no probe") != std::string::npos, *line);
  }
  const std::string explained = compiled.explain();
  BOOST_TEST(explained.find("input [batch=1, 3, height=32, width=32]") != std::string::npos, explained);
  BOOST_TEST(explained.find("shape sets (compiled): 2 of 8") != std::string::npos, explained);
  BOOST_TEST(explained.find("input 'input' dim 2 was 32, now 48, input 'input' dim 3 was 32, now 48; dynamic: "
                            "input 'input' dim 2 (height), input 'input' dim 3 (width) (3 input shape(s) served)") !=
                 std::string::npos,
             explained);

  const kiln::Tensor at24 = generated_tensor("input", {1, 3, 24, 24});
  const kiln::Tensor at40 = generated_tensor("input", {1, 3, 40, 40});
  auto limited = kiln::compile(exported.model, {.backend = kiln::testing::test_backend(), .recompile_limit = 1});
  limited({at24});
  try {
    limited({at40});
    BOOST_ERROR("expected the recompile limit");
  } catch (const kiln::Error& e) {
    BOOST_TEST(e.kind() == kiln::ErrorKind::ShapeMismatch);
    BOOST_TEST(std::string(e.what()).find("past the recompile limit of 1") != std::string::npos, e.what());
  }
  auto falls_back = kiln::compile(exported.model, {.backend = kiln::testing::test_backend(), .recompile_limit = 1,
                                                   .eager_past_recompile_limit = true});
  falls_back({at24});
  const kiln::Tensor eager_out = falls_back({at40}).at(0);
  BOOST_TEST((eager_out.shape() == kiln::Shape{1, 2, 40, 40}));
  BOOST_TEST(falls_back.stats().shape_sets == 1);
  BOOST_TEST(falls_back.explain().find("(eager: past the limit)") != std::string::npos, falls_back.explain());
  // The eager fallback computes what a compiled model does at 40x40; that
  // model's first call (not the 32x32 it was imported at) is its first shape set.
  auto first_call_at_40 = kiln::compile(exported.model, {.backend = kiln::testing::test_backend()});
  check_close(eager_out, first_call_at_40({at40}).at(0), "unet_small at 40, eager fallback against compiled");
  BOOST_TEST(first_call_at_40.stats().shape_sets == 1);
  BOOST_TEST(first_call_at_40.explain().find("[1, 3, 40, 40] (the first)") != std::string::npos,
             first_call_at_40.explain());

  try {
    compiled({generated_tensor("input", {1, 4, 32, 32})});
    BOOST_ERROR("expected a shape error");
  } catch (const kiln::Error& e) {
    BOOST_TEST(e.kind() == kiln::ErrorKind::ShapeMismatch);
    BOOST_TEST(std::string(e.what()).find("dim 1 is fixed at 3 by the model") != std::string::npos, e.what());
  }
}

// Height and width marked dynamic (CompileOptions::dynamic_dims): the first
// call compiles kernels that take the extents depending on them as
// parameters; every later image size is planned again on the host and runs
// those kernels, compiling nothing, and matches PyTorch (or eager, at sizes
// without a PyTorch output). The bounds are kept; only symbolic dims can be marked.
BOOST_AUTO_TEST_CASE(unet_small_with_dynamic_height_and_width_compiles_its_kernels_once) {
  const auto it = std::find_if(families().begin(), families().end(), [](const Family& f) { return f.name == "unet_small"; });
  BOOST_TEST_REQUIRE((it != families().end()));
  const Export exported = load_export(*it, 32);
  auto want = [](const std::string& suffix) {
    return kiln::load_npy((fixture_dir() / ("unet_small.mask" + suffix + ".npy")).string());
  };
  auto compiled = kiln::compile(exported.model, {.backend = kiln::testing::test_backend(),
                                                 .fullgraph = true,
                                                 .dynamic_dims = {{.input = "input", .dim = 2, .max = 64},
                                                                  {.input = "input", .dim = 3, .max = 64}}});
  auto eager = kiln::eager(exported.model, {.backend = kiln::testing::test_backend()});
  check_close(compiled({generated_tensor("input", {1, 3, 32, 32})}).at(0), want(""), "dynamic unet_small at 32");
  const kiln::RunStats first = compiled.stats();
  BOOST_TEST(first.kernels > 0);
  const std::string explained = compiled.explain();
  BOOST_TEST(explained.find("dynamic dims: input 'input' dim 2 (height), input 'input' dim 3 (width): ") !=
                 std::string::npos,
             explained);
  // Some kernels' structure depends on how an extent divides (vector widths
  // and register blocks along a row), as torch.compile's kernels specialise
  // on alignment: the first extent of such a class compiles those few
  // kernels, later extents of it none. 32 and 48 share one class for all.
  struct Call {
    std::int64_t h, w;
    bool new_class;
  };
  for (const Call& call : {Call{48, 48, false}, Call{24, 40, true}, Call{40, 56, false}, Call{56, 16, true},
                           Call{16, 48, false}}) {
    const std::string at = "dynamic unet_small at " + std::to_string(call.h) + "x" + std::to_string(call.w);
    const kiln::Tensor image = generated_tensor("input", {1, 3, call.h, call.w});
    const kiln::Tensor out = compiled({image}).at(0);
    if (call.h == 48 && call.w == 48) check_close(out, want(".48"), at);
    else check_close(out, eager({image}).at(0), at + " (against eager)");
    const kiln::RunStats stats = compiled.stats();
    BOOST_TEST(stats.shape_sets == 1, at);
    // Kernels loaded anew: compiled, or read from the disk cache (an earlier run's).
    const int loaded = stats.kernel_cache_misses + stats.kernel_cache_hits;
    if (call.new_class)
      BOOST_TEST(loaded * 3 <= stats.kernels, at << ": " << loaded << " of " << stats.kernels << " kernels loaded again");
    else
      BOOST_TEST(loaded == 0, at << ": " << loaded << " kernels loaded again");
  }
  BOOST_TEST(compiled.explain().find("(6 input shape(s) served)") != std::string::npos, compiled.explain());
  try {
    compiled({generated_tensor("input", {1, 3, 72, 32})});
    BOOST_ERROR("expected the bounds to hold");
  } catch (const kiln::Error& e) {
    BOOST_TEST(e.kind() == kiln::ErrorKind::ShapeMismatch);
    BOOST_TEST(std::string(e.what()).find("input 'input' dim 2 is 72, outside the bounds [0, 64]") != std::string::npos,
               e.what());
  }
  try {
    kiln::compile(exported.model, {.backend = kiln::testing::test_backend(), .dynamic_dims = {{.input = "input", .dim = 1}}});
    BOOST_ERROR("expected a fixed dim to be refused");
  } catch (const kiln::Error& e) {
    BOOST_TEST(e.kind() == kiln::ErrorKind::InvalidArgument);
    BOOST_TEST(std::string(e.what()).find("input 'input' dim 1 is fixed at 3") != std::string::npos, e.what());
  }
}

// A new extent of a dynamic set, planned as the runtime plans it (the set's
// knobs, graph choices and plans given): each node takes its set's knobs
// by name in one lowering, every kernel is one of the set's (most as they
// are, taking the set's rendered source, which must be what rendering them
// again gives).
BOOST_AUTO_TEST_CASE(a_new_extent_shares_the_weights_lowers_once_and_takes_the_sets_sources) {
  const auto it = std::find_if(families().begin(), families().end(), [](const Family& f) { return f.name == "unet_small"; });
  BOOST_TEST_REQUIRE((it != families().end()));
  const kiln::Model model = load_export(*it, 32).model;
  const auto& source = kiln::internal::ModelAccess::shape_source(model);
  BOOST_TEST_REQUIRE(source != nullptr);
  auto graph_at = [&](std::int64_t h, std::int64_t w) {
    return kiln::internal::graph_ptr(source->instantiate({{1, 3, h, w}}));
  };
  // Every import of the file shares its initializers' storage (converted once).
  {
    const auto at32 = graph_at(32, 32);
    const auto at48 = graph_at(48, 48);
    std::map<std::string, const std::byte*> storage;
    for (const kiln::graph::Value& v : at32->values())
      if (v.constant) storage[v.name] = v.constant->bytes().data();
    std::size_t weights = 0, shared = 0;
    for (const kiln::graph::Value& v : at48->values()) {
      if (!v.constant || v.constant->nbytes() < 64) continue;
      ++weights;
      const auto it = storage.find(v.name);
      shared += it != storage.end() && it->second == v.constant->bytes().data() ? 1 : 0;
    }
    // The rest were folded at import (Constant nodes, reshaped scales): each import's own.
    BOOST_TEST(weights >= 8u);
    BOOST_TEST(shared * 4 >= weights * 3, shared << " of " << weights << " constants shared");
  }
  const kiln::backend::Backend& backend = kiln::backend::get_backend("null");
  const kiln::backend::TargetDesc target = backend.offline_targets().at(0);
  // The set at 32x32, its probe at 96x160 (as ShapeSets makes it).
  const auto probe = graph_at(96, 160);
  const std::shared_ptr<const kiln::compiler::Plan> set =
      kiln::compiler::build_plan(graph_at(32, 32), backend, target, {.model_name = "unet", .probe_graph = probe});
  BOOST_TEST_REQUIRE(!set->site_knobs.empty());
  for (const kiln::compiler::SiteKnobs& site : set->site_knobs) BOOST_TEST(!site.nodes.empty(), site.template_name);

  const std::shared_ptr<const kiln::compiler::Plan> extent =
      kiln::compiler::build_plan(graph_at(48, 48), backend, target,
                                 {.model_name = "unet", .probe_graph = probe, .pinned_sites = set->site_knobs,
                                  .pinned_choices = set->graph_choices, .set_plans = {set}});
  BOOST_TEST(extent->site_knobs.size() == set->site_knobs.size());
  for (std::size_t i = 0; i < std::min(extent->site_knobs.size(), set->site_knobs.size()); ++i) {
    const kiln::compiler::SiteKnobs& got = extent->site_knobs[i];
    BOOST_TEST(got.nodes == set->site_knobs[i].nodes, boost::test_tools::per_element());
    BOOST_TEST(got.knobs == set->site_knobs[i].knobs, got.template_name << " at " << got.nodes.front());
  }
  BOOST_TEST_REQUIRE(extent->kernels.size() == extent->rendered.size());
  BOOST_TEST(extent->set_kernel_use.size() == extent->kernels.size());
  std::size_t taken = 0;
  for (std::size_t k = 0; k < extent->kernels.size(); ++k) {
    const kiln::compiler::SetKernelUse use = extent->set_kernel_use.at(k);
    // Taken, or (where the probe happened to agree with 32 on a literal that 48 changes) generalised.
    BOOST_TEST((use != kiln::compiler::SetKernelUse::specialised), extent->kernels[k].name);
    taken += use == kiln::compiler::SetKernelUse::taken ? 1 : 0;
    // No kernel of a pinned site is marked as the user's override.
    if (extent->kernels[k].tuning_site) BOOST_TEST(!extent->kernels[k].tuning_site->overridden, extent->kernels[k].name);
    const kiln::backend::KernelSource fresh = kiln::render::make_kernel_source(extent->kernels[k], backend.language());
    BOOST_TEST(extent->rendered[k].source.text == fresh.text, extent->kernels[k].name);
    BOOST_TEST(extent->rendered[k].source.num_params == fresh.num_params, extent->kernels[k].name);
  }
  BOOST_TEST(taken * 2 > extent->kernels.size(), taken << " of " << extent->kernels.size() << " taken");
}

// Dynamic kernels against shape-specialised ones: each model compiled twice
// at one input shape, once for those extents only (automatic_dynamic off)
// and once with every symbolic input dim dynamic, called alternately; the
// outputs agree, and the median call times are printed side by side. The
// default is a smoke run; the figures in docs/benchmarks come from
// KILN_DYNAMIC_BENCH_ITERS=30 and KILN_DYNAMIC_BENCH_MODELS=resnet50,mobilenet_v2,unet_small.
BOOST_AUTO_TEST_CASE(dynamic_kernels_against_specialised_ones) {
  const char* iters_text = std::getenv("KILN_DYNAMIC_BENCH_ITERS");
  const int iters = iters_text ? std::max(1, std::atoi(iters_text)) : 3;
  const char* models_text = std::getenv("KILN_DYNAMIC_BENCH_MODELS");
  std::vector<std::string> models;
  std::istringstream list(models_text ? models_text : "mobilenet_v2,unet_small");
  for (std::string name; std::getline(list, name, ',');) models.push_back(name);
  for (const std::string& name : models) {
    const auto it = std::find_if(families().begin(), families().end(), [&](const Family& f) { return f.name == name; });
    BOOST_TEST_REQUIRE((it != families().end()), name);
    // Height and width made symbolic where the export fixed them (the
    // classifiers pool globally, so any size runs); the batch stays as exported.
    onnx::ModelProto proto;
    BOOST_TEST_REQUIRE(proto.ParseFromString(read_file(fixture_dir() / (name + ".onnx"))));
    auto* shape = proto.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->mutable_dim(2)->set_dim_param("height");
    shape->mutable_dim(3)->set_dim_param("width");
    generate_weights(proto, [](const std::string& input_name) { return input_name == "input"; });
    kiln::OnnxOptions options;
    options.input_shapes["input"] = {1, 3, it->image_size, it->image_size};
    const kiln::Model model = kiln::load_onnx_bytes(proto.SerializeAsString(), name + ".onnx", "", options);
    const kiln::TensorSpec input = model.inputs().at(0);
    const std::vector<kiln::DynamicDim> dims = {{.input = "input", .dim = 2}, {.input = "input", .dim = 3}};
    auto specialised = kiln::compile(model, {.backend = kiln::testing::test_backend(), .automatic_dynamic = false});
    auto dynamic = kiln::compile(model, {.backend = kiln::testing::test_backend(), .dynamic_dims = dims});
    const kiln::Tensor image = generated_tensor("input", input.shape);
    check_close(dynamic({image}).at(0), specialised({image}).at(0), name + ": dynamic against specialised");
    BOOST_TEST(dynamic.explain().find("dynamic dims: ") != std::string::npos);
    std::vector<double> specialised_ms, dynamic_ms;
    auto timed = [](auto& model, const kiln::Tensor& x) {
      const auto start = std::chrono::steady_clock::now();
      model({x});
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    };
    for (int i = 0; i < iters; ++i) {
      specialised_ms.push_back(timed(specialised, image));
      dynamic_ms.push_back(timed(dynamic, image));
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    std::cout << "dynamic_bench: " << name << " " << kiln::shape_str(input.shape) << ": specialised "
              << median(specialised_ms) << " ms, dynamic " << median(dynamic_ms) << " ms (median of " << iters
              << " calls each, alternating; dynamic/specialised " << median(dynamic_ms) / median(specialised_ms)
              << "); kernels " << specialised.stats().kernels << " vs " << dynamic.stats().kernels << std::endl;
  }
}

// A decoder-only transformer exported as transformers' exporters lay one out
// (hf_models.py's GPT2LMHeadModel: input_ids, attention_mask and per layer the
// past keys and values in; logits and the presents out; symbolic batch,
// sequence and past lengths), run as a generation loop runs it: a prefill of
// 5 tokens with a zero-length past, then two one-token decode steps, each fed
// the presents kiln returned the step before. Every step's outputs match
// PyTorch's, eagerly and compiled; compiled, each new shape set compiles once.
BOOST_AUTO_TEST_CASE(gpt2_tiny_prefill_and_decode_with_a_kv_cache) {
  onnx::ModelProto proto;
  BOOST_TEST_REQUIRE(proto.ParseFromString(read_file(fixture_dir() / "gpt2_tiny.onnx")));
  generate_weights(proto, [](const std::string& name) { return name.rfind("transformer.", 0) != 0; });
  const kiln::Model model = kiln::load_onnx_bytes(proto.SerializeAsString(), "gpt2_tiny.onnx", "", {});
  BOOST_TEST_REQUIRE(model.has_symbolic_dims());
  BOOST_TEST_REQUIRE(model.inputs().size() == 6u);
  BOOST_TEST(model.inputs()[0].symbolic_dims == (std::vector<std::string>{"batch", "sequence"}),
             boost::test_tools::per_element());
  BOOST_TEST(model.inputs()[2].symbolic_dims == (std::vector<std::string>{"batch", "", "past_sequence", ""}),
             boost::test_tools::per_element());

  auto fixture = [](const std::string& step, const std::string& name) {
    return kiln::load_npy((fixture_dir() / ("gpt2_tiny." + step + "." + name + ".npy")).string());
  };
  const std::vector<std::string> presents = {"present.0.key", "present.0.value", "present.1.key", "present.1.value"};
  // Prefill and two decode steps, each checked against PyTorch; returns
  // the last step's inputs and the key/value cache it returned.
  auto generate = [&](auto& run, const std::string& mode) {
    std::vector<kiln::Tensor> past(presents.size(), kiln::Tensor(kiln::DType::f32, {2, 4, 0, 8}));
    std::vector<kiln::Tensor> inputs;
    for (const std::string step : {"prefill", "decode0", "decode1"}) {
      inputs = {fixture(step, "input_ids"), fixture(step, "attention_mask")};
      inputs.insert(inputs.end(), past.begin(), past.end());
      const std::vector<kiln::Tensor> out = run(inputs);
      BOOST_TEST_REQUIRE(out.size() == 1 + presents.size());
      check_close(out[0], fixture(step, "logits"), "gpt2_tiny " + mode + " " + step + " logits");
      for (std::size_t i = 0; i < presents.size(); ++i)
        check_close(out[1 + i], fixture(step, presents[i]), "gpt2_tiny " + mode + " " + step + " " + presents[i]);
      past.assign(out.begin() + 1, out.end());
    }
    return std::pair(inputs, past);
  };
  auto eager = kiln::eager(model, {.backend = kiln::testing::test_backend()});
  generate(eager, "eager");
  auto compiled = kiln::compile(model, {.backend = kiln::testing::test_backend(), .fullgraph = true});
  const auto [last, past] = generate(compiled, "compiled");
  // Prefill (sequence 5, past 0), then the first decode step (sequence 1,
  // past 5), compiled with sequence and past dynamic (automatic_dynamic); the
  // next step (past 6) is served by it, compiling at most the few of the
  // set's kernels whose constants past 6 changes (the set's own were
  // parameterised against a probe of other extents).
  BOOST_TEST(compiled.stats().shape_sets == 2);
  BOOST_TEST(compiled.stats().kernel_cache_misses + compiled.stats().kernel_cache_hits <= 2);
  // Further decode steps (the same token again) match eager mode and are
  // served by the set. A step compiles only kernels whose structure its
  // extents change, once per such class: past 7 (8 keys, a multiple of 4:
  // vector loads along K) and past 8 (9 keys: a column tail of the
  // set's 2-column blocks) load at most one MatMul each; past 9 to 11
  // load nothing.
  std::vector<kiln::Tensor> step_past = past;
  std::map<std::int64_t, int> loaded;
  for (std::int64_t at = 7; at <= 11; ++at) {
    std::vector<kiln::Tensor> next = {last[0], kiln::Tensor(kiln::DType::i64, {2, at + 1})};
    for (std::int64_t& v : next[1].values<std::int64_t>()) v = 1;
    next.insert(next.end(), step_past.begin(), step_past.end());
    const std::vector<kiln::Tensor> got = compiled(next);
    const std::vector<kiln::Tensor> want = eager(next);
    BOOST_TEST_REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i)
      check_close(got[i], want[i], "gpt2_tiny decode at past " + std::to_string(at) + ", output " + std::to_string(i));
    loaded[at] = compiled.stats().kernel_cache_misses + compiled.stats().kernel_cache_hits;
    BOOST_TEST_MESSAGE("past " << at << ": " << loaded[at] << " kernels loaded");
    step_past.assign(got.begin() + 1, got.end());
  }
  BOOST_TEST(compiled.stats().shape_sets == 2);
  BOOST_TEST(loaded[7] <= 1);
  BOOST_TEST(loaded[8] <= 1);
  for (std::int64_t at = 9; at <= 11; ++at) BOOST_TEST(loaded[at] == 0, "past " << at << ": " << loaded[at] << " kernels loaded");
}

// The same export through kiln::Generator, as `kiln generate gpt2_tiny.onnx`
// runs it: the whole prompt in one call with an empty past, then a token per
// call fed the presents, which stay on the device. Greedy tokens equal
// PyTorch's running the same loop (make_fixtures.py's greedy_generation) for
// prompts of 1, 7 and 23 tokens and for the three as a left-padded batch, in
// eager, default and reduce-overhead modes; the export is compiled once.
BOOST_AUTO_TEST_CASE(gpt2_tiny_export_generates_as_pytorch) {
  onnx::ModelProto proto;
  BOOST_TEST_REQUIRE(proto.ParseFromString(read_file(fixture_dir() / "gpt2_tiny.onnx")));
  generate_weights(proto, [](const std::string& name) { return name.rfind("transformer.", 0) != 0; });
  const fs::path dir = fs::temp_directory_path() / ("kiln-gpt2-export-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path file = dir / "gpt2_tiny.onnx";
  std::ofstream(file, std::ios::binary) << proto.SerializeAsString();
  std::ifstream in(fixture_dir() / "gpt2_tiny.generate.json");
  const nlohmann::json expected = nlohmann::json::parse(in);
  const auto prompts = expected["prompts"].get<std::vector<std::vector<std::int64_t>>>();
  const auto tokens = expected["tokens"].get<std::vector<std::vector<std::int64_t>>>();
  const auto batch = expected["batch"].get<std::vector<std::vector<std::int64_t>>>();
  const std::int64_t new_tokens = expected["new_tokens"].get<std::int64_t>();

  const kiln::CausalLM lm = kiln::load_causal_lm(file.string());
  BOOST_TEST_REQUIRE(lm.onnx_export().has_value());
  BOOST_TEST(lm.config().architecture == "ONNX export");
  BOOST_TEST(lm.config().vocab_size == 96);
  BOOST_TEST(lm.config().num_layers == 2);
  BOOST_TEST(lm.config().num_kv_heads == 4);
  BOOST_TEST(lm.config().head_dim == 8);
  BOOST_CHECK_EXCEPTION(lm.forward_model(1, 4), kiln::Error, [](const kiln::Error& e) {
    return e.kind() == kiln::ErrorKind::Unsupported && std::string(e.what()).find("ONNX export") != std::string::npos;
  });
  const kiln::GenerationConfig greedy{.max_new_tokens = new_tokens, .stop_token_ids = std::vector<std::int64_t>{}};
  for (const std::string mode : {"eager", "default", "reduce-overhead"}) {
    kiln::GeneratorOptions options;
    options.compile.backend = kiln::testing::test_backend();
    options.compile.fullgraph = true;
    options.compile.mode = mode == "reduce-overhead" ? kiln::Mode::reduce_overhead : kiln::Mode::default_;
    options.eager = mode == "eager";
    kiln::Generator generator(lm, options);
    for (std::size_t p = 0; p < prompts.size(); ++p) {
      const kiln::GenerationResult r = generator.generate(prompts[p], greedy);
      BOOST_TEST(r.tokens == tokens[p], mode << ": prompt of " << prompts[p].size());
      BOOST_TEST(r.stats.compiles == 1);
      // A step moves its token and the attention mask (past and new token)
      // up and one row of logits down; the presents stay on the device.
      const auto longest = static_cast<std::int64_t>(prompts[p].size());
      BOOST_TEST(r.stats.step_uploaded_bytes == (1 + longest + new_tokens - 1) * sizeof(std::int64_t));
      BOOST_TEST(r.stats.step_downloaded_bytes == 96 * sizeof(float));
    }
    const std::vector<kiln::GenerationResult> rows = generator.generate_batch(prompts, greedy);
    BOOST_TEST_REQUIRE(rows.size() == batch.size());
    for (std::size_t r = 0; r < rows.size(); ++r) BOOST_TEST(rows[r].tokens == batch[r], mode << ": batch row " << r);
  }
  fs::remove_all(dir);
}

// A file that is not a decoder export is refused naming what it lacks.
BOOST_AUTO_TEST_CASE(an_onnx_file_without_a_cache_is_not_a_causal_lm) {
  BOOST_CHECK_EXCEPTION(kiln::load_causal_lm((fixture_dir() / "mobilenet_v2.onnx").string()), kiln::Error,
                        [](const kiln::Error& e) {
                          BOOST_TEST_MESSAGE(e.what());
                          return e.kind() == kiln::ErrorKind::Unsupported &&
                                 std::string(e.what()).find("is not one a decoder export's generation loop feeds") !=
                                     std::string::npos;
                        });
}

// A streaming speech model (make_fixtures.py's speech_rnn): a log-mel front
// end (a strided Conv1d with a windowed DFT basis, power, mel bank, log), a
// two-layer LSTM and a bidirectional GRU, exported with symbolic batch and
// sample count. Two audio chunks of different lengths run in order, the
// second fed the LSTM and GRU states kiln returned for the first; every
// output of both chunks matches PyTorch's, eagerly, compiled and replayed.
BOOST_AUTO_TEST_CASE(speech_rnn_carries_its_states_across_chunks) {
  onnx::ModelProto proto;
  BOOST_TEST_REQUIRE(proto.ParseFromString(read_file(fixture_dir() / "speech_rnn.onnx")));
  std::map<std::string, int> ops;
  for (const onnx::NodeProto& node : proto.graph().node()) ++ops[node.op_type()];
  BOOST_TEST(ops["LSTM"] == 2);
  BOOST_TEST(ops["GRU"] == 1);
  const std::set<std::string> data = {"audio", "h", "c", "g"};
  generate_weights(proto, [&](const std::string& name) { return data.count(name) != 0; });
  const kiln::Model model = kiln::load_onnx_bytes(proto.SerializeAsString(), "speech_rnn.onnx", "", {});
  BOOST_TEST_REQUIRE(model.has_symbolic_dims());
  BOOST_TEST(model.inputs()[0].symbolic_dims == (std::vector<std::string>{"batch", "samples"}),
             boost::test_tools::per_element());

  auto fixture = [](const std::string& chunk, const std::string& name) {
    return kiln::load_npy((fixture_dir() / ("speech_rnn." + chunk + "." + name + ".npy")).string());
  };
  const std::vector<std::string> outputs = {"logits", "h_out", "c_out", "g_out"};
  auto stream = [&](auto& run, const std::string& how) {
    std::vector<kiln::Tensor> states = {fixture("chunk0", "h"), fixture("chunk0", "c"), fixture("chunk0", "g")};
    for (const std::string chunk : {"chunk0", "chunk1"}) {
      std::vector<kiln::Tensor> inputs = {fixture(chunk, "audio")};
      inputs.insert(inputs.end(), states.begin(), states.end());
      const std::vector<kiln::Tensor> out = run(inputs);
      BOOST_TEST_REQUIRE(out.size() == outputs.size());
      for (std::size_t i = 0; i < outputs.size(); ++i) {
        const kiln::Tensor want = fixture(chunk, outputs[i]);
        BOOST_TEST_REQUIRE((out[i].shape() == want.shape()), how << " " << chunk << " " << outputs[i]);
        float worst = 0;
        for (std::int64_t k = 0; k < want.numel(); ++k)
          worst = std::max(worst, std::fabs(out[i].values<float>()[k] - want.values<float>()[k]));
        BOOST_TEST(worst <= 1e-4f * std::max(1.0f, max_abs(want.values<float>())),
                   how << " " << chunk << " " << outputs[i] << ": max |kiln - torch| = " << worst);
      }
      states.assign(out.begin() + 1, out.end());
    }
  };
  auto eager = kiln::eager(model, {.backend = kiln::testing::test_backend()});
  stream(eager, "eager");
  for (const kiln::Mode mode : {kiln::Mode::default_, kiln::Mode::reduce_overhead}) {
    auto compiled = kiln::compile(model, {.backend = kiln::testing::test_backend(), .mode = mode, .fullgraph = true});
    stream(compiled, std::string("compiled ") + std::string(kiln::mode_name(mode)));
  }
}

// torchvision's SSDLite exported whole (make_fixtures.py's ssdlite320_detections):
// the image in; resizing, the network and the post-processing (per-class
// thresholds and top-k from data-dependent shapes, batched NMS behind an If
// whose condition is read at run time) to boxes, scores and labels out. The
// post-processing runs as host steps between compiled segments, the branch
// the If takes compiled as a model of its own; the detections match
// PyTorch's, and fullgraph names the breaks, the If among them.
BOOST_AUTO_TEST_CASE(ssdlite320_whole_export_with_post_processing) {
  onnx::ModelProto proto;
  BOOST_TEST_REQUIRE(proto.ParseFromString(read_file(fixture_dir() / "ssdlite320_detections.onnx")));
  generate_weights(proto, [](const std::string& name) { return name == "input"; });
  const kiln::Model model = kiln::load_onnx_bytes(proto.SerializeAsString(), "ssdlite320_detections.onnx", "", {});
  const kiln::Tensor image = generated_tensor("input", {1, 3, 64, 64}).reshaped({3, 64, 64});
  auto want = [](const std::string& name) {
    return kiln::load_npy((fixture_dir() / ("ssdlite320_detections." + name + ".npy")).string());
  };
  auto compiled = kiln::compile(model, {.backend = kiln::testing::test_backend()});
  const std::vector<kiln::Tensor> out = compiled({image});
  BOOST_TEST_REQUIRE(out.size() == 3u);
  // With generated weights hundreds of scores lie within 1e-6 of another,
  // closer than f32 arithmetic in two orders agrees on, so detections are
  // matched as a set: each of PyTorch's has one of kiln's with its label, a
  // score within 1e-4 and a box within 2e-3 of the image size. Only the
  // candidates tied at the 300-detection cutoff may differ.
  const kiln::Tensor boxes = want("boxes"), scores = want("scores"), labels = want("labels");
  const std::int64_t count = scores.shape().at(0);
  BOOST_TEST_REQUIRE((out[0].shape() == kiln::Shape{count, 4}));
  BOOST_TEST_REQUIRE((out[1].shape() == kiln::Shape{count}));
  BOOST_TEST_REQUIRE((out[2].shape() == kiln::Shape{count}));
  const auto got_boxes = out[0].values<float>(), got_scores = out[1].values<float>();
  const auto got_labels = out[2].values<std::int64_t>();
  const auto want_boxes = boxes.values<float>(), want_scores = scores.values<float>();
  const auto want_labels = labels.values<std::int64_t>();
  std::vector<bool> used(static_cast<std::size_t>(count), false);
  std::int64_t matched = 0, unmatched_above_cutoff = 0;
  const float cutoff = want_scores[static_cast<std::size_t>(count - 1)];
  for (std::int64_t i = 0; i < count; ++i) {
    bool found = false;
    for (std::int64_t j = 0; j < count && !found; ++j) {
      if (used[j] || got_labels[j] != want_labels[i] || std::fabs(got_scores[j] - want_scores[i]) > 1e-4f) continue;
      float worst = 0;
      for (int c = 0; c < 4; ++c) worst = std::max(worst, std::fabs(got_boxes[j * 4 + c] - want_boxes[i * 4 + c]));
      if (worst <= 2e-3f * 64) found = used[j] = true;
    }
    matched += found;
    if (!found && want_scores[i] > cutoff + 1e-4f) ++unmatched_above_cutoff;
  }
  BOOST_TEST_MESSAGE("ssdlite320 detections: " << matched << " of " << count << " match PyTorch's");
  BOOST_TEST(unmatched_above_cutoff == 0);
  BOOST_TEST(matched >= count - count / 50);
  bool listed_if = false;
  for (const auto& b : kiln::internal::engine(compiled).graph_breaks())
    listed_if = listed_if || (b.op == "If" && b.reason.find("control flow") != std::string::npos);
  BOOST_TEST(listed_if);
  // The branch the If took (batched NMS) ran as a compiled model of its own.
  const std::string explained = compiled.explain();
  const bool branch_compiled = explained.find("/then': compiled, ") != std::string::npos ||
                               explained.find("/else': compiled, ") != std::string::npos;
  BOOST_TEST(branch_compiled, explained);
}

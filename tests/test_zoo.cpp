#define BOOST_TEST_MODULE zoo
#include <boost/test/unit_test.hpp>

#include <kiln/builder.h>
#include <kiln/kiln.h>

#include "graph/ir.h"
#include "graph/op_registry.h"
#include "src/runtime/device_profile.h"
#include "src/runtime/executor.h"
#include "src/runtime/internal_access.h"
#include "src/zoo/backbones.h"
#include "test_backend.h"

#include <optional>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <tuple>

// The built-in model zoo: architecture checks (parameter counts equal to
// torchvision's, node counts derived from each architecture), determinism,
// and small runs comparing the reference implementation with eager and
// compiled execution on Vulkan. One suite per family; sizes stay small so CI
// stays fast (`kiln run` exercises 224x224).

// zoo_<backend> runs only where its backend can (exit 77 otherwise).
struct SkipWithoutBackend {
  SkipWithoutBackend() { kiln::testing::skip_unless_named_backend_runs(); }
};
BOOST_TEST_GLOBAL_FIXTURE(SkipWithoutBackend);

namespace {

// The message of the InvalidArgument error building `name` with `options`
// throws, or "no error".
std::string message_of(const std::string& name, const kiln::models::ModelOptions& options) {
  try {
    kiln::models::build(name, options);
  } catch (const kiln::Error& e) {
    BOOST_TEST((e.kind() == kiln::ErrorKind::InvalidArgument));
    return std::string(e.what());
  }
  return std::string("no error");
}

kiln::Tensor ramp_input(const kiln::Shape& shape) {
  kiln::Tensor t(kiln::DType::f32, shape);
  auto v = t.values<float>();
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37f * static_cast<float>(i)) * 1.5f;
  return t;
}

float max_abs(const kiln::Tensor& t) {
  float m = 0;
  for (float v : t.values<float>()) m = std::max(m, std::fabs(v));
  return m;
}

// The last component of a dotted name ("layer1.0.bn1.running_mean" -> "running_mean").
std::string leaf_name(const std::string& name) {
  const auto dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

// What torch's model.parameters() counts: learnable tensors, not BN running
// statistics nor helper constants (the attention scale).
std::int64_t parameter_count(const kiln::Model& model) {
  static const std::set<std::string> kParameterLeaves = {"weight",        "bias",        "in_proj_weight",
                                                         "in_proj_bias",  "class_token", "pos_embedding",
                                                         "layer_scale"};
  std::int64_t count = 0;
  for (const auto& v : kiln::internal::graph(model).values())
    if (v.constant && kParameterLeaves.count(leaf_name(v.name))) count += v.constant->numel();
  return count;
}

std::map<std::string, int> op_counts(const kiln::Model& model) {
  std::map<std::string, int> counts;
  for (const auto& node : kiln::internal::graph(model).nodes()) ++counts[node.op];
  return counts;
}

void check_op_counts(const kiln::Model& model, const std::map<std::string, int>& expected) {
  const auto counts = op_counts(model);
  for (const auto& [op, n] : expected) {
    const auto it = counts.find(op);
    BOOST_TEST_CONTEXT(model.name() << " op " << op) { BOOST_TEST((it == counts.end() ? 0 : it->second) == n); }
  }
  int total = 0;
  for (const auto& [op, n] : expected) total += n;
  BOOST_TEST_CONTEXT(model.name() << " total nodes") { BOOST_TEST(static_cast<int>(kiln::internal::graph(model).nodes().size()) >= total); }
}

void check_classifier_io(const kiln::Model& model, std::int64_t batch, std::int64_t size, std::int64_t classes) {
  BOOST_TEST(model.task() == "classification");
  const auto inputs = model.inputs();
  const auto outputs = model.outputs();
  BOOST_REQUIRE_EQUAL(inputs.size(), 1u);
  BOOST_REQUIRE_EQUAL(outputs.size(), 1u);
  BOOST_TEST(inputs[0].name == "input");
  BOOST_TEST(inputs[0].shape == (kiln::Shape{batch, 3, size, size}));
  BOOST_TEST(outputs[0].name == "logits");
  BOOST_TEST(outputs[0].shape == (kiln::Shape{batch, classes}));
}

// Same seed: the same graph and bit-identical weights; another seed: other weights.
void check_deterministic(const std::string& name, const kiln::models::ModelOptions& options) {
  const auto a = kiln::models::build(name, options);
  const auto b = kiln::models::build(name, options);
  auto other_options = options;
  other_options.seed = options.seed + 1;
  const auto c = kiln::models::build(name, other_options);
  BOOST_TEST(kiln::internal::graph(a).to_string() == kiln::internal::graph(b).to_string());
  BOOST_TEST(kiln::internal::graph(a).to_string() == kiln::internal::graph(c).to_string());
  const auto& va = kiln::internal::graph(a).values();
  const auto& vb = kiln::internal::graph(b).values();
  const auto& vc = kiln::internal::graph(c).values();
  BOOST_REQUIRE_EQUAL(va.size(), vb.size());
  BOOST_REQUIRE_EQUAL(va.size(), vc.size());
  int differing = 0;
  int constants = 0;
  for (std::size_t i = 0; i < va.size(); ++i) {
    if (!va[i].constant) continue;
    ++constants;
    BOOST_REQUIRE(vb[i].constant && vc[i].constant);
    BOOST_TEST(kiln::max_abs_diff(*va[i].constant, *vb[i].constant) == 0.0f);
    if (kiln::max_abs_diff(*va[i].constant, *vc[i].constant) > 0.0f) ++differing;
  }
  // Every random tensor changes with the seed; helper scalars do not.
  BOOST_TEST(differing > constants / 2);
}

// Every kernel the compiled model planned fits its target's limits, every
// binding its largest buffer; under KILN_DEVICE_PROFILE (the zoo's
// android-baseline test) the target is the profile's, clamped.
void check_within_limits(const kiln::CompiledModel& compiled) {
  const kiln::Executor& engine = kiln::internal::engine(compiled);
  const kiln::compiler::Plan& plan = *engine.plan();
  const kiln::backend::TargetDesc& t = plan.target;
  if (const kiln::runtime::DeviceProfile* profile = kiln::runtime::profile_from_environment()) {
    BOOST_TEST(t.limits_profile == profile->name);
    BOOST_TEST(t.max_workgroup_invocations <= profile->max_workgroup_invocations);
    BOOST_TEST(t.max_shared_memory_bytes <= profile->max_shared_memory_bytes);
    BOOST_TEST(t.max_buffer_bytes <= profile->max_buffer_bytes);
    BOOST_TEST(t.max_kernel_param_bytes <= profile->max_kernel_param_bytes);
  }
  for (const kiln::compiler::RenderedKernel& k : plan.rendered) {
    BOOST_TEST_CONTEXT("kernel " << k.requirements.kernel_name) {
      BOOST_TEST(k.requirements.workgroup_size <= t.max_workgroup_invocations);
      BOOST_TEST(k.requirements.shared_memory_bytes <= t.max_shared_memory_bytes);
      BOOST_TEST((t.max_kernel_param_bytes == 0 || k.requirements.param_bytes <= t.max_kernel_param_bytes));
      BOOST_TEST((k.requirements.subgroup_size == 0 || t.subgroup_basic));
    }
  }
  for (const auto& dispatch : engine.dispatches())
    for (const kiln::graph::ValueId v : dispatch.values)
      if (const auto where = engine.placement(v)) BOOST_TEST(where->bytes <= t.max_buffer_bytes);
}

// The model in kiln::testing::test_dtype(), and the bound on |backend -
// reference| relative to an output's scale (docs/precision.md: f32 1e-3; a
// 16-bit model, against the reference's 16-bit rule, 16 epsilons of its type,
// as rounding differences of one unit add up along a deep network; TF32
// products, against the f32 reference, as f16).
kiln::Model in_test_dtype(const kiln::Model& model) {
  const std::string dtype = kiln::testing::test_dtype();
  if (dtype.empty() || dtype == "tf32") return model;
  BOOST_TEST_REQUIRE((dtype == "f16" || dtype == "bf16"), "KILN_TEST_DTYPE=" << dtype);
  return model.with_float_type(dtype == "f16" ? kiln::DType::f16 : kiln::DType::bf16);
}

// tf32: the f32 model with its products' inputs rounded to TF32 where the
// device's matrix units take them (the precision settings, set by the
// caller), 16 epsilons of TF32's 10-bit mantissa, as f16's.
float relative_tolerance() {
  const std::string dtype = kiln::testing::test_dtype();
  return dtype == "f16" || dtype == "tf32" ? 16 * 0x1p-10f : dtype == "bf16" ? 16 * 0x1p-7f : 1e-3f;
}

// The f32 model's reference outputs, and the largest magnitude of any float
// tensor it computed on the way.
struct F32Run {
  std::vector<kiln::Tensor> outputs;
  float largest = 0;
};

F32Run f32_reference(const kiln::Model& declared, const kiln::Tensor& x) {
  F32Run run;
  run.outputs = kiln::graph::run_reference(
      kiln::internal::graph(declared), std::vector<kiln::Tensor>{x},
      [&](const kiln::graph::Node&, std::span<const kiln::Tensor> results) {
        for (const kiln::Tensor& t : results)
          if (t.dtype() == kiln::DType::f32) run.largest = std::max(run.largest, max_abs(t));
      });
  return run;
}

// Whether the model's values leave f16's range (65504) in f32, so that in
// f16 it must overflow (as PyTorch's model.half() does): then its 16-bit
// reference has an infinity or NaN in an output, which the check asserts
// and logs instead of comparing. The zoo's random weights take DETR's
// attention scores to about 1.6e6.
bool overflows_f16(const std::string& name, const F32Run& f32, const std::vector<kiln::Tensor>& want) {
  if (kiln::testing::test_dtype() != "f16" || f32.largest <= 65504.0f) return false;
  bool non_finite = false;
  for (const kiln::Tensor& t : want)
    for (float v : t.values<float>()) non_finite = non_finite || !std::isfinite(v);
  BOOST_TEST(non_finite, name << ": f32 values reach " << f32.largest << ", yet the f16 model's outputs are finite");
  BOOST_TEST_MESSAGE(name << ": f32 values reach " << f32.largest << ", past f16's range: its f16 outputs overflow");
  return true;
}

// A 16-bit model's compiled outputs against its f32 twin's reference: within
// the same bound of the f32 output's scale (docs/precision.md).
void check_against_f32(const std::string& name, const F32Run& run, const std::vector<kiln::Tensor>& got) {
  if (kiln::testing::test_dtype().empty()) return;
  const std::vector<kiln::Tensor>& f32 = run.outputs;
  BOOST_REQUIRE_EQUAL(f32.size(), got.size());
  for (std::size_t i = 0; i < f32.size(); ++i) {
    BOOST_TEST(kiln::max_abs_diff(got[i], f32[i]) <= relative_tolerance() * std::max(1.0f, max_abs(f32[i])),
               name << " output " << i << " against the f32 model");
    BOOST_TEST_MESSAGE(name << " output " << i << " in " << kiln::testing::test_dtype() << ": max |compiled - f32 reference| "
                            << kiln::max_abs_diff(got[i], f32[i]) << " (largest |f32 output| " << max_abs(f32[i])
                            << ")");
  }
}

// Reference vs eager vs compiled (kiln::testing::test_backend()) on a small input.
void check_runs(const std::string& name, const kiln::models::ModelOptions& options, bool fullgraph) {
  const auto declared = kiln::models::build(name, options);
  const auto model = in_test_dtype(declared);
  const auto x = ramp_input({options.batch, 3, options.image_size, options.image_size});
  const auto want = kiln::graph::run_reference(kiln::internal::graph(model), std::vector<kiln::Tensor>{x});
  BOOST_REQUIRE_EQUAL(want.size(), 1u);
  const F32Run f32 = kiln::testing::test_dtype().empty() ? F32Run{} : f32_reference(declared, x);
  if (overflows_f16(name, f32, want)) return;
  // Relative to the largest logit: some heads (MobileNetV2's N(0, 0.01)) give small logits.
  const float scale = max_abs(want[0]);
  BOOST_REQUIRE(scale > 0.0f);
  const float tolerance = relative_tolerance() * scale;
  // The logits must carry signal: not constant across classes.
  auto w = want[0].values<float>();
  BOOST_TEST(*std::max_element(w.begin(), w.end()) - *std::min_element(w.begin(), w.end()) > 1e-3f);

  auto eager = kiln::eager(model, {.backend = kiln::testing::test_backend()});
  const auto e = eager({x});
  BOOST_TEST(kiln::max_abs_diff(e[0], want[0]) <= tolerance);

  auto compiled = kiln::compile(model, {.backend = kiln::testing::test_backend(), .fullgraph = fullgraph});
  const auto c = compiled({x});
  BOOST_TEST(kiln::max_abs_diff(c[0], want[0]) <= tolerance);
  check_within_limits(compiled);
  check_against_f32(name, f32, c);
  BOOST_TEST_MESSAGE(name << ": largest |logit| " << scale << ", eager diff " << kiln::max_abs_diff(e[0], want[0])
                          << ", compiled diff " << kiln::max_abs_diff(c[0], want[0]));
  BOOST_TEST_MESSAGE(name << ": eager " << eager.stats().dispatches_per_run << " dispatches, compiled "
                          << compiled.stats().dispatches_per_run << " dispatches, "
                          << compiled.stats().host_steps_per_run << " host steps");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(classification)

BOOST_AUTO_TEST_CASE(every_family_is_listed) {
  const auto names = kiln::models::names();
  for (const char* name : {"resnet50", "mobilenet_v2", "efficientnet_b0", "convnext_tiny", "vit_b_16"})
    BOOST_TEST_CONTEXT(name) { BOOST_TEST(std::count(names.begin(), names.end(), name) == 1); }
}

BOOST_AUTO_TEST_CASE(short_aliases_build_the_large_variants) {
  const kiln::Model alias = kiln::models::build("deeplabv3_mobilenet_v3", {.image_size = 32});
  const kiln::Model canonical = kiln::models::build("deeplabv3_mobilenet_v3_large", {.image_size = 32});
  BOOST_TEST(alias.name() == "deeplabv3_mobilenet_v3_large");
  BOOST_TEST(kiln::internal::graph(alias).nodes().size() == kiln::internal::graph(canonical).nodes().size());
  BOOST_TEST(kiln::models::build("lraspp_mobilenet_v3", {.image_size = 32}).name() == "lraspp_mobilenet_v3_large");
  const auto names = kiln::models::names();
  BOOST_TEST(std::count(names.begin(), names.end(), "deeplabv3_mobilenet_v3") == 0);  // listed once, canonically
  BOOST_CHECK_EXCEPTION(kiln::models::build("deeplabv3_mobilenet"), kiln::Error, [](const kiln::Error& e) {
    return e.kind() == kiln::ErrorKind::NotFound &&
           std::string(e.what()).find("deeplabv3_mobilenet_v3_large") != std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(bad_options_name_the_model) {
  BOOST_TEST(message_of("vit_b_16", {.image_size = 40}).find("vit_b_16: image_size must be a multiple of 16") !=
             std::string::npos);
  BOOST_TEST(message_of("convnext_tiny", {.image_size = 16}).find("convnext_tiny: image_size") != std::string::npos);
  BOOST_TEST(message_of("resnet50", {.batch = 0}).find("resnet50: batch") != std::string::npos);
  BOOST_TEST(message_of("mobilenet_v2", {.num_classes = -3}).find("mobilenet_v2: num_classes") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE(resnet50)

BOOST_AUTO_TEST_CASE(architecture_matches_torchvision) {
  const auto model = kiln::models::build("resnet50", {.image_size = 64});
  check_classifier_io(model, 1, 64, 1000);
  BOOST_TEST(parameter_count(model) == 25'557'032);
  // 1 stem conv, 16 bottlenecks of 3 convs, 4 downsample convs; a ReLU after
  // the stem and 3 per bottleneck.
  check_op_counts(model, {{"Conv", 53}, {"BatchNormalization", 53}, {"Relu", 49}, {"Add", 16}, {"MaxPool", 1},
                          {"GlobalAveragePool", 1}, {"Flatten", 1}, {"Gemm", 1}});
  // torchvision's state_dict names.
  std::set<std::string> names;
  for (const auto& v : kiln::internal::graph(model).values()) names.insert(v.name);
  for (const char* key : {"conv1.weight", "layer1.0.downsample.0.weight", "layer3.5.bn3.running_var",
                          "layer4.2.conv3.weight", "fc.weight", "fc.bias"})
    BOOST_TEST_CONTEXT(key) { BOOST_TEST(names.count(key) == 1u); }
}

BOOST_AUTO_TEST_CASE(trunk_dilation_keeps_resolution) {
  for (const auto& [dilate3, dilate4, size3, size4] :
       {std::tuple{false, false, 4, 2}, std::tuple{false, true, 4, 4}, std::tuple{true, true, 8, 8}}) {
    kiln::Builder b("trunk");
    auto x = b.input("input", kiln::DType::f32, {1, 3, 64, 64});
    std::vector<kiln::Builder::Value> stages;
    auto y = kiln::models::resnet50_trunk(b, 0, x, dilate3, dilate4, &stages);
    BOOST_REQUIRE_EQUAL(stages.size(), 4u);
    BOOST_TEST(b.shape(stages[0]) == (kiln::Shape{1, 256, 16, 16}));
    BOOST_TEST(b.shape(stages[1]) == (kiln::Shape{1, 512, 8, 8}));
    BOOST_TEST(b.shape(stages[2]) == (kiln::Shape{1, 1024, size3, size3}));
    BOOST_TEST(b.shape(y) == (kiln::Shape{1, 2048, size4, size4}));
    const auto model = b.build({y});
    // torchvision: the first block of a dilated stage keeps the previous dilation.
    std::map<std::string, std::vector<std::int64_t>> dilations;
    for (const auto& node : kiln::internal::graph(model).nodes())
      if (node.op == "Conv") dilations[node.name] = node.attrs.get_ints("dilations", {1, 1});
    BOOST_TEST(dilations.at("layer3.0.conv2")[0] == 1);
    BOOST_TEST(dilations.at("layer3.1.conv2")[0] == (dilate3 ? 2 : 1));
    BOOST_TEST(dilations.at("layer4.0.conv2")[0] == (dilate3 ? 2 : 1));
    BOOST_TEST(dilations.at("layer4.2.conv2")[0] == (dilate4 ? (dilate3 ? 4 : 2) : 1));
  }
}

BOOST_AUTO_TEST_CASE(deterministic) { check_deterministic("resnet50", {.image_size = 32, .num_classes = 10}); }

BOOST_AUTO_TEST_CASE(reference_eager_compiled_agree) {
  check_runs("resnet50", {.image_size = 32, .num_classes = 100, .seed = 3}, true);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(mobilenet_v2)

BOOST_AUTO_TEST_CASE(architecture_matches_torchvision) {
  const auto model = kiln::models::build("mobilenet_v2", {.image_size = 64});
  check_classifier_io(model, 1, 64, 1000);
  BOOST_TEST(parameter_count(model) == 3'504'872);
  // Stem, 17 inverted residuals (the first without expansion: 2 convs, the
  // others 3), last 1x1 conv; ReLU6 after every conv but the projections; a
  // residual in every block after the first of its stage (stride 1, same width).
  check_op_counts(model, {{"Conv", 52}, {"BatchNormalization", 52}, {"Clip", 35}, {"Add", 10},
                          {"GlobalAveragePool", 1}, {"Flatten", 1}, {"Gemm", 1}});
}

BOOST_AUTO_TEST_CASE(deterministic) { check_deterministic("mobilenet_v2", {.image_size = 32, .num_classes = 10}); }

BOOST_AUTO_TEST_CASE(reference_eager_compiled_agree) {
  check_runs("mobilenet_v2", {.batch = 2, .image_size = 32, .num_classes = 100, .seed = 4}, true);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(efficientnet_b0)

BOOST_AUTO_TEST_CASE(architecture_matches_torchvision) {
  const auto model = kiln::models::build("efficientnet_b0", {.image_size = 64});
  check_classifier_io(model, 1, 64, 1000);
  BOOST_TEST(parameter_count(model) == 5'288'548);
  // 16 MBConv blocks (the first without expansion): each has a depthwise conv,
  // two squeeze-excitation convs and a projection; SiLU = Sigmoid + Mul.
  check_op_counts(model, {{"Conv", 81}, {"BatchNormalization", 49}, {"Sigmoid", 65}, {"Mul", 65}, {"Add", 9},
                          {"GlobalAveragePool", 17}, {"Flatten", 1}, {"Gemm", 1}});
}

BOOST_AUTO_TEST_CASE(deterministic) {
  check_deterministic("efficientnet_b0", {.image_size = 32, .num_classes = 10});
}

BOOST_AUTO_TEST_CASE(reference_eager_compiled_agree) {
  check_runs("efficientnet_b0", {.image_size = 32, .num_classes = 100, .seed = 5}, true);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(convnext_tiny)

BOOST_AUTO_TEST_CASE(architecture_matches_torchvision) {
  const auto model = kiln::models::build("convnext_tiny", {.image_size = 64});
  check_classifier_io(model, 1, 64, 1000);
  BOOST_TEST(parameter_count(model) == 28'589'128);
  // 18 CNBlocks (depthwise conv, LayerNorm, 2 Linear = MatMul + Add, GELU,
  // layer scale, residual), stem and 3 downsamples with a LayerNorm2d each
  // (Transpose, LayerNormalization, Transpose), and the head's LayerNorm2d.
  check_op_counts(model, {{"Conv", 22}, {"LayerNormalization", 23}, {"Gelu", 18}, {"MatMul", 36},
                          {"Transpose", 46}, {"Mul", 18}, {"Add", 54}, {"GlobalAveragePool", 1}, {"Gemm", 1}});
}

BOOST_AUTO_TEST_CASE(deterministic) { check_deterministic("convnext_tiny", {.image_size = 32, .num_classes = 10}); }

BOOST_AUTO_TEST_CASE(reference_eager_compiled_agree) {
  check_runs("convnext_tiny", {.image_size = 32, .num_classes = 100, .seed = 6}, true);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(vit_b_16)

BOOST_AUTO_TEST_CASE(architecture_matches_torchvision) {
  // The position embedding holds one row per token: count at 224 (196 patches + class token).
  const auto model = kiln::models::build("vit_b_16", {.image_size = 224});
  check_classifier_io(model, 1, 224, 1000);
  BOOST_TEST(parameter_count(model) == 86'567'656);
  // 12 encoder layers: 2 LayerNorms, attention (packed q/k/v projection, 3
  // Gathers, 2 MatMuls, Softmax, output projection), MLP (2 Linear, GELU).
  check_op_counts(model, {{"Conv", 1}, {"LayerNormalization", 25}, {"MatMul", 72}, {"Softmax", 12}, {"Gelu", 12},
                          {"Gather", 37}, {"Expand", 1}, {"Concat", 1}, {"Add", 73}, {"Mul", 12}, {"Gemm", 1}});
}

BOOST_AUTO_TEST_CASE(token_count_follows_image_size) {
  for (const std::int64_t size : {32, 64}) {
    const auto model = kiln::models::build("vit_b_16", {.batch = 2, .image_size = size, .num_classes = 7});
    check_classifier_io(model, 2, size, 7);
    const std::int64_t tokens = (size / 16) * (size / 16) + 1;
    bool found = false;
    for (const auto& v : kiln::internal::graph(model).values())
      if (v.name == "encoder.pos_embedding") {
        found = true;
        BOOST_TEST(v.type.shape == (kiln::Shape{1, tokens, 768}));
      }
    BOOST_TEST(found);
  }
}

BOOST_AUTO_TEST_CASE(deterministic) { check_deterministic("vit_b_16", {.image_size = 32, .num_classes = 10}); }

BOOST_AUTO_TEST_CASE(reference_eager_compiled_agree) {
  check_runs("vit_b_16", {.image_size = 32, .num_classes = 100, .seed = 7}, true);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE_END()  // classification

// ---- Segmentation and detection families -----------------------------------

#include "src/zoo/layers.h"  // LayerWriter, to build the MobileNetV3 backbone alone

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace {

bool has_value_named(const kiln::Model& model, const std::string& name) {
  const auto& values = kiln::internal::graph(model).values();
  return std::any_of(values.begin(), values.end(), [&](const auto& v) { return v.name == name; });
}

void check_dense_io(const kiln::Model& model, const std::string& task, std::int64_t batch, std::int64_t size,
                    const std::vector<kiln::TensorSpec>& expected_outputs) {
  BOOST_TEST(model.task() == task);
  const auto inputs = model.inputs();
  const auto outputs = model.outputs();
  BOOST_REQUIRE_EQUAL(inputs.size(), 1u);
  BOOST_TEST(inputs[0].name == "input");
  BOOST_TEST(inputs[0].shape == (kiln::Shape{batch, 3, size, size}));
  BOOST_REQUIRE_EQUAL(outputs.size(), expected_outputs.size());
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    BOOST_TEST(outputs[i].name == expected_outputs[i].name);
    BOOST_TEST(outputs[i].shape == expected_outputs[i].shape);
  }
}

// Reference vs eager vs compiled (kiln::testing::test_backend()), every
// output within relative_tolerance() of its scale. Returns the reference's
// outputs; none for an f16 model whose values overflow the type.
std::vector<kiln::Tensor> check_dense_runs(const std::string& name, const kiln::models::ModelOptions& options,
                                           bool fullgraph) {
  const auto declared = kiln::models::build(name, options);
  const auto model = in_test_dtype(declared);
  const auto x = ramp_input({options.batch, 3, options.image_size, options.image_size});
  const auto want = kiln::graph::run_reference(kiln::internal::graph(model), std::vector<kiln::Tensor>{x});
  BOOST_REQUIRE_EQUAL(want.size(), model.outputs().size());
  const F32Run f32 = kiln::testing::test_dtype().empty() ? F32Run{} : f32_reference(declared, x);
  if (overflows_f16(name, f32, want)) return {};
  auto eager = kiln::eager(model, {.backend = kiln::testing::test_backend()});
  const auto e = eager({x});
  auto compiled = kiln::compile(model, {.backend = kiln::testing::test_backend(), .fullgraph = fullgraph});
  const auto c = compiled({x});
  check_within_limits(compiled);
  check_against_f32(name, f32, c);
  BOOST_REQUIRE_EQUAL(e.size(), want.size());
  BOOST_REQUIRE_EQUAL(c.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    BOOST_TEST_CONTEXT(name << " output " << i) {
      const float tolerance = relative_tolerance() * std::max(1.0f, max_abs(want[i]));
      auto w = want[i].values<float>();
      BOOST_TEST(*std::max_element(w.begin(), w.end()) - *std::min_element(w.begin(), w.end()) > 1e-4f);
      BOOST_TEST(kiln::max_abs_diff(e[i], want[i]) <= tolerance);
      BOOST_TEST(kiln::max_abs_diff(c[i], want[i]) <= tolerance);
    }
  }
  BOOST_TEST_MESSAGE(name << ": eager " << eager.stats().dispatches_per_run << " dispatches, compiled "
                          << compiled.stats().dispatches_per_run << " dispatches, "
                          << compiled.stats().host_steps_per_run << " host steps");
  return want;
}

// torchvision's mobilenet_v3_large has 5,483,032 parameters; its classifier
// (Linear 960->1280, Linear 1280->1000) holds 2,511,080 of them.
constexpr std::int64_t kMobileNetV3LargeFeatureParameters = 5'483'032 - 2'511'080;

// Op counts of MobileNetV3-Large's features: a stem conv; 15 inverted
// residuals (14 with an expansion conv, each with a depthwise and a projection
// conv, 8 with squeeze-excitation: pool, 2 convs, ReLU, HardSigmoid, Mul); a
// last 1x1 conv. HardSwish after the stem, the last conv and the expansion and
// depthwise convs of the 9 "HS" blocks; ReLU on the 11 convs of the 6 "RE"
// blocks and in each SE; residuals in the 10 stride-1 blocks that keep width.
const std::map<std::string, int> kMobileNetV3Ops = {{"Conv", 62}, {"BatchNormalization", 46}, {"HardSwish", 20},
                                                    {"Relu", 19}, {"HardSigmoid", 8}, {"GlobalAveragePool", 8},
                                                    {"Mul", 8},   {"Add", 10}};

struct CliResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  BOOST_REQUIRE_MESSAGE(value != nullptr, name << " is not set (run through meson test)");
  return value;
}

// `kiln <args>` from the source root, as a user runs it.
CliResult run_kiln(const std::string& args) {
  const std::string command =
      "cd '" + environment("KILN_SOURCE_ROOT") + "' && '" + environment("KILN_BINARY") + "' " + args + " 2>&1";
  CliResult r;
  FILE* pipe = popen(command.c_str(), "r");
  BOOST_REQUIRE(pipe != nullptr);
  std::array<char, 4096> buffer{};
  while (std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe)) r.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  BOOST_TEST_MESSAGE("$ kiln " << args << "\n" << r.output);
  return r;
}

// A new empty directory for one test's files.
std::filesystem::path fresh_directory(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("kiln_zoo_" + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Width and height from a PNG's IHDR chunk; {0, 0} if it is not a PNG.
std::pair<std::uint32_t, std::uint32_t> png_size(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<unsigned char, 24> header{};
  if (!in.read(reinterpret_cast<char*>(header.data()), header.size()) || header[1] != 'P' || header[12] != 'I')
    return {0, 0};
  const auto be32 = [&](std::size_t at) {
    return std::uint32_t{header[at]} << 24 | std::uint32_t{header[at + 1]} << 16 | std::uint32_t{header[at + 2]} << 8 |
           std::uint32_t{header[at + 3]};
  };
  return {be32(16), be32(20)};
}

std::map<std::string, int> plus(std::map<std::string, int> counts, const std::map<std::string, int>& more) {
  for (const auto& [op, n] : more) counts[op] += n;
  return counts;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(segmentation)

BOOST_AUTO_TEST_CASE(every_family_is_listed) {
  const auto names = kiln::models::names();
  for (const char* name : {"deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large", "fcn_resnet50", "segformer_b0"})
    BOOST_TEST_CONTEXT(name) { BOOST_TEST(std::count(names.begin(), names.end(), name) == 1); }
}

BOOST_AUTO_TEST_CASE(bad_options_name_the_model) {
  BOOST_TEST(message_of("segformer_b0", {.image_size = 16}).find("segformer_b0: image_size must be >= 32") !=
             std::string::npos);
  BOOST_TEST(message_of("fcn_resnet50", {.batch = 0}).find("fcn_resnet50: batch") != std::string::npos);
  BOOST_TEST(message_of("lraspp_mobilenet_v3_large", {.num_classes = -1})
                 .find("lraspp_mobilenet_v3_large: num_classes") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(mobilenet_v3_backbone_dilates_its_last_stage) {
  for (const bool dilated : {false, true}) {
    kiln::Builder b("features");
    kiln::models::LayerWriter w(b, 0);
    auto x = b.input("input", kiln::DType::f32, {1, 3, 64, 64});
    std::vector<kiln::Builder::Value> taps;
    auto y = kiln::models::mobilenet_v3_large_features(w, x, dilated, &taps);
    BOOST_REQUIRE_EQUAL(taps.size(), 17u);
    BOOST_TEST(b.shape(taps[4]) == (kiln::Shape{1, 40, 8, 8}));
    BOOST_TEST(b.shape(taps[12]) == (kiln::Shape{1, 112, 4, 4}));
    const std::int64_t last = dilated ? 4 : 2;
    BOOST_TEST(b.shape(y) == (kiln::Shape{1, 960, last, last}));
    const auto model = b.build({y});
    BOOST_TEST(parameter_count(model) == kMobileNetV3LargeFeatureParameters);
    check_op_counts(model, kMobileNetV3Ops);
    int depthwise_convs = 0;
    for (const auto& node : kiln::internal::graph(model).nodes())
      if (node.name == "13.block.1.0") {
        ++depthwise_convs;
        BOOST_TEST(node.attrs.get_ints("dilations", {1, 1})[0] == (dilated ? 2 : 1));
        BOOST_TEST(node.attrs.get_int("group", 1) == 672);  // features.13 widens 112 -> 672
      }
    BOOST_TEST(depthwise_convs == 1);
    // BatchNorm eps 0.001 as torchvision's MobileNetV3.
    for (const auto& node : kiln::internal::graph(model).nodes())
      if (node.op == "BatchNormalization") BOOST_TEST(std::fabs(node.attrs.get_float("epsilon", 0) - 1e-3) < 1e-8);
  }
}

BOOST_AUTO_TEST_SUITE(deeplabv3_mobilenet_v3_large)

BOOST_AUTO_TEST_CASE(architecture_matches_torchvision) {
  const auto model = kiln::models::build("deeplabv3_mobilenet_v3_large", {.image_size = 64});
  check_dense_io(model, "segmentation", 1, 64, {{"out", kiln::DType::f32, {1, 21, 64, 64}}});
  // torchvision's 11,029,328 includes aux_classifier = FCNHead(40, 21):
  // 3x3 conv 40->10 (3,600), BN (20), 1x1 conv 10->21 with bias (231).
  BOOST_TEST(parameter_count(model) == 11'029'328 - 3'851);
  // DeepLabHead: ASPP (1x1 branch, 3 atrous branches, pooling branch with its
  // upsampling, project after the Concat), a 3x3 conv, the classifier; and the
  // final upsampling to the input size.
  check_op_counts(model, plus(kMobileNetV3Ops, {{"Conv", 8}, {"BatchNormalization", 7}, {"Relu", 7},
                                                {"GlobalAveragePool", 1}, {"Concat", 1}, {"Resize", 2}}));
  for (const char* key : {"backbone.0.0.weight", "backbone.16.1.running_var", "backbone.13.block.2.fc1.bias",
                          "classifier.0.convs.3.0.weight", "classifier.0.convs.4.1.weight",
                          "classifier.0.project.0.weight", "classifier.4.bias"})
    BOOST_TEST_CONTEXT(key) { BOOST_TEST(has_value_named(model, key)); }
  for (const auto& node : kiln::internal::graph(model).nodes())
    if (node.op == "Resize") {
      BOOST_TEST(node.attrs.get_string("mode", "") == "linear");
      BOOST_TEST(node.attrs.get_string("coordinate_transformation_mode", "") == "pytorch_half_pixel");
    }
}

BOOST_AUTO_TEST_CASE(deterministic) {
  check_deterministic("deeplabv3_mobilenet_v3_large", {.image_size = 32, .num_classes = 5});
}

BOOST_AUTO_TEST_CASE(reference_eager_compiled_agree) {
  check_dense_runs("deeplabv3_mobilenet_v3_large", {.image_size = 64, .num_classes = 6, .seed = 11}, false);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(lraspp_mobilenet_v3_large)

BOOST_AUTO_TEST_CASE(architecture_matches_torchvision) {
  const auto model = kiln::models::build("lraspp_mobilenet_v3_large", {.batch = 2, .image_size = 64});
  check_dense_io(model, "segmentation", 2, 64, {{"out", kiln::DType::f32, {2, 21, 64, 64}}});
  // torchvision's figure; LR-ASPP has no aux classifier.
  BOOST_TEST(parameter_count(model) == 3'221'538);
  // LRASPPHead: cbr (conv, BN, ReLU), scale (pool, conv, Sigmoid), gate Mul,
  // upsampling to the low features, two classifiers summed; the final upsampling.
  check_op_counts(model, plus(kMobileNetV3Ops, {{"Conv", 4}, {"BatchNormalization", 1}, {"Relu", 1}, {"Sigmoid", 1},
                                                {"GlobalAveragePool", 1}, {"Mul", 1}, {"Add", 1}, {"Resize", 2}}));
  for (const char* key : {"classifier.cbr.0.weight", "classifier.scale.1.weight", "classifier.low_classifier.bias",
                          "classifier.high_classifier.weight"})
    BOOST_TEST_CONTEXT(key) { BOOST_TEST(has_value_named(model, key)); }
}

BOOST_AUTO_TEST_CASE(deterministic) {
  check_deterministic("lraspp_mobilenet_v3_large", {.image_size = 32, .num_classes = 5});
}

BOOST_AUTO_TEST_CASE(reference_eager_compiled_agree) {
  check_dense_runs("lraspp_mobilenet_v3_large", {.batch = 2, .image_size = 64, .num_classes = 4, .seed = 12}, false);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(fcn_resnet50)

BOOST_AUTO_TEST_CASE(architecture_matches_torchvision) {
  const auto model = kiln::models::build("fcn_resnet50", {.image_size = 64});
  check_dense_io(model, "segmentation", 1, 64, {{"out", kiln::DType::f32, {1, 21, 64, 64}}});
  // torchvision's 35,322,218 includes aux_classifier = FCNHead(1024, 21):
  // 3x3 conv 1024->256 (2,359,296), BN (512), 1x1 conv 256->21 (5,397).
  BOOST_TEST(parameter_count(model) == 35'322'218 - 2'365'205);
  // The ResNet-50 trunk (53 convs and BNs, 49 ReLUs, 16 residuals) and FCNHead
  // (3x3 conv, BN, ReLU, 1x1 classifier); one upsampling.
  check_op_counts(model, {{"Conv", 55}, {"BatchNormalization", 54}, {"Relu", 50}, {"Add", 16}, {"MaxPool", 1},
                          {"Resize", 1}});
  // Output stride 8: layer3 and layer4 dilated.
  int head_convs = 0;
  for (const auto& node : kiln::internal::graph(model).nodes())
    if (node.name == "classifier.0") {
      ++head_convs;
      BOOST_TEST(kiln::internal::graph(model).value(node.inputs[0]).type.shape == (kiln::Shape{1, 2048, 8, 8}));
    }
  BOOST_TEST(head_convs == 1);
  BOOST_TEST(has_value_named(model, "backbone.layer4.2.conv2.weight"));
  BOOST_TEST(has_value_named(model, "classifier.4.bias"));
}

BOOST_AUTO_TEST_CASE(deterministic) { check_deterministic("fcn_resnet50", {.image_size = 32, .num_classes = 5}); }

BOOST_AUTO_TEST_CASE(reference_eager_compiled_agree) {
  check_dense_runs("fcn_resnet50", {.image_size = 32, .num_classes = 4, .seed = 13}, false);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(segformer_b0)

BOOST_AUTO_TEST_CASE(architecture_matches_hugging_face) {
  const auto model = kiln::models::build("segformer_b0", {.image_size = 64});
  // Logits at a quarter of the input, 150 ADE20k classes by default.
  check_dense_io(model, "segmentation", 1, 64, {{"logits", kiln::DType::f32, {1, 150, 16, 16}}});
  // HF's SegformerForSemanticSegmentation (nvidia/mit-b0, 150 labels).
  BOOST_TEST(parameter_count(model) == 3'752'694);
  // 8 layers: 2 LayerNorms, q/k/v/output Linear (MatMul + Add), 2 attention
  // MatMuls, scale Mul, Softmax, Mix-FFN (2 Linear, depthwise conv, GELU), 2
  // residual Adds; spatial reduction (conv + LayerNorm) in the 6 layers of
  // stages 1-3; per stage a patch-embedding conv with its LayerNorm and a
  // closing LayerNorm; the decode head's 4 Linear, 4 upsamplings, Concat,
  // fuse conv, BN, ReLU, classifier.
  check_op_counts(model, {{"Conv", 20}, {"LayerNormalization", 30}, {"MatMul", 68}, {"Add", 68}, {"Mul", 8},
                          {"Softmax", 8}, {"Gelu", 8}, {"Resize", 4}, {"Concat", 1}, {"BatchNormalization", 1},
                          {"Relu", 1}});
  for (const char* key : {"segformer.encoder.patch_embeddings.0.proj.weight",
                          "segformer.encoder.block.0.1.attention.self.sr.weight",
                          "segformer.encoder.block.3.1.mlp.dwconv.dwconv.weight",
                          "segformer.encoder.layer_norm.3.bias", "decode_head.linear_c.2.proj.weight",
                          "decode_head.linear_fuse.weight", "decode_head.classifier.bias"})
    BOOST_TEST_CONTEXT(key) { BOOST_TEST(has_value_named(model, key)); }
  BOOST_TEST(!has_value_named(model, "segformer.encoder.block.3.0.attention.self.sr.weight"));
}

BOOST_AUTO_TEST_CASE(deterministic) { check_deterministic("segformer_b0", {.image_size = 32, .num_classes = 5}); }

BOOST_AUTO_TEST_CASE(reference_eager_compiled_agree) {
  check_dense_runs("segformer_b0", {.batch = 2, .image_size = 64, .num_classes = 7, .seed = 14}, false);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(kiln_run_summarises_and_writes_the_mask) {
  const auto dir = fresh_directory("segmentation");
  const auto r = run_kiln("run --model segformer_b0 --image-size 32 --iters 0 --output-dir '" + dir.string() + "'");
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.output.find("segmentation mask 8x8, 150 classes; largest by area:") != std::string::npos);
  BOOST_TEST(r.output.find("% of pixels") != std::string::npos);
  const auto mask = dir / "segformer_b0_mask.png";
  BOOST_TEST(r.output.find("mask written to " + mask.string()) != std::string::npos);
  BOOST_TEST((png_size(mask) == std::pair<std::uint32_t, std::uint32_t>{8, 8}));
  BOOST_TEST(!std::filesystem::exists(mask.string() + ".tmp"));
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()  // segmentation

BOOST_AUTO_TEST_SUITE(detection)

BOOST_AUTO_TEST_SUITE(detr_resnet50)

BOOST_AUTO_TEST_CASE(architecture_matches_detr) {
  const auto model = kiln::models::build("detr_resnet50", {.batch = 2, .image_size = 96});
  check_dense_io(model, "detection", 2, 96,
                 {{"logits", kiln::DType::f32, {2, 100, 92}}, {"boxes", kiln::DType::f32, {2, 100, 4}}});
  // ResNet-50 trunk 23,508,032 (BN affine included; HF freezes them as
  // buffers), projection 524,544, 6 encoder layers of 1,315,072, 6 decoder
  // layers of 1,578,752, decoder LayerNorm 512, queries 25,600, class head
  // 23,644, box MLP 132,612.
  BOOST_TEST(parameter_count(model) == 41'577'888);
  // Attention: 6 encoder self, 6 decoder self, 6 cross = 18, each with 4
  // Linear (MatMul + Add), 2 MatMuls, a scale Mul, a Softmax, a residual Add
  // and position Adds (one for self-attention's q = k, two for cross); 12
  // FFNs (2 Linear, residual); class head and box MLP (4 Linear); the trunk's
  // 16 residuals.
  check_op_counts(model, {{"Conv", 54}, {"MatMul", 18 * 6 + 12 * 2 + 4}, {"Softmax", 18}, {"Mul", 18},
                          {"LayerNormalization", 6 * 2 + 6 * 3 + 1}, {"Sigmoid", 1},
                          {"Add", 16 + 12 * (4 + 1 + 1) + 6 * (4 + 2 + 1) + 12 * 3 + 4}});
  for (const char* key : {"model.backbone.conv_encoder.model.layer4.2.conv3.weight", "model.input_projection.weight",
                          "model.encoder.layers.5.self_attn.q_proj.weight",
                          "model.decoder.layers.0.encoder_attn.v_proj.bias",
                          "model.decoder.layernorm.weight", "model.query_position_embeddings.weight",
                          "class_labels_classifier.bias", "bbox_predictor.layers.2.weight"})
    BOOST_TEST_CONTEXT(key) { BOOST_TEST(has_value_named(model, key)); }
}

BOOST_AUTO_TEST_CASE(sine_position_embedding_follows_detr) {
  const auto model = kiln::models::build("detr_resnet50", {.image_size = 96});
  const kiln::Tensor* pos = nullptr;
  for (const auto& v : kiln::internal::graph(model).values())
    if (v.name == "model.position_embeddings") pos = &*v.constant;
  BOOST_REQUIRE(pos != nullptr);
  BOOST_REQUIRE(pos->shape() == (kiln::Shape{1, 9, 256}));  // a 3x3 map at 96 pixels
  const auto p = pos->values<float>();
  const double two_pi = 2 * 3.14159265358979323846;
  // Token (y=1, x=2): channel 0 = sin(2pi * 2/3), channel 1 = cos(same),
  // channel 128 = sin(2pi * 3/3); channels 2, 3 use 10000^(2/128).
  const std::size_t token = 1 * 3 + 2;
  const auto near = [](float got, double want) { return std::fabs(static_cast<double>(got) - want) < 1e-5; };
  BOOST_TEST(near(p[token * 256 + 0], std::sin(two_pi * 2 / 3)));
  BOOST_TEST(near(p[token * 256 + 1], std::cos(two_pi * 2 / 3)));
  BOOST_TEST(near(p[token * 256 + 2], std::sin(two_pi * 2 / 3 / std::pow(10000.0, 2.0 / 128))));
  BOOST_TEST(near(p[token * 256 + 128], std::sin(two_pi)));
  BOOST_TEST(near(p[token * 256 + 129], std::cos(two_pi)));
}

BOOST_AUTO_TEST_CASE(options_are_checked) {
  try {
    kiln::models::build("detr_resnet50", {.image_size = 16});
    BOOST_FAIL("expected an error");
  } catch (const kiln::Error& e) {
    BOOST_TEST(std::string(e.what()).find("detr_resnet50: image_size must be >= 32") != std::string::npos);
  }
  const auto names = kiln::models::names();
  BOOST_TEST(std::count(names.begin(), names.end(), "detr_resnet50") == 1);
}

BOOST_AUTO_TEST_CASE(deterministic) { check_deterministic("detr_resnet50", {.image_size = 32, .num_classes = 5}); }

BOOST_AUTO_TEST_CASE(reference_eager_compiled_agree) {
  const auto want = check_dense_runs("detr_resnet50", {.image_size = 64, .num_classes = 9, .seed = 15}, false);
  if (want.empty()) return;  // f16 overflows this model's values (checked and logged)
  BOOST_REQUIRE_EQUAL(want.size(), 2u);
  BOOST_TEST(want[0].shape() == (kiln::Shape{1, 100, 10}));
  // Boxes come out of a sigmoid: normalised coordinates.
  const auto boxes = want[1].values<float>();
  BOOST_TEST(std::all_of(boxes.begin(), boxes.end(), [](float v) { return v > 0.0f && v < 1.0f; }));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(ssdlite320_mobilenet_v3_large)

// torchvision's mobilenet_v3_large(reduced_tail=True).features: 1,620,512 parameters.
constexpr std::int64_t kReducedTailFeatureParameters = 1'620'512;

std::optional<kiln::Shape> constant_shape(const kiln::Model& model, const std::string& name) {
  for (const auto& v : kiln::internal::graph(model).values())
    if (v.constant && v.name == name) return kiln::Shape(v.type.shape);
  return std::nullopt;
}

BOOST_AUTO_TEST_CASE(backbone_splits_at_the_c4_expansion) {
  kiln::Builder b("features");
  kiln::models::LayerWriter w(b, 0);
  auto x = b.input("input", kiln::DType::f32, {1, 3, 64, 64});
  const auto parts = kiln::models::mobilenet_v3_large_split_features(w, x, 13, /*reduced_tail=*/true);
  // Stride 16: features.13's expansion runs before its strided depthwise conv.
  BOOST_TEST(b.shape(parts.expansion) == (kiln::Shape{1, 672, 4, 4}));
  BOOST_TEST(b.shape(parts.last) == (kiln::Shape{1, 480, 2, 2}));
  const auto model = b.build({parts.expansion, parts.last});
  // Splitting moves layers, it adds or drops none: MobileNetV3's op counts.
  BOOST_TEST(parameter_count(model) == kReducedTailFeatureParameters);
  check_op_counts(model, kMobileNetV3Ops);
  for (const auto& [name, shape] : std::vector<std::pair<std::string, kiln::Shape>>{
           {"0.12.block.3.0.weight", {112, 672, 1, 1}},
           {"0.13.0.weight", {672, 112, 1, 1}},
           {"0.13.1.running_var", {672}},
           {"1.0.1.0.weight", {672, 1, 5, 5}},
           {"1.0.2.fc1.weight", {168, 672, 1, 1}},
           {"1.0.3.0.weight", {80, 672, 1, 1}},
           {"1.2.block.0.0.weight", {480, 80, 1, 1}},
           {"1.3.0.weight", {480, 80, 1, 1}}})
    BOOST_TEST_CONTEXT(name) {
      const std::optional<kiln::Shape> got = constant_shape(model, name);
      BOOST_TEST_REQUIRE(got.has_value());
      BOOST_TEST(*got == shape);
    }
  BOOST_TEST(!has_value_named(model, "0.13.block.0.0.weight"));
  BOOST_TEST(!has_value_named(model, "1.0.block.1.0.weight"));
}

BOOST_AUTO_TEST_CASE(backbone_split_needs_an_expansion_and_no_residual) {
  for (const auto& [split, reason] : std::vector<std::pair<int, std::string>>{
           {1, "features.1 has no expansion conv to split at"},
           {14, "features.14 has a residual connection across the split"},
           {16, "split must name an inverted residual (1..15), got 16"}}) {
    kiln::Builder b("features");
    kiln::models::LayerWriter w(b, 0);
    auto x = b.input("input", kiln::DType::f32, {1, 3, 64, 64});
    try {
      kiln::models::mobilenet_v3_large_split_features(w, x, split, true);
      BOOST_ERROR("expected an error for split " << split);
    } catch (const kiln::Error& e) {
      BOOST_TEST((e.kind() == kiln::ErrorKind::InvalidArgument));
      BOOST_TEST(std::string(e.what()).find(reason) != std::string::npos, e.what());
    }
  }
}

BOOST_AUTO_TEST_CASE(architecture_matches_torchvision) {
  const auto model = kiln::models::build("ssdlite320_mobilenet_v3_large", {.image_size = 320});
  BOOST_TEST(model.task() == "detection");
  // torchvision's ssdlite320_mobilenet_v3_large(weights_backbone=None), 91
  // classes: 3,440,060 (backbone features 1,620,512, extra blocks 452,160,
  // head 1,367,388).
  BOOST_TEST(parameter_count(model) == 3'440'060);
  // Conv: MobileNetV3's 62, 4 extra blocks of 3, and per feature map a
  // depthwise + 1x1 pair in each of the two heads. Clip (ReLU6): extra
  // blocks and heads, then the box decoding's 2 scale clamps and 4 clips to
  // the image. Box decoding: 6 Add and 8 Mul. Per foreground class (90): a
  // NonZero, a TopK, and a Mul + Add making its label column; batched NMS
  // offsets boxes by class with one more Mul and Add.
  check_op_counts(model, plus(kMobileNetV3Ops, {{"Conv", 12 + 6 * 2 * 2},
                                                {"BatchNormalization", 12 + 6 * 2},
                                                {"Clip", 12 + 6 * 2 + 2 + 4},
                                                {"Add", 6 + 90 + 1},
                                                {"Mul", 8 + 90 + 1},
                                                {"Softmax", 1},
                                                {"NonZero", 90},
                                                {"TopK", 90},
                                                {"NonMaxSuppression", 1}}));
  for (const auto& [name, shape] : std::vector<std::pair<std::string, kiln::Shape>>{
           {"backbone.features.0.13.0.weight", {672, 112, 1, 1}},
           {"backbone.features.1.0.3.0.weight", {80, 672, 1, 1}},
           {"backbone.features.1.3.0.weight", {480, 80, 1, 1}},
           {"backbone.extra.0.0.0.weight", {256, 480, 1, 1}},
           {"head.classification_head.module_list.0.0.0.weight", {672, 1, 3, 3}},
           {"head.classification_head.module_list.0.1.weight", {6 * 91, 672, 1, 1}},
           {"head.regression_head.module_list.1.1.weight", {6 * 4, 480, 1, 1}},
           {"head.regression_head.module_list.5.1.bias", {6 * 4}},
           // DefaultBoxGenerator at 320: 6 anchors on 20x20, 10x10, 5x5, 3x3, 2x2 and 1x1 maps.
           {"postprocess.anchors", {6 * (400 + 100 + 25 + 9 + 4 + 1), 4}}})
    BOOST_TEST_CONTEXT(name) {
      const std::optional<kiln::Shape> got = constant_shape(model, name);
      BOOST_TEST_REQUIRE(got.has_value());
      BOOST_TEST(*got == shape);
    }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(kiln_run_lists_and_draws_the_boxes) {
  const auto dir = fresh_directory("detection");
  const std::string image = "data/images/chelsea.png";
  const auto r = run_kiln("run --model detr_resnet50 --image-size 32 --iters 0 --image " + image + " --output-dir '" +
                          dir.string() + "'");
  BOOST_TEST(r.exit_code == 0);
  // Seeded weights rarely pass the threshold; then the best 5 are shown, marked.
  const bool above = r.output.find("detections with score >= 0.50") != std::string::npos;
  const bool below = r.output.find("the best 5, BELOW the threshold") != std::string::npos;
  BOOST_TEST((above || below));
  BOOST_TEST(r.output.find("box x ") != std::string::npos);
  const auto drawn = dir / "detr_resnet50_detections.png";
  BOOST_TEST(r.output.find("boxes drawn on " + drawn.string()) != std::string::npos);
  // Drawn on the original photograph, at its size.
  const auto original = png_size(std::filesystem::path(environment("KILN_SOURCE_ROOT")) / image);
  BOOST_TEST(original.first > 0u);
  BOOST_TEST((png_size(drawn) == original));
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(kiln_run_reads_a_detection_list) {
  // SSDLite ends in its own post-processing: boxes (pixels of its input),
  // scores and labels, not per-query logits.
  const auto dir = fresh_directory("detection_list");
  const std::string image = "data/images/chelsea.png";
  const auto r = run_kiln("run --model ssdlite320_mobilenet_v3_large --image-size 64 --iters 0 --image " + image +
                          " --output-dir '" + dir.string() + "'");
  BOOST_TEST(r.exit_code == 0, r.output);
  const bool listed = r.output.find("detections with score >= 0.50") != std::string::npos ||
                      r.output.find("BELOW the threshold") != std::string::npos;
  const bool empty = r.output.find("no detections") != std::string::npos;
  BOOST_TEST((listed || empty), r.output);
  if (listed) {
    BOOST_TEST(r.output.find("box x ") != std::string::npos);
    const auto drawn = dir / "ssdlite320_mobilenet_v3_large_detections.png";
    BOOST_TEST((png_size(drawn) == png_size(std::filesystem::path(environment("KILN_SOURCE_ROOT")) / image)));
  }
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()  // detection

#define BOOST_TEST_MODULE attention
#include <boost/test/unit_test.hpp>

// Attention as one kernel: the Attention op's reference against a case
// computed by hand and its shape errors; the attention kernel against the
// reference on the test backend (Vulkan unless KILN_TEST_BACKEND names
// another) for ViT-, SegFormer- and DETR-like shapes (sizes that
// are no multiple of any block, Lq != Lk, masks, K given transposed) and for
// the offline CUDA/HIP targets; recognise_attention on the built-in ViT,
// SegFormer and DETR and on torch's exports of them (one Attention per
// attention layer); and compiled == eager on the built-in models.

#include "test_backend.h"
#include "backends/registry.h"
#include "graph/ir.h"
#include "graph/op_registry.h"
#include "graph/passes/passes.h"
#include "src/kernel/ir.h"
#include "src/lower/lower.h"
#include "src/render/cstyle.h"
#include "src/runtime/internal_access.h"

#include <kiln/error.h>
#include <kiln/kiln.h>
#include <kiln/models.h>
#include <kiln/onnx.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kb = kiln::backend;
namespace kir = kiln::kir;
using kiln::DType;
using kiln::Shape;
using kiln::Tensor;
using kiln::graph::Graph;
using kiln::graph::Node;
using kiln::graph::TensorType;

namespace {

// Fixed-seed values in [-1, 1) times `scale`.
Tensor random_tensor(const Shape& shape, std::uint64_t seed, float scale = 1.0f) {
  Tensor t(DType::f32, shape);
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& v : t.values<float>()) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = scale * static_cast<float>(static_cast<double>(state >> 40) / double(1ull << 24) * 2.0 - 1.0);
  }
  return t;
}

// An Attention node over `count` inputs (ids 0.., so has_input sees them).
Node attention_node(std::size_t count, double scale, bool k_transposed) {
  Node node;
  node.op = "Attention";
  node.name = "attention";
  for (std::size_t i = 0; i < count; ++i) node.inputs.push_back(static_cast<kiln::graph::ValueId>(i));
  node.outputs = {static_cast<kiln::graph::ValueId>(count)};
  node.attrs.set("scale", scale);
  node.attrs.set("k_transposed", std::int64_t{k_transposed ? 1 : 0});
  return node;
}

std::vector<TensorType> types_of(const std::vector<Tensor>& tensors) {
  std::vector<TensorType> types;
  for (const Tensor& t : tensors) types.push_back({t.dtype(), t.shape()});
  return types;
}

Tensor reference(const Node& node, const std::vector<Tensor>& inputs) {
  return kiln::graph::get_op("Attention").reference(node, inputs)[0];
}

// [.., a, b] -> [.., b, a]
Tensor swap_last_two(const Tensor& t) {
  Shape shape = t.shape();
  const std::size_t rank = shape.size();
  const std::int64_t a = shape[rank - 2], b = shape[rank - 1];
  std::swap(shape[rank - 2], shape[rank - 1]);
  Tensor out(DType::f32, shape);
  auto x = t.values<float>();
  auto y = out.values<float>();
  const std::int64_t batch = t.numel() / (a * b);
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t i = 0; i < a; ++i)
      for (std::int64_t j = 0; j < b; ++j) y[(n * b + j) * a + i] = x[(n * a + i) * b + j];
  return out;
}

// The device the kernels run on: the test backend's (Vulkan unless
// KILN_TEST_BACKEND names another; the suite needs one).
struct KernelRunner {
  const kb::Backend& backend = kb::get_backend(kiln::testing::test_backend());
  std::shared_ptr<kb::Device> device;

  KernelRunner() {
    const auto reason = backend.unavailable_reason();
    BOOST_TEST_REQUIRE(!reason.has_value(), backend.name() << " is unavailable: " << reason.value_or(""));
    device = backend.create_device(0);
  }

  // Runs `kernel` on `inputs` (one per buffer but the last, the output of `output_elements`).
  std::vector<float> run(const kir::Kernel& kernel, const std::vector<Tensor>& inputs, std::int64_t output_elements) {
    const kb::KernelSource source = kiln::render::make_kernel_source(kernel, backend.language());
    auto loaded = device->load_kernel(source, backend.compiler().compile(source, device->target()));
    std::vector<std::shared_ptr<kb::Buffer>> storage;
    std::vector<kb::BufferBinding> bindings;
    for (const Tensor& t : inputs) {
      const std::uint64_t bytes = static_cast<std::uint64_t>(t.numel()) * sizeof(float);
      storage.push_back(device->allocate(bytes));
      device->upload(*storage.back(), 0, std::as_bytes(t.values<float>()));
      bindings.push_back({storage.back().get(), 0, bytes});
    }
    std::vector<float> out(static_cast<std::size_t>(output_elements), NAN);
    const std::uint64_t out_bytes = out.size() * sizeof(float);
    storage.push_back(device->allocate(out_bytes));
    device->upload(*storage.back(), 0, std::as_bytes(std::span(out)));
    bindings.push_back({storage.back().get(), 0, out_bytes});
    auto list = device->create_command_list();
    list->dispatch(*loaded, kir::dispatch_grid(kernel, device->target().max_workgroup_count[0]), bindings);
    list->finish();
    list->submit();
    device->download(*storage.back(), 0, std::as_writable_bytes(std::span(out)));
    return out;
  }
};

KernelRunner& device_runner() {
  static KernelRunner runner;
  return runner;
}

// The lowered kernel of an Attention node on `inputs`.
kir::Kernel lower(const Node& node, const std::vector<Tensor>& inputs) {
  const std::vector<TensorType> in = types_of(inputs);
  const std::vector<TensorType> out = kiln::graph::infer_node(node, in);
  const auto reason = kiln::lower::unsupported_reason(node, in, out);
  BOOST_TEST_REQUIRE(!reason.has_value(), reason.value_or(""));
  return *kiln::lower::lower_node(node, in, out).kernel;
}

struct KernelCase {
  std::string what;
  Shape q, k, v;  // K as [.., Lk, D]
  std::optional<Shape> mask;
  bool k_transposed;
};

void check_kernel(const KernelCase& c) {
  std::vector<Tensor> inputs = {random_tensor(c.q, 1, 2.0f), random_tensor(c.k, 2, 2.0f), random_tensor(c.v, 3)};
  if (c.k_transposed) inputs[1] = swap_last_two(inputs[1]);
  if (c.mask) {
    // Mostly 0 with some keys masked by a large negative value, as DETR's padding mask.
    Tensor mask = random_tensor(*c.mask, 4);
    for (float& m : mask.values<float>()) m = m < -0.6f ? -1e9f : 0.5f * m;
    inputs.push_back(mask);
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.q.back()));
  const Node node = attention_node(inputs.size(), scale, c.k_transposed);
  const Tensor want = reference(node, inputs);
  const kir::Kernel kernel = lower(node, inputs);
  const std::vector<float> got = device_runner().run(kernel, inputs, want.numel());
  auto expected = want.values<float>();
  double worst = 0;
  std::size_t worst_at = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double error = std::fabs(got[i] - expected[i]);
    if (!(error <= worst)) worst = error, worst_at = i;
  }
  BOOST_TEST(worst <= 2e-5, c.what << " (" << kernel.name << "): element " << worst_at << " is " << got[worst_at]
                                   << ", expected " << expected[worst_at]);
}

std::size_t count_op(const Graph& g, const std::string& op) {
  return static_cast<std::size_t>(
      std::count_if(g.nodes().begin(), g.nodes().end(), [&](const Node& n) { return n.op == op; }));
}

const kiln::graph::passes::PassReport& report_of(const kiln::graph::passes::PipelineResult& result,
                                                 const std::string& pass) {
  for (const auto& report : result.reports)
    if (report.pass == pass) return report;
  BOOST_FAIL(pass << " did not run");
  return result.reports.front();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(op)

BOOST_AUTO_TEST_CASE(reference_matches_a_hand_computed_case) {
  // Q = K = I (2x2), V = [[1, 2], [3, 4]], scale 1: row 0's scores are [1, 0],
  // so its weights are [e, 1] / (e + 1); row 1's are the reverse.
  const Tensor q = Tensor::from_f32(Shape{1, 1, 2, 2}, {1, 0, 0, 1});
  const Tensor v = Tensor::from_f32(Shape{1, 1, 2, 2}, {1, 2, 3, 4});
  const double e = std::exp(1.0);
  const std::vector<double> want = {(e * 1 + 3) / (e + 1), (e * 2 + 4) / (e + 1), (1 + e * 3) / (e + 1),
                                    (2 + e * 4) / (e + 1)};
  for (bool k_transposed : {false, true}) {
    const Tensor out = reference(attention_node(3, 1.0, k_transposed), {q, q, v});
    BOOST_TEST(out.shape() == (Shape{1, 1, 2, 2}));
    for (std::size_t i = 0; i < want.size(); ++i) BOOST_TEST(out.values<float>()[i] == want[i], boost::test_tools::tolerance(1e-6));
  }
  // A mask [1, 2] (broadcast over rows) that hides key 1: both rows read V's row 0.
  const Tensor mask = Tensor::from_f32(Shape{1, 2}, {0.0f, -INFINITY});
  const Tensor masked = reference(attention_node(4, 1.0, false), {q, q, v, mask});
  BOOST_TEST(masked.values<float>()[0] == 1.0f);
  BOOST_TEST(masked.values<float>()[3] == 2.0f);
  // Scale 0: uniform weights, the mean of V's rows.
  const Tensor uniform = reference(attention_node(3, 0.0, false), {q, q, v});
  BOOST_TEST(uniform.values<float>()[0] == 2.0f);
  BOOST_TEST(uniform.values<float>()[1] == 3.0f);
}

BOOST_AUTO_TEST_CASE(shape_errors_name_the_problem) {
  auto message = [](std::vector<TensorType> in, bool k_transposed = false) {
    try {
      kiln::graph::infer_node(attention_node(in.size(), 1.0, k_transposed), in);
    } catch (const kiln::Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  const TensorType q{DType::f32, {2, 4, 5, 8}}, k{DType::f32, {2, 4, 7, 8}}, v{DType::f32, {2, 4, 7, 6}};
  BOOST_TEST(kiln::graph::infer_node(attention_node(3, 1.0, false), std::vector{q, k, v})[0].shape ==
             (Shape{2, 4, 5, 6}));
  BOOST_TEST(message({q, k, v}, true).find("K's head dimension differs from Q's (7 vs 8)") != std::string::npos);
  BOOST_TEST(message({q, k, {DType::f32, {2, 4, 6, 6}}}).find("V must have one row per key (7)") != std::string::npos);
  BOOST_TEST(message({q, {DType::f32, {2, 3, 7, 8}}, v}).find("same batch dimensions") != std::string::npos);
  BOOST_TEST(message({{DType::f32, {5, 8}}, k, v}).find("Q must be [B, H, Lq, D] or [B*H, Lq, D]") !=
             std::string::npos);
  BOOST_TEST(message({q, k, v, {DType::f32, {3, 7}}}).find("does not broadcast to the scores [2, 4, 5, 7]") !=
             std::string::npos);
  Node typo = attention_node(3, 1.0, false);
  typo.attrs.set("is_causal", std::int64_t{1});
  BOOST_CHECK_THROW(kiln::graph::infer_node(typo, std::vector{q, k, v}), kiln::Error);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(kernel)

BOOST_AUTO_TEST_CASE(matches_the_reference_on_the_device) {
  const KernelCase cases[] = {
      // ViT-B/16: 12 heads of 64, 65 tokens at 128 px (here 3 heads, 17 tokens)
      {"vit-like", {1, 3, 17, 64}, {1, 3, 17, 64}, {1, 3, 17, 64}, std::nullopt, false},
      {"vit-like, K transposed", {1, 3, 17, 64}, {1, 3, 17, 64}, {1, 3, 17, 64}, std::nullopt, true},
      // SegFormer: keys from a map sr_ratio times coarser (Lq != Lk), heads of 32
      {"segformer-like", {2, 2, 37, 32}, {2, 2, 10, 32}, {2, 2, 10, 32}, std::nullopt, false},
      // DETR decoder cross attention with a key padding mask, as [B*H, L, D]
      {"detr-like cross, masked", {6, 11, 32}, {6, 23, 32}, {6, 23, 32}, Shape{6, 1, 23}, false},
      {"4-D mask per head and row", {1, 2, 9, 32}, {1, 2, 13, 32}, {1, 2, 13, 32}, Shape{1, 2, 9, 13}, true},
      // nothing a multiple of 4; a single key; Dv wider than one column block
      {"odd sizes", {1, 3, 5, 7}, {1, 3, 6, 7}, {1, 3, 6, 9}, Shape{5, 6}, false},
      {"one key", {1, 1, 3, 8}, {1, 1, 1, 8}, {1, 1, 1, 8}, std::nullopt, false},
      {"wide values", {1, 1, 6, 16}, {1, 1, 9, 16}, {1, 1, 9, 100}, std::nullopt, false},
      {"wide values, vec4 blocks", {1, 1, 6, 16}, {1, 1, 9, 16}, {1, 1, 9, 128}, std::nullopt, false},
  };
  for (const KernelCase& c : cases) check_kernel(c);
}

BOOST_AUTO_TEST_CASE(kernel_uses_vector_loads_only_where_they_fit) {
  auto has_vector_loads = [](const Shape& q, const Shape& k, const Shape& v, bool k_transposed) {
    std::vector<Tensor> inputs = {Tensor(DType::f32, q), Tensor(DType::f32, k), Tensor(DType::f32, v)};
    const std::string text = kir::print(lower(attention_node(3, 1.0, k_transposed), inputs));
    return text.find("vec") != std::string::npos || text.find("load_vector") != std::string::npos;
  };
  BOOST_TEST(has_vector_loads({1, 2, 5, 8}, {1, 2, 6, 8}, {1, 2, 6, 8}, false));
  BOOST_TEST(!has_vector_loads({1, 2, 5, 7}, {1, 2, 6, 7}, {1, 2, 6, 9}, false));
}

BOOST_AUTO_TEST_CASE(compiles_for_cuda_and_hip) {
  std::vector<kir::Kernel> kernels;
  kernels.push_back(lower(attention_node(3, 0.125, false),
                          {random_tensor({1, 2, 9, 64}, 1), random_tensor({1, 2, 10, 64}, 2),
                           random_tensor({1, 2, 10, 64}, 3)}));
  kernels.push_back(lower(attention_node(4, 0.3, true),
                          {random_tensor({3, 5, 7}, 1), random_tensor({3, 7, 6}, 2), random_tensor({3, 6, 9}, 3),
                           random_tensor({3, 1, 6}, 4)}));
  int compiled = 0;
  for (const kb::Backend* backend : kb::all_backends()) {
    if (backend->name() != "cuda" && backend->name() != "hip") continue;
    for (const kb::TargetDesc& target : backend->offline_targets())
      for (const kir::Kernel& kernel : kernels) {
        const kb::KernelSource source = kiln::render::make_kernel_source(kernel, backend->language());
        BOOST_TEST(!backend->compiler().compile(source, target).data.empty(), kernel.name << " for " << target.arch);
        ++compiled;
      }
  }
  BOOST_TEST_MESSAGE("attention kernels compiled " << compiled << " times for the offline CUDA/HIP targets");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(models)

struct ModelCase {
  const char* name;
  std::int64_t image_size;
  std::size_t attention_layers;  // in torch's export, whose weights are graph inputs
  std::size_t builtin_attention;  // left after constant folding of the built-in model
};

// ViT-B/16: 12 encoder layers; SegFormer-B0: 2 blocks in each of 4 stages;
// DETR: 6 encoder self-attentions, 6 decoder self- and 6 cross-attentions.
// The built-in DETR's first decoder self-attention reads only constants (the
// decoder starts from zeros plus learned query positions), so constant
// folding computes it at compile time and 17 remain.
const ModelCase kModels[] = {{"vit_b_16", 32, 12, 12}, {"segformer_b0", 64, 8, 8}, {"detr_resnet50", 64, 18, 17}};

BOOST_AUTO_TEST_CASE(pass_fires_on_every_attention_of_the_builtin_models) {
  for (const ModelCase& m : kModels) {
    const kiln::Model model = kiln::models::build(m.name, {.image_size = m.image_size, .num_classes = 10});
    const auto result = kiln::graph::passes::run_compile_passes(kiln::internal::graph(model));
    BOOST_TEST(count_op(kiln::internal::graph(model), "Softmax") == m.attention_layers, m.name);
    BOOST_TEST(count_op(result.graph, "Attention") == m.builtin_attention, m.name);
    BOOST_TEST(count_op(result.graph, "Softmax") == 0u, m.name);
    BOOST_TEST(report_of(result, "recognise_attention").changes == static_cast<int>(m.builtin_attention), m.name);
    // In 16 bits (Model::with_float_type, its scale constants rounded) too.
    for (const kiln::DType half : {kiln::DType::f16, kiln::DType::bf16}) {
      const auto narrow = kiln::graph::passes::run_compile_passes(kiln::internal::graph(model.with_float_type(half)));
      BOOST_TEST(count_op(narrow.graph, "Attention") == m.builtin_attention, m.name << " in " << kiln::dtype_name(half));
    }
  }
}

BOOST_AUTO_TEST_CASE(pass_fires_on_every_attention_of_the_torch_exports) {
  const char* root = std::getenv("KILN_SOURCE_ROOT");
  BOOST_TEST_REQUIRE(root != nullptr, "KILN_SOURCE_ROOT is not set (run through meson test)");
  for (const ModelCase& m : kModels) {
    const auto path = std::filesystem::path(root) / "tests" / "fixtures" / "pytorch" / (std::string(m.name) + ".onnx");
    const kiln::Model model = kiln::load_onnx(path.string());
    const auto result = kiln::graph::passes::run_compile_passes(kiln::internal::graph(model));
    BOOST_TEST(count_op(result.graph, "Attention") == m.attention_layers, m.name);
    BOOST_TEST(count_op(result.graph, "Softmax") == 0u, m.name);
    for (const std::string& line : report_of(result, "recognise_attention").details)
      BOOST_TEST_MESSAGE(m.name << ": " << line);
  }
}

BOOST_AUTO_TEST_CASE(compiled_matches_eager) {
  for (const ModelCase& m : kModels) {
    const kiln::Model model = kiln::models::build(m.name, {.image_size = m.image_size, .num_classes = 10, .seed = 3});
    std::vector<Tensor> inputs;
    for (kiln::graph::ValueId id : kiln::internal::graph(model).inputs())
      inputs.push_back(random_tensor(kiln::internal::graph(model).value(id).type.shape, 9));
    auto eager = kiln::eager(model, {.backend = kiln::testing::test_backend()});
    auto compiled = kiln::compile(model, {.backend = kiln::testing::test_backend(), .fullgraph = true, .cache_dir = "off"});
    const std::vector<Tensor> e = eager(inputs);
    const std::vector<Tensor> c = compiled(inputs);
    BOOST_TEST_REQUIRE(e.size() == c.size());
    for (std::size_t i = 0; i < e.size(); ++i) {
      float scale = 1.0f;
      for (float v : e[i].values<float>()) scale = std::max(scale, std::fabs(v));
      BOOST_TEST(kiln::max_abs_diff(c[i], e[i]) <= 1e-3f * scale, m.name << " output " << i);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

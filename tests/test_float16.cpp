// 16-bit floats (f16, bf16): the conversions of kiln/float16.h, checked
// exhaustively; Tensor::to, .npy files; and the reference implementation's
// rule (each op widens 16-bit inputs to f32, computes, rounds its results to
// the 16-bit type) against cases PyTorch computed (tests/fixtures/float16).
#define BOOST_TEST_MODULE float16
#include <boost/test/unit_test.hpp>

#include <kiln/builder.h>
#include <kiln/float16.h>
#include <kiln/kiln.h>
#include <kiln/models.h>
#include <kiln/npy.h>
#include <kiln/settings.h>
#include <kiln/tensor.h>

#include "graph/model_access.h"
#include "graph/op_registry.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <string>

namespace {

using kiln::DType;
using kiln::Tensor;

bool is_nan_f16(std::uint16_t bits) { return (bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0; }
bool is_nan_bf16(std::uint16_t bits) { return (bits & 0x7f80u) == 0x7f80u && (bits & 0x7fu) != 0; }

// The 16-bit type's value of `bits` and the bits of a float, by dtype.
float value_of(DType dtype, std::uint16_t bits) {
  return dtype == DType::f16 ? kiln::f16_value(bits) : kiln::bf16_value(bits);
}
std::uint16_t bits_of(DType dtype, float value) {
  return dtype == DType::f16 ? kiln::f16_bits(value) : kiln::bf16_bits(value);
}

// Checks rounding between every pair of neighbouring finite non-negative
// values of a 16-bit type (`last` the bits of its largest finite value): the
// midpoint (exact in f32) goes to the one with an even last bit, a float
// just either side of it to the nearer one; past the largest finite value
// by half a step or more is infinity.
void check_rounding(DType dtype, std::uint16_t last, std::uint16_t infinity) {
  int failures = 0;
  for (std::uint16_t a = 0; a < last && failures < 10; ++a) {
    const std::uint16_t b = a + 1;
    const float low = value_of(dtype, a), high = value_of(dtype, b);
    const float mid = low + (high - low) / 2;
    BOOST_REQUIRE(mid > low && mid < high);  // exact: 16-bit types have fewer mantissa bits
    const std::uint16_t even = (a & 1u) == 0 ? a : b;
    const std::uint16_t below = bits_of(dtype, std::nextafter(mid, 0.0f));
    const std::uint16_t above = bits_of(dtype, std::nextafter(mid, high * 2));
    const std::uint16_t at = bits_of(dtype, mid);
    if (at != even || below != a || above != b) {
      ++failures;
      BOOST_ERROR(kiln::dtype_name(dtype) << " between " << low << " and " << high << ": midpoint " << at
                                         << ", below " << below << ", above " << above);
    }
    // Negative values round symmetrically.
    if (bits_of(dtype, -mid) != (even | 0x8000u)) {
      ++failures;
      BOOST_ERROR(kiln::dtype_name(dtype) << ": -" << mid << " does not round to -" << value_of(dtype, even));
    }
  }
  const float largest = value_of(dtype, last);
  const float step = largest - value_of(dtype, last - 1);
  BOOST_TEST(bits_of(dtype, largest + step / 2) == infinity);
  BOOST_TEST(bits_of(dtype, std::nextafter(largest + step / 2, 0.0f)) == last);
  BOOST_TEST(bits_of(dtype, std::numeric_limits<float>::max()) == infinity);
  BOOST_TEST(bits_of(dtype, -std::numeric_limits<float>::infinity()) == (infinity | 0x8000u));
}

std::filesystem::path fixture_dir() {
  const char* root = std::getenv("KILN_SOURCE_ROOT");
  BOOST_TEST_REQUIRE(root != nullptr, "KILN_SOURCE_ROOT is not set (run through meson test)");
  return std::filesystem::path(root) / "tests" / "fixtures" / "float16";
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_f16_value_converts_to_f32_and_back_exactly) {
  for (std::uint32_t b = 0; b <= 0xffffu; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float v = kiln::f16_value(bits);
    if (is_nan_f16(bits)) {
      BOOST_TEST_REQUIRE(std::isnan(v));
      BOOST_TEST_REQUIRE(is_nan_f16(kiln::f16_bits(v)));
      BOOST_TEST_REQUIRE((kiln::f16_bits(v) & 0x8000u) == (bits & 0x8000u));  // NaN keeps its sign
      continue;
    }
    BOOST_TEST_REQUIRE(kiln::f16_bits(v) == bits, "f16 bits " << b << " -> " << v);
  }
  BOOST_TEST(kiln::f16_value(0x3c00) == 1.0f);
  BOOST_TEST(kiln::f16_value(0x7bff) == 65504.0f);
  BOOST_TEST(kiln::f16_value(0x0001) == std::ldexp(1.0f, -24));  // the smallest subnormal
  BOOST_TEST(kiln::f16_value(0x0400) == std::ldexp(1.0f, -14));  // the smallest normal
  BOOST_TEST(std::signbit(kiln::f16_value(0x8000)));
}

BOOST_AUTO_TEST_CASE(every_bf16_value_converts_to_f32_and_back_exactly) {
  for (std::uint32_t b = 0; b <= 0xffffu; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float v = kiln::bf16_value(bits);
    if (is_nan_bf16(bits)) {
      BOOST_TEST_REQUIRE(std::isnan(v));
      BOOST_TEST_REQUIRE(is_nan_bf16(kiln::bf16_bits(v)));
      continue;
    }
    BOOST_TEST_REQUIRE(kiln::bf16_bits(v) == bits, "bf16 bits " << b << " -> " << v);
  }
  BOOST_TEST(kiln::bf16_value(0x3f80) == 1.0f);
  // A NaN whose payload is only in the low 16 bits stays a NaN (not infinity).
  BOOST_TEST(is_nan_bf16(kiln::bf16_bits(std::bit_cast<float>(0x7f800001u))));
}

BOOST_AUTO_TEST_CASE(each_float_type_states_its_epsilon) {
  BOOST_TEST(kiln::float_epsilon(DType::f32) == std::ldexp(1.0, -23));
  BOOST_TEST(kiln::float_epsilon(DType::f16) == std::ldexp(1.0, -10));
  BOOST_TEST(kiln::float_epsilon(DType::bf16) == std::ldexp(1.0, -7));
  // One epsilon past 1 is the next value of the type.
  BOOST_TEST(kiln::f16_value(kiln::f16_bits(static_cast<float>(1 + kiln::float_epsilon(DType::f16)))) > 1.0f);
  BOOST_CHECK_THROW(kiln::float_epsilon(DType::i64), kiln::Error);
}

BOOST_AUTO_TEST_CASE(conversions_round_to_nearest_even) {
  check_rounding(DType::f16, 0x7bff, 0x7c00);
  check_rounding(DType::bf16, 0x7f7f, 0x7f80);
  // f16 subnormals: half the smallest rounds to zero (even), a little more to it.
  const float tiny = std::ldexp(1.0f, -24);
  BOOST_TEST(kiln::f16_bits(tiny / 2) == 0);
  BOOST_TEST(kiln::f16_bits(std::nextafter(tiny / 2, 1.0f)) == 1);
  BOOST_TEST(kiln::f16_bits(tiny * 1.5f) == 2);  // tie between 1 and 2 units: even
  BOOST_TEST(kiln::f16_bits(std::ldexp(1.0f, -30)) == 0);
  // bf16 keeps f32's range: f32 subnormals round like the rest.
  BOOST_TEST(kiln::bf16_value(kiln::bf16_bits(std::ldexp(1.0f, -130))) == std::ldexp(1.0f, -130));
}

BOOST_AUTO_TEST_CASE(tensors_convert_between_types) {
  const Tensor x = Tensor::from_f32({5}, {1.0f, -2.5f, 65519.0f, 1e-8f, 3.14159f});
  const Tensor h = x.to(DType::f16);
  BOOST_TEST((h.dtype() == DType::f16));
  BOOST_TEST(h.nbytes() == 10u);
  const auto hv = h.values<std::uint16_t>();
  BOOST_TEST(hv[0] == 0x3c00u);
  BOOST_TEST(hv[1] == 0xc100u);
  BOOST_TEST(hv[2] == 0x7bffu);  // below 65520: the largest finite half
  BOOST_TEST(hv[3] == 0u);       // below half the smallest subnormal
  const Tensor b = x.to(DType::bf16);
  BOOST_TEST((b.dtype() == DType::bf16));
  BOOST_TEST(kiln::bf16_value(b.values<std::uint16_t>()[4]) == 3.140625f);
  const Tensor back = h.to(DType::f32);
  BOOST_TEST(back.values<float>()[1] == -2.5f);
  BOOST_TEST(back.values<float>()[4] == kiln::f16_value(kiln::f16_bits(3.14159f)));
  // f16 to bf16 goes through the value, each step to nearest even.
  BOOST_TEST(kiln::bf16_value(h.to(DType::bf16).values<std::uint16_t>()[0]) == 1.0f);
  BOOST_TEST(h.to(DType::i64).values<std::int64_t>()[1] == -2);
  BOOST_TEST(is_float(DType::bf16));
  BOOST_TEST(!is_float(DType::i32));
  BOOST_TEST(kiln::dtype_name(DType::bf16) == "bf16");
}

BOOST_AUTO_TEST_CASE(npy_files_hold_f16_natively_and_bf16_as_two_byte_records) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "kiln_test_float16";
  std::filesystem::create_directories(dir);
  const Tensor x = Tensor::from_f32({2, 3}, {0.5f, -1.0f, 2.0f, 1e4f, -7.25f, 0.1f});
  for (const DType dtype : {DType::f16, DType::bf16}) {
    const std::string path = (dir / (std::string(kiln::dtype_name(dtype)) + ".npy")).string();
    const Tensor t = x.to(dtype);
    kiln::save_npy(path, t);
    std::ifstream in(path, std::ios::binary);
    std::string header(128, '\0');
    in.read(header.data(), static_cast<std::streamsize>(header.size()));
    BOOST_TEST(header.find(dtype == DType::f16 ? "'descr': '<f2'" : "'descr': '<V2'") != std::string::npos, header);
    const Tensor loaded = kiln::load_npy(path);
    BOOST_TEST((loaded.dtype() == dtype));
    BOOST_TEST((loaded.shape() == kiln::Shape{2, 3}));
    BOOST_TEST(std::equal(loaded.bytes().begin(), loaded.bytes().end(), t.bytes().begin()));
  }
  std::filesystem::remove_all(dir);
}

// A case of tests/fixtures/float16: one op on 16-bit inputs, and PyTorch's
// result (on the CPU).
struct PyTorchCase {
  kiln::graph::Node node;
  std::vector<Tensor> inputs;
  Tensor want;
  std::string what;  // "add in f16"
};

std::vector<PyTorchCase> pytorch_cases() {
  std::ifstream in(fixture_dir() / "cases.json");
  BOOST_TEST_REQUIRE(in.good());
  const nlohmann::json listed = nlohmann::json::parse(in);
  std::vector<PyTorchCase> cases;
  for (const nlohmann::json& c : listed.at("cases")) {
    PyTorchCase pc;
    pc.node.op = c.at("op").get<std::string>();
    pc.node.name = c.at("case").get<std::string>();
    for (const auto& [name, value] : c.at("attributes").items()) {
      if (value.is_array()) pc.node.attrs.set(name, value.get<std::vector<std::int64_t>>());
      else if (value.is_number_float()) pc.node.attrs.set(name, value.get<float>());
      else pc.node.attrs.set(name, value.get<std::int64_t>());
    }
    for (const nlohmann::json& file : c.at("inputs")) {
      pc.node.inputs.push_back(static_cast<kiln::graph::ValueId>(pc.inputs.size()));
      pc.inputs.push_back(kiln::load_npy((fixture_dir() / file.get<std::string>()).string()));
    }
    pc.want = kiln::load_npy((fixture_dir() / c.at("output").get<std::string>()).string());
    pc.what = pc.node.name + " in " + c.at("dtype").get<std::string>();
    cases.push_back(std::move(pc));
  }
  return cases;
}

// Whether `got` is PyTorch's result within the bounds of docs/precision.md.
// Elementwise ops: within one unit in the last place of the 16-bit type,
// nearly all exactly (PyTorch computes in f32; kiln's reference in double
// rounded to f32, its kernels in f32 with other math functions; both then
// round to 16 bits). Ops that sum (MatMul, Conv, reductions, Softmax,
// LayerNormalization): within one epsilon of the type at the output's scale
// (its largest magnitude), as their sums are ordered differently and their
// small outputs come from cancellation.
void check_like_pytorch(const Tensor& got, const PyTorchCase& c, const std::string& where) {
  static const std::set<std::string> sums = {"MatMul", "Conv", "ReduceSum", "ReduceMean", "Softmax", "LayerNormalization"};
  const DType dtype = c.want.dtype();
  const std::string what = c.what + " (" + where + ")";
  BOOST_TEST_REQUIRE((got.dtype() == dtype), what << ": " << kiln::dtype_name(got.dtype()));
  BOOST_TEST_REQUIRE((got.shape() == c.want.shape()), what);
  const auto g = got.values<std::uint16_t>(), w = c.want.values<std::uint16_t>();
  const double epsilon = dtype == DType::f16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -7);
  double scale = 0;
  for (const std::uint16_t bits : w) scale = std::max(scale, std::fabs(static_cast<double>(value_of(dtype, bits))));
  const bool sum = sums.contains(c.node.op);
  std::size_t exact = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double a = value_of(dtype, g[i]), b = value_of(dtype, w[i]);
    exact += a == b ? 1 : 0;
    // Neighbouring values of one sign differ by one in their bits.
    const bool within = sum ? std::fabs(a - b) <= epsilon * scale
                            : a == b || std::abs(static_cast<int>(g[i]) - static_cast<int>(w[i])) <= 1;
    BOOST_TEST(within, what << " element " << i << ": " << a << ", PyTorch " << b);
  }
  if (!sum) BOOST_TEST(exact * 100 >= w.size() * 97, what << ": " << exact << " of " << w.size() << " exactly PyTorch's");
}

// The reference computes 16-bit ops as PyTorch does: every case of
// tests/fixtures/float16.
BOOST_AUTO_TEST_CASE(the_reference_computes_16_bit_ops_as_pytorch_does) {
  int cases = 0;
  for (const PyTorchCase& c : pytorch_cases()) {
    const std::vector<Tensor> got = kiln::graph::get_op(c.node.op).reference(c.node, c.inputs);
    BOOST_TEST_REQUIRE(got.size() == 1u, c.what);
    check_like_pytorch(got[0], c, "reference");
    ++cases;
  }
  BOOST_TEST(cases == 36);
}

// So do the kernels, on every backend with a device here, eagerly (one kernel
// per op, as the cases are) and compiled: 16-bit buffers, f32 arithmetic.
BOOST_AUTO_TEST_CASE(kernels_compute_16_bit_ops_as_pytorch_does) {
  for (const std::string backend : {"cpu", "vulkan"}) {
    int cases = 0;
    for (const PyTorchCase& c : pytorch_cases()) {
      auto graph = std::make_shared<kiln::graph::Graph>();
      std::vector<kiln::graph::ValueId> inputs;
      for (std::size_t i = 0; i < c.inputs.size(); ++i)
        inputs.push_back(graph->add_input("in" + std::to_string(i), {c.inputs[i].dtype(), c.inputs[i].shape()}));
      graph->set_outputs({graph->add_node(c.node.op, inputs, c.node.attrs, c.node.name).at(0)});
      const kiln::Model model = kiln::internal::ModelAccess::make(graph, c.node.name);
      auto eager = kiln::eager(model, {.backend = backend});
      check_like_pytorch(eager(c.inputs).at(0), c, backend + " eager");
      BOOST_TEST(eager.stats().host_steps_per_run == 0, c.what << " ran on the host");
      auto compiled = kiln::compile(model, {.backend = backend, .fullgraph = true, .cache_dir = "off"});
      check_like_pytorch(compiled(c.inputs).at(0), c, backend + " compiled");
      ++cases;
    }
    BOOST_TEST(cases == 36);
  }
}

// Inference types a 16-bit graph as 16-bit: an op on f16 inputs gives f16
// (f32 inputs beside them excepted by ONNX), comparisons give bool, Cast
// what it names.
BOOST_AUTO_TEST_CASE(inference_keeps_16_bit_types) {
  using kiln::graph::TensorType;
  kiln::graph::Node add;
  add.op = "Add";
  add.name = "add";
  add.inputs = {0, 1};
  const std::vector<TensorType> halves = {{DType::f16, {2, 3}}, {DType::f16, {3}}};
  BOOST_TEST((kiln::graph::infer_node(add, halves).at(0).dtype == DType::f16));
  const std::vector<TensorType> brains = {{DType::bf16, {2, 3}}, {DType::bf16, {3}}};
  BOOST_TEST((kiln::graph::infer_node(add, brains).at(0).dtype == DType::bf16));
  kiln::graph::Node less = add;
  less.op = "Less";
  BOOST_TEST((kiln::graph::infer_node(less, halves).at(0).dtype == DType::boolean));
  kiln::graph::Node cast;
  cast.op = "Cast";
  cast.name = "cast";
  cast.inputs = {0};
  cast.attrs.set("to", std::int64_t{1});
  const std::vector<TensorType> bf16_input = {{DType::bf16, {4}}}, f32_input = {{DType::f32, {4}}};
  BOOST_TEST((kiln::graph::infer_node(cast, bf16_input).at(0).dtype == DType::f32));
  cast.attrs.set("to", std::int64_t{16});
  BOOST_TEST((kiln::graph::infer_node(cast, f32_input).at(0).dtype == DType::bf16));
}

// A model of 16-bit tensors runs on the device, eagerly and compiled, and
// computes what the reference computes: its kernels read and write 16-bit
// buffers and compute in f32 (no node runs on the host).
BOOST_AUTO_TEST_CASE(a_16_bit_model_runs_on_the_device) {
  for (const DType dtype : {DType::f16, DType::bf16}) {
    kiln::Builder b("half_model");
    const auto x = b.input("x", dtype, {2, 8});
    const Tensor w = Tensor::from_f32({8, 4}, {0.5f, -1, 2, 0.25f, 1, 1, -0.5f, 3, 0, 2, 1, -1, 0.125f, 0.5f, 1, 2,
                                               -2, 1, 0, 1, 1, -1, 0.5f, 0.75f, 2, 0, 1, 1, -1, 1, 1, 0})
                         .to(dtype);
    const auto y = b.relu(b.add(b.matmul(x, b.constant("w", w)), b.constant("bias", Tensor::from_f32({4}, {0.5f, -0.25f, 1, 0}).to(dtype))));
    const kiln::Model model = b.build({y});
    BOOST_TEST((model.outputs().at(0).dtype == dtype));
    Tensor input = Tensor::from_f32({2, 8}, {1, 2, 3, 4, -1, -2, 0.5f, 0.25f, 0, 1, 0, 1, 0, 1, 0, 1}).to(dtype);
    const Tensor want = kiln::graph::run_reference(kiln::internal::graph(model), std::vector<Tensor>{input}).at(0);
    for (const std::string backend : {"cpu", "vulkan"}) {
      auto eager = kiln::eager(model, {.backend = backend});
      auto compiled = kiln::compile(model, {.backend = backend, .fullgraph = true});
      // Sums of these values are exact in both types, so fusing the add and
      // relu into the product (no rounding between them) changes nothing.
      for (const Tensor& got : {eager({input}).at(0), compiled({input}).at(0)}) {
        BOOST_TEST((got.dtype() == dtype));
        BOOST_TEST(std::equal(got.bytes().begin(), got.bytes().end(), want.bytes().begin()), backend);
      }
      BOOST_TEST(eager.stats().host_steps_per_run == 0);
      BOOST_TEST(compiled.stats().host_steps_per_run == 0);
      BOOST_TEST(compiled.stats().dispatches_per_run == 1);
      const std::string explained = compiled.explain();
      BOOST_TEST(explained.find("-> " + std::string(kiln::dtype_name(dtype)) + "[2, 4]") != std::string::npos, explained);
    }
  }
}

// A matrix-vector product of 16-bit weights (a decode step's projection)
// reads them through 16-bit texel views on lavapipe, as f32 weights are
// read (the "_tex" blocks), computes what the reference computes, and keeps
// its views' element types through a compiled-model file.
BOOST_AUTO_TEST_CASE(a_16_bit_matrix_vector_product_reads_texel_views_and_survives_a_file) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kiln-test-texel16-" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(dir);
  // f32 first: an f16 kernel may have an f32 one's text and binary, but not its views.
  for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    BOOST_TEST_CONTEXT(kiln::dtype_name(dtype)) {
      std::mt19937 rng(7);
      std::uniform_int_distribution<int> small(-8, 8);  // eighths: every sum below is exact in f32
      std::vector<float> weights(256 * 64), values(256);
      for (float& v : weights) v = static_cast<float>(small(rng)) / 8.0f;
      for (float& v : values) v = static_cast<float>(small(rng)) / 8.0f;
      kiln::Builder b("texel16");
      const auto x = b.input("x", dtype, {1, 256});
      const auto y = b.matmul(x, b.constant("w", Tensor::from_f32({256, 64}, weights).to(dtype)));
      const kiln::Model model = b.build({y});
      const Tensor input = Tensor::from_f32({1, 256}, values).to(dtype);
      const Tensor want = kiln::graph::run_reference(kiln::internal::graph(model), std::vector<Tensor>{input}).at(0);
      auto compiled = kiln::compile(model, {.backend = "vulkan", .cache_dir = "off"});
      const Tensor got = compiled({input}).at(0);
      BOOST_TEST(std::equal(got.bytes().begin(), got.bytes().end(), want.bytes().begin()));
      const std::string explained = compiled.explain();
      BOOST_TEST(explained.find("_tex") != std::string::npos, explained);
      const std::string path = (dir / (std::string(kiln::dtype_name(dtype)) + ".kiln")).string();
      kiln::compile_to_file(model, path, {.targets = {"vulkan"}, .cache_dir = (dir / "cache").string()});
      auto loaded = kiln::load(path, {.cache_dir = (dir / ("empty-cache-" + std::string(kiln::dtype_name(dtype)))).string()});
      const Tensor from_file = loaded({input}).at(0);
      BOOST_TEST(std::equal(from_file.bytes().begin(), from_file.bytes().end(), want.bytes().begin()));
      BOOST_TEST(loaded.stats().kernels_from_file == loaded.stats().kernels);
    }
  }
  std::filesystem::remove_all(dir);
}

// PyTorch's precision settings, with its names and defaults; on a device
// without TF32 (every device here) they change nothing, and explain() says so.
BOOST_AUTO_TEST_CASE(precision_settings_have_pytorchs_names_and_defaults) {
  const kiln::Settings defaults;
  BOOST_TEST(defaults.choice("float32_matmul_precision") == "highest");
  BOOST_TEST(defaults.flag("conv_allow_tf32"));
  BOOST_TEST(defaults.with("float32_matmul_precision", "medium").choice("float32_matmul_precision") == "medium");
  BOOST_CHECK_THROW(defaults.with("float32_matmul_precision", "low"), kiln::Error);
  kiln::Builder b("precision");
  const auto x = b.input("x", DType::f32, {1, 4});
  const kiln::Model model = b.build({b.relu(x)});
  auto compiled = kiln::compile(model, {.backend = "cpu"});
  compiled({Tensor::from_f32({1, 4}, {1, -1, 2, -2})});
  const std::string explained = compiled.explain();
  BOOST_TEST(explained.find("precision: float32_matmul_precision highest, conv_allow_tf32 on: no effect on ") !=
                 std::string::npos,
             explained);
  BOOST_TEST(explained.find("which has no TF32 or bf16 matrix units: f32 products in f32") != std::string::npos, explained);
}

// The f16_arithmetic setting (off by default, as PyTorch computes 16-bit ops
// in f32): on a device with native f16 arithmetic (lavapipe's float16_t), kernels that store f16 tensors
// compute their pointwise math in f16, as mobile GPUs do; the zoo's
// MobileNetV2 (depthwise and 1x1 convolutions, ReLU6, residual adds) and
// EfficientNet-B0 (SiLU, squeeze-and-excitation, sigmoid gates) stay within
// the per-model bound of docs/precision.md for f16 arithmetic; explain()
// counts the kernels that compute in f16, and says where the setting has no
// effect.
BOOST_AUTO_TEST_CASE(f16_arithmetic_runs_pointwise_math_in_f16_within_its_bound) {
  const kiln::SettingOverrides on = {{"f16_arithmetic", "on"}};
  for (const std::string name : {"mobilenet_v2", "efficientnet_b0"}) {
    const kiln::Model model = kiln::models::build(name, {.image_size = 32}).with_float_type(DType::f16);
    Tensor x(DType::f32, {1, 3, 32, 32});
    auto v = x.values<float>();
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37f * static_cast<float>(i)) * 1.5f;
    const Tensor want = kiln::graph::run_reference(kiln::internal::graph(model), std::vector<Tensor>{x}).at(0);
    float largest = 0;
    for (float w : want.values<float>()) largest = std::max(largest, std::fabs(w));
    BOOST_TEST_REQUIRE(largest > 0.1f);
    for (const std::string backend : {"cpu", "vulkan"}) {
      BOOST_TEST_CONTEXT(name << " on " << backend) {
        auto plain = kiln::compile(model, {.backend = backend, .fullgraph = true, .cache_dir = "off"});
        auto half = kiln::compile(model, {.backend = backend, .fullgraph = true, .cache_dir = "off", .settings = on});
        const Tensor f32_math = plain({x}).at(0), f16_math = half({x}).at(0);
        const std::string explained = half.explain();
        const auto line = explained.find("f16 arithmetic: on: ");
        BOOST_TEST_REQUIRE(line != std::string::npos, explained);
        const std::string summary = explained.substr(line, explained.find('\n', line) - line);
        // The cpu backend's C would only emulate f16 (slower than f32).
        if (backend == "cpu") BOOST_TEST(summary.find("would only emulate it") != std::string::npos, summary);
        if (summary.find("no effect") != std::string::npos) {
          BOOST_TEST_MESSAGE(name << " on " << backend << ": " << summary);
          BOOST_TEST(kiln::max_abs_diff(f16_math, f32_math) == 0.0f);
          continue;
        }
        BOOST_TEST(summary.find(" kernels compute what they store in f16") != std::string::npos, summary);
        BOOST_TEST(explained.find("f16 buffers, f16 arithmetic") != std::string::npos, explained);
        const float plain_diff = kiln::max_abs_diff(f32_math, want), half_diff = kiln::max_abs_diff(f16_math, want);
        BOOST_TEST_MESSAGE(name << " on " << backend << ": max |compiled - f16 reference| " << plain_diff
                                << " with f32 arithmetic, " << half_diff << " with f16 arithmetic (largest |logit| "
                                << largest << "); " << summary);
        // The zoo's per-model bound, of the largest logit itself (these logits are below 1).
        BOOST_TEST(half_diff <= 16 * kiln::float_epsilon(DType::f16) * largest);
        // EfficientNet's SiLU and sigmoid gates compute otherwise in f16;
        // MobileNetV2's ReLU6 (min and max) and residual sums with an
        // accumulation (f32) do not.
        if (name == "efficientnet_b0") BOOST_TEST(kiln::max_abs_diff(f16_math, f32_math) > 0.0f);
      }
    }
  }
}

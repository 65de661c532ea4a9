#define BOOST_TEST_MODULE causal_lm
#include <boost/test/unit_test.hpp>

// Hugging Face checkpoints (tests/fixtures/causal_lm/, made by its
// make_fixtures.py with transformers): tiny random-weight models of every
// architecture kiln builds, with transformers' greedy generation and the
// logits of every position. kiln's whole-sequence forward over the prompt and
// the generated tokens must give the same greedy token at every step and
// logits within a bound, on the reference, eagerly and compiled; and
// damaged checkpoints must fail with errors that name the problem.

#include <kiln/causal_lm.h>
#include <kiln/float16.h>
#include <kiln/kiln.h>
#include <kiln/npy.h>
#include <kiln/safetensors.h>

#include "graph/op_registry.h"
#include "src/runtime/internal_access.h"
#include "test_backend.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <variant>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

fs::path fixture_dir() {
  const char* root = std::getenv("KILN_SOURCE_ROOT");
  const fs::path base = root != nullptr && *root != '\0' ? fs::path(root) / "tests" : fs::path(__FILE__).parent_path();
  return base / "fixtures" / "causal_lm";
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

struct GenerationCase {
  std::vector<std::int64_t> prompt, new_tokens;
  kiln::Tensor logits;  // [prompt + new - 1, vocab]: transformers' logits at every position
};

std::vector<GenerationCase> cases_of(const std::string& arch) {
  const nlohmann::json expected = read_json(fixture_dir() / arch / "expected.json");
  std::vector<GenerationCase> cases;
  for (const nlohmann::json& c : expected["cases"])
    cases.push_back({c["prompt"].get<std::vector<std::int64_t>>(), c["new_tokens"].get<std::vector<std::int64_t>>(),
                     kiln::load_npy((fixture_dir() / arch / c["logits"].get<std::string>()).string())});
  return cases;
}

// The sequence transformers saw: the prompt, then every generated token but the last.
kiln::Tensor sequence_of(const GenerationCase& c) {
  std::vector<std::int64_t> ids = c.prompt;
  ids.insert(ids.end(), c.new_tokens.begin(), c.new_tokens.end() - 1);
  return kiln::Tensor::from_i64({1, static_cast<std::int64_t>(ids.size())}, ids);
}

// kiln's logits [1, n, vocab] against transformers' [n, vocab]: within
// `tolerance` of the largest logit (at least 1), and the greedy pick of
// every generated step the same.
void check_logits(const kiln::Tensor& got, const GenerationCase& c, double tolerance, const std::string& how) {
  const std::int64_t n = c.logits.shape()[0], vocab = c.logits.shape()[1];
  BOOST_TEST_REQUIRE((got.shape() == kiln::Shape{1, n, vocab}), how << ": logits " << kiln::shape_str(got.shape()));
  const auto g = got.values<float>();
  const auto w = c.logits.values<float>();
  double scale = 1.0, worst = 0.0;
  for (float v : w) scale = std::max(scale, std::fabs(double(v)));
  for (std::size_t k = 0; k < w.size(); ++k) worst = std::max(worst, std::fabs(double(g[k]) - w[k]));
  BOOST_TEST(worst / scale <= tolerance, how << ": logits differ by " << worst << " (scale " << scale << ")");
  BOOST_TEST_MESSAGE(how << ": logits within " << worst / scale << " of their scale");
  const std::int64_t first = static_cast<std::int64_t>(c.prompt.size()) - 1;
  for (std::size_t t = 0; t < c.new_tokens.size(); ++t) {
    const float* row = g.data() + (first + static_cast<std::int64_t>(t)) * vocab;
    const std::int64_t pick = std::max_element(row, row + vocab) - row;
    BOOST_TEST(pick == c.new_tokens[t], how << ": step " << t << " picks token " << pick << ", transformers "
                                            << c.new_tokens[t]);
  }
}

// f32 models: transformers and kiln differ in summation order only. bf16
// (Gemma): both round after every op; a one-unit difference early moves the
// logits by a few units of bf16 (2^-7) of their scale.
double tolerance_of(kiln::DType dtype) { return dtype == kiln::DType::f32 ? 1e-5 : 4 * kiln::float_epsilon(dtype); }

void check_architecture(const std::string& arch, const std::string& architecture_name) {
  const kiln::CausalLM lm = kiln::load_causal_lm((fixture_dir() / arch).string());
  BOOST_TEST(lm.config().architecture == architecture_name);
  const double tolerance = tolerance_of(lm.dtype());
  const std::string backend = kiln::testing::test_backend();
  const std::vector<GenerationCase> cases = cases_of(arch);
  BOOST_TEST_REQUIRE(cases.size() == 3u);
  for (const GenerationCase& c : cases) {
    const kiln::Tensor ids = sequence_of(c);
    const kiln::Model model = lm.forward_model(1, ids.shape()[1]);
    const std::string name = arch + " prompt of " + std::to_string(c.prompt.size());
    const auto reference = [&](const std::vector<kiln::Tensor>& inputs) {
      return kiln::graph::run_reference(kiln::internal::graph(model), inputs)[0];
    };
    check_logits(reference({ids}), c, tolerance, name + " reference");
    kiln::EagerModel eager = kiln::eager(model, {.backend = backend});
    check_logits(eager({ids})[0], c, tolerance, name + " eager");
    for (const kiln::Mode mode : {kiln::Mode::default_, kiln::Mode::reduce_overhead}) {
      kiln::CompiledModel compiled = kiln::compile(model, {.backend = backend, .mode = mode, .fullgraph = true});
      check_logits(compiled({ids})[0], c, tolerance, name + " compiled (" + std::string(kiln::mode_name(mode)) + ")");
    }
  }
}

// Generation as transformers ran it, step by step over a static cache:
// every token of the sequence fed one at a time (`chunk` tokens at a time
// for the prompt), the caches carried from each step to the next, the
// logits of each step checked against transformers' row and its greedy pick
// against transformers' token. `step` runs the step model on host inputs
// and device caches.
using StepFn = std::function<std::vector<kiln::CallInput>(const std::vector<kiln::CallInput>&)>;

kiln::Tensor host(const kiln::CallInput& value) {
  return std::holds_alternative<kiln::Tensor>(value) ? std::get<kiln::Tensor>(value)
                                                     : std::get<kiln::DeviceTensor>(value).to_host();
}

void check_steps(const kiln::CausalLM& lm, const GenerationCase& c, std::int64_t chunk, std::int64_t cache_length,
                 const std::function<StepFn(std::int64_t query_length)>& step_for, double tolerance,
                 const std::string& how) {
  const kiln::CausalLMConfig& config = lm.config();
  std::vector<std::int64_t> ids = c.prompt;
  ids.insert(ids.end(), c.new_tokens.begin(), c.new_tokens.end() - 1);
  std::vector<kiln::CallInput> caches;
  for (std::int64_t i = 0; i < 2 * config.num_layers; ++i)
    caches.push_back(kiln::Tensor(lm.dtype(), {1, config.num_kv_heads, cache_length, config.head_dim}));
  const std::int64_t n = static_cast<std::int64_t>(ids.size()), vocab = config.vocab_size;
  const std::int64_t prompt = static_cast<std::int64_t>(c.prompt.size());
  double scale = 1.0, worst = 0.0;
  for (float v : c.logits.values<float>()) scale = std::max(scale, std::fabs(double(v)));
  for (std::int64_t position = 0; position < n;) {
    const std::int64_t length = position < prompt ? std::min(chunk, prompt - position) : 1;
    std::vector<std::int64_t> position_ids(static_cast<std::size_t>(length));
    for (std::int64_t i = 0; i < length; ++i) position_ids[i] = position + i;
    std::vector<kiln::CallInput> inputs = {
        kiln::Tensor::from_i64({1, length}, std::vector<std::int64_t>(ids.begin() + position, ids.begin() + position + length)),
        kiln::Tensor::from_i64({1}, {position}), kiln::Tensor::from_i64({1, length}, position_ids),
        kiln::Tensor::from_i64({1, cache_length}, std::vector<std::int64_t>(static_cast<std::size_t>(cache_length), 1))};
    inputs.insert(inputs.end(), caches.begin(), caches.end());
    std::vector<kiln::CallInput> outputs = step_for(length)(inputs);
    BOOST_TEST_REQUIRE(outputs.size() == caches.size() + 1);
    caches.assign(outputs.begin() + 1, outputs.end());
    const kiln::Tensor logits = host(outputs[0]);
    BOOST_TEST_REQUIRE((logits.shape() == kiln::Shape{1, vocab}), how << ": logits " << kiln::shape_str(logits.shape()));
    position += length;
    const std::int64_t row = position - 1;
    const float* want = c.logits.values<float>().data() + row * vocab;
    const float* got = logits.values<float>().data();
    for (std::int64_t k = 0; k < vocab; ++k) worst = std::max(worst, std::fabs(double(got[k]) - want[k]));
    if (row >= prompt - 1) {
      const std::int64_t pick = std::max_element(got, got + vocab) - got;
      BOOST_TEST(pick == c.new_tokens[row - prompt + 1], how << ": at position " << row << " picks " << pick);
    }
  }
  BOOST_TEST(worst / scale <= tolerance, how << ": step logits differ by " << worst << " (scale " << scale << ")");
  BOOST_TEST_MESSAGE(how << ": step logits within " << worst / scale << " of their scale");
}

void check_generation_steps(const std::string& arch) {
  const kiln::CausalLM lm = kiln::load_causal_lm((fixture_dir() / arch).string());
  const double tolerance = tolerance_of(lm.dtype());
  const std::string backend = kiln::testing::test_backend();
  const std::vector<GenerationCase> cases = cases_of(arch);
  constexpr std::int64_t kCache = 48;  // the longest case: 23 + 24 positions
  for (const GenerationCase& c : cases) {
    const std::string name = arch + " prompt of " + std::to_string(c.prompt.size());
    // The reference, with the whole prompt in one step, then in steps of 5.
    for (const std::int64_t chunk : {static_cast<std::int64_t>(c.prompt.size()), std::int64_t{5}}) {
      check_steps(lm, c, chunk, kCache, [&](std::int64_t length) -> StepFn {
        auto model = std::make_shared<kiln::Model>(lm.step_model(1, length, kCache));
        return [model](const std::vector<kiln::CallInput>& inputs) {
          std::vector<kiln::Tensor> host_inputs;
          for (const kiln::CallInput& input : inputs) host_inputs.push_back(host(input));
          std::vector<kiln::CallInput> out;
          for (kiln::Tensor& t : kiln::graph::run_reference(kiln::internal::graph(*model), host_inputs)) out.push_back(t);
          return out;
        };
      }, tolerance, name + " reference, prompt in steps of " + std::to_string(chunk));
    }
  }
  // Token by token on the device, caches staying there: one step model,
  // compiled once for every position.
  const kiln::Model step = lm.step_model(1, 1, kCache);
  kiln::EagerModel eager = kiln::eager(step, {.backend = backend});
  for (const GenerationCase& c : cases)
    check_steps(lm, c, 1, kCache, [&](std::int64_t) -> StepFn {
      return [&](const std::vector<kiln::CallInput>& inputs) {
        const std::vector<kiln::DeviceTensor> out = eager.call_on_device(inputs);
        return std::vector<kiln::CallInput>(out.begin(), out.end());
      };
    }, tolerance, arch + " prompt of " + std::to_string(c.prompt.size()) + " eager");
  for (const kiln::Mode mode : {kiln::Mode::default_, kiln::Mode::reduce_overhead}) {
    kiln::CompiledModel compiled = kiln::compile(step, {.backend = backend, .mode = mode, .fullgraph = true});
    int compiled_kernels = -1;
    for (const GenerationCase& c : cases) {
      check_steps(lm, c, 1, kCache, [&](std::int64_t) -> StepFn {
        return [&](const std::vector<kiln::CallInput>& inputs) {
          const std::vector<kiln::DeviceTensor> out = compiled.call_on_device(inputs);
          return std::vector<kiln::CallInput>(out.begin(), out.end());
        };
      }, tolerance, arch + " prompt of " + std::to_string(c.prompt.size()) + " compiled (" + std::string(kiln::mode_name(mode)) + ")");
      const kiln::RunStats stats = compiled.stats();
      BOOST_TEST(stats.shape_sets == 1);
      BOOST_TEST(stats.host_steps_per_run == 0);
      // Every position after the first call compiles nothing.
      if (compiled_kernels < 0) compiled_kernels = stats.kernel_cache_misses + stats.kernel_cache_hits;
      BOOST_TEST(stats.kernel_cache_misses + stats.kernel_cache_hits == compiled_kernels);
    }
  }
}

// A copy of a fixture in a temporary folder, to damage.
struct ScratchCheckpoint {
  fs::path dir;
  explicit ScratchCheckpoint(const std::string& arch) {
    dir = fs::temp_directory_path() / ("kiln-causal-lm-" + arch + "-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::copy(fixture_dir() / arch, dir, fs::copy_options::recursive);
  }
  ~ScratchCheckpoint() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
  void edit_config(const std::function<void(nlohmann::json&)>& edit) const {
    nlohmann::json config = read_json(dir / "config.json");
    edit(config);
    std::ofstream(dir / "config.json") << config.dump(1);
  }
};

// The error load_causal_lm (or load_safetensors) throws, as kind and message.
std::pair<kiln::ErrorKind, std::string> load_error(const std::function<void()>& load) {
  try {
    load();
  } catch (const kiln::Error& e) {
    return {e.kind(), e.what()};
  }
  BOOST_FAIL("no error");
  return {};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A .safetensors file from a header (JSON text) and a data section.
void write_safetensors(const fs::path& path, const std::string& header, std::size_t data_bytes) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  bytes += header;
  bytes += std::string(data_bytes, '\0');
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace

BOOST_AUTO_TEST_CASE(gpt2_matches_transformers) { check_architecture("gpt2", "GPT2LMHeadModel"); }
BOOST_AUTO_TEST_CASE(llama_from_shards_matches_transformers) { check_architecture("llama", "LlamaForCausalLM"); }
BOOST_AUTO_TEST_CASE(llama3_rope_scaling_matches_transformers) { check_architecture("llama3", "LlamaForCausalLM"); }
BOOST_AUTO_TEST_CASE(qwen2_matches_transformers) { check_architecture("qwen2", "Qwen2ForCausalLM"); }
BOOST_AUTO_TEST_CASE(mistral_matches_transformers) { check_architecture("mistral", "MistralForCausalLM"); }
BOOST_AUTO_TEST_CASE(mistral_sliding_window_matches_transformers) {
  check_architecture("mistral_window", "MistralForCausalLM");
}
BOOST_AUTO_TEST_CASE(gemma_in_bf16_matches_transformers) { check_architecture("gemma", "GemmaForCausalLM"); }

BOOST_AUTO_TEST_CASE(gpt2_generates_over_a_static_cache) { check_generation_steps("gpt2"); }
BOOST_AUTO_TEST_CASE(llama_generates_over_a_static_cache) { check_generation_steps("llama"); }
BOOST_AUTO_TEST_CASE(llama3_rope_scaling_generates_over_a_static_cache) { check_generation_steps("llama3"); }
BOOST_AUTO_TEST_CASE(qwen2_generates_over_a_static_cache) { check_generation_steps("qwen2"); }
BOOST_AUTO_TEST_CASE(mistral_generates_over_a_static_cache) { check_generation_steps("mistral"); }
BOOST_AUTO_TEST_CASE(mistral_sliding_window_generates_over_a_static_cache) { check_generation_steps("mistral_window"); }
BOOST_AUTO_TEST_CASE(gemma_in_bf16_generates_over_a_static_cache) { check_generation_steps("gemma"); }

BOOST_AUTO_TEST_CASE(config_fields_are_read) {
  const kiln::CausalLM gemma = kiln::load_causal_lm((fixture_dir() / "gemma").string());
  const kiln::CausalLMConfig& c = gemma.config();
  BOOST_TEST((c.dtype == kiln::DType::bf16));
  BOOST_TEST((gemma.dtype() == kiln::DType::bf16));
  BOOST_TEST(c.num_kv_heads == 1);
  BOOST_TEST(c.head_dim == 16);
  BOOST_TEST(c.tie_word_embeddings);
  BOOST_TEST((c.eos_token_ids == std::vector<std::int64_t>{2}));
  BOOST_TEST((c.bos_token_id == std::optional<std::int64_t>(1)));
  const kiln::CausalLM llama = kiln::load_causal_lm((fixture_dir() / "llama").string());
  BOOST_TEST(llama.config().num_kv_heads == 2);
  BOOST_TEST(!llama.config().tie_word_embeddings);
  // Another type at load: the weights converted once, the logits still f32.
  const kiln::CausalLM in_f32 = kiln::load_causal_lm((fixture_dir() / "gemma").string(), {.dtype = kiln::DType::f32});
  BOOST_TEST((in_f32.dtype() == kiln::DType::f32));
  // explain() says what load found and did.
  BOOST_TEST(gemma.explain().find("computing in bf16, the weights as stored") != std::string::npos, gemma.explain());
  BOOST_TEST(in_f32.explain().find("bf16 (") != std::string::npos, in_f32.explain());
  BOOST_TEST(in_f32.explain().find("computing in f32: ") != std::string::npos, in_f32.explain());
  BOOST_TEST(in_f32.explain().find("converted once, at load (CausalLMOptions::dtype)") != std::string::npos, in_f32.explain());
  const kiln::Model model = in_f32.forward_model(2, 5);
  const std::vector<kiln::Tensor> inputs = {kiln::Tensor(kiln::DType::i64, {2, 5})};
  const auto out = kiln::graph::run_reference(kiln::internal::graph(model), inputs);
  BOOST_TEST((out[0].shape() == kiln::Shape{2, 5, 96}));
  BOOST_TEST((out[0].dtype() == kiln::DType::f32));
  BOOST_CHECK_THROW(in_f32.forward_model(1, 65), kiln::Error);  // past max_position_embeddings
  BOOST_CHECK_THROW(in_f32.forward_model(0, 4), kiln::Error);
}

BOOST_AUTO_TEST_CASE(unknown_architectures_and_fields_are_refused) {
  ScratchCheckpoint scratch("llama");
  scratch.edit_config([](nlohmann::json& c) { c["architectures"] = {"FalconForCausalLM"}; });
  auto [kind, message] = load_error([&] { kiln::load_causal_lm(scratch.dir.string()); });
  BOOST_TEST((kind == kiln::ErrorKind::Unsupported));
  BOOST_TEST(contains(message, "FalconForCausalLM"), message);
  BOOST_TEST(contains(message, "LlamaForCausalLM"), message);

  scratch.edit_config([](nlohmann::json& c) {
    c["architectures"] = {"LlamaForCausalLM"};
    c["attn_logit_softcapping"] = 50.0;
  });
  std::tie(kind, message) = load_error([&] { kiln::load_causal_lm(scratch.dir.string()); });
  BOOST_TEST((kind == kiln::ErrorKind::Unsupported));
  BOOST_TEST(contains(message, "attn_logit_softcapping"), message);

  scratch.edit_config([](nlohmann::json& c) {
    c.erase("attn_logit_softcapping");
    c["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  });
  std::tie(kind, message) = load_error([&] { kiln::load_causal_lm(scratch.dir.string()); });
  BOOST_TEST((kind == kiln::ErrorKind::Unsupported));
  BOOST_TEST(contains(message, "rope_scaling"), message);

  scratch.edit_config([](nlohmann::json& c) {
    c["rope_scaling"] = nullptr;
    c["hidden_size"] = 48;  // the weights are 32 wide
  });
  std::tie(kind, message) = load_error([&] { kiln::load_causal_lm(scratch.dir.string()); });
  BOOST_TEST((kind == kiln::ErrorKind::Corrupt));
  BOOST_TEST(contains(message, "model.embed_tokens.weight"), message);
}

BOOST_AUTO_TEST_CASE(missing_and_unused_weights_are_named) {
  ScratchCheckpoint scratch("qwen2");
  // The config of a Llama (no q/k/v biases) over Qwen2's weights: the biases go unused.
  scratch.edit_config([](nlohmann::json& c) {
    c["architectures"] = {"LlamaForCausalLM"};
    c.erase("sliding_window");
    c.erase("use_sliding_window");
    c.erase("max_window_layers");
  });
  auto [kind, message] = load_error([&] { kiln::load_causal_lm(scratch.dir.string()); });
  BOOST_TEST((kind == kiln::ErrorKind::InvalidArgument));
  BOOST_TEST(contains(message, "q_proj.bias"), message);
  // Untied: lm_head.weight is needed and missing.
  scratch.edit_config([](nlohmann::json& c) {
    c["architectures"] = {"Qwen2ForCausalLM"};
    c["tie_word_embeddings"] = false;
  });
  std::tie(kind, message) = load_error([&] { kiln::load_causal_lm(scratch.dir.string()); });
  BOOST_TEST((kind == kiln::ErrorKind::InvalidArgument));
  BOOST_TEST(contains(message, "lm_head.weight"), message);
}

BOOST_AUTO_TEST_CASE(damaged_safetensors_are_named) {
  ScratchCheckpoint scratch("gpt2");
  const fs::path file = scratch.dir / "bad.safetensors";
  const auto error_of = [&] { return load_error([&] { kiln::load_safetensors(file.string()); }); };

  write_safetensors(file, R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8);  // truncated
  auto [kind, message] = error_of();
  BOOST_TEST((kind == kiln::ErrorKind::Corrupt));
  BOOST_TEST((contains(message, "'a'") && contains(message, "truncated")), message);

  write_safetensors(file, R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 12]}})", 16);  // wrong size
  std::tie(kind, message) = error_of();
  BOOST_TEST((kind == kiln::ErrorKind::Corrupt && contains(message, "needs 16 bytes")), message);

  write_safetensors(file,
                    R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                        "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})",
                    16);
  std::tie(kind, message) = error_of();
  BOOST_TEST((kind == kiln::ErrorKind::Corrupt && contains(message, "overlap")), message);

  write_safetensors(file, R"({"a": {"dtype": "F64", "shape": [2], "data_offsets": [0, 16]}})", 16);
  std::tie(kind, message) = error_of();
  BOOST_TEST((kind == kiln::ErrorKind::Unsupported && contains(message, "F64")), message);

  write_safetensors(file, R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4);
  std::tie(kind, message) = error_of();
  BOOST_TEST((kind == kiln::ErrorKind::Corrupt && contains(message, "shape")), message);

  write_safetensors(file, "not json at all", 0);
  std::tie(kind, message) = error_of();
  BOOST_TEST((kind == kiln::ErrorKind::Corrupt && contains(message, "JSON")), message);

  std::ofstream(file, std::ios::binary) << std::string("\xff\xff\xff\xff\x00\x00\x00\x00{}", 10);  // header past the end
  std::tie(kind, message) = error_of();
  BOOST_TEST((kind == kiln::ErrorKind::Corrupt && contains(message, "header length")), message);

  // A checkpoint whose model.safetensors is cut short.
  const fs::path model = scratch.dir / "model.safetensors";
  fs::resize_file(model, fs::file_size(model) - 100);
  std::tie(kind, message) = load_error([&] { kiln::load_causal_lm(scratch.dir.string()); });
  BOOST_TEST((kind == kiln::ErrorKind::Corrupt && contains(message, "model.safetensors")), message);
}

BOOST_AUTO_TEST_CASE(sharded_checkpoints_follow_their_index) {
  const auto tensors = kiln::load_safetensors_checkpoint((fixture_dir() / "llama").string());
  BOOST_TEST(tensors.count("lm_head.weight") == 1u);
  BOOST_TEST(tensors.count("model.layers.1.mlp.down_proj.weight") == 1u);
  ScratchCheckpoint scratch("llama");
  fs::remove(scratch.dir / "model-00002-of-00002.safetensors");
  auto [kind, message] = load_error([&] { kiln::load_causal_lm(scratch.dir.string()); });
  BOOST_TEST((kind == kiln::ErrorKind::NotFound && contains(message, "model-00002-of-00002.safetensors")), message);
  fs::remove(scratch.dir / "model.safetensors.index.json");
  std::tie(kind, message) = load_error([&] { kiln::load_causal_lm(scratch.dir.string()); });
  BOOST_TEST((kind == kiln::ErrorKind::NotFound && contains(message, "model.safetensors")), message);
}

BOOST_AUTO_TEST_CASE(safetensors_round_trip) {
  ScratchCheckpoint scratch("gpt2");
  std::map<std::string, kiln::Tensor> tensors = {
      {"a.f32", kiln::Tensor::from_f32({2, 3}, {1, 2, 3, 4, 5, -6.5f})},
      {"b.i64", kiln::Tensor::from_i64({3}, {-1, 0, 1LL << 40})},
      {"c.bf16", kiln::Tensor::from_f32({3}, {1.0f, -2.0f, 0.5f}).to(kiln::DType::bf16)},
      {"d.u8", kiln::Tensor(kiln::DType::u8, {5})},
      {"e.empty", kiln::Tensor(kiln::DType::f16, {0, 4})},
  };
  tensors["d.u8"].values<std::uint8_t>()[4] = 200;
  const std::string path = (scratch.dir / "round.safetensors").string();
  kiln::save_safetensors(path, tensors);
  const auto back = kiln::load_safetensors(path);
  BOOST_TEST_REQUIRE(back.size() == tensors.size());
  for (const auto& [name, tensor] : tensors) {
    const kiln::Tensor& t = back.at(name);
    BOOST_TEST((t.dtype() == tensor.dtype() && t.shape() == tensor.shape()), name);
    BOOST_TEST(std::equal(t.bytes().begin(), t.bytes().end(), tensor.bytes().begin(), tensor.bytes().end()), name);
  }
  // A checkpoint written back loads as the same model.
  auto weights = kiln::load_safetensors((scratch.dir / "model.safetensors").string());
  kiln::save_safetensors((scratch.dir / "model.safetensors").string(), weights);
  BOOST_TEST(kiln::load_causal_lm(scratch.dir.string()).config().architecture == "GPT2LMHeadModel");
}

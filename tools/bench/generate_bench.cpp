// generate_bench: text generation's speed per mode (docs/benchmarks/generation.md).
// Writes a random-weight Hugging Face checkpoint of a named shape to a
// temporary folder (config.json, model.safetensors), then per mode: the
// step's compile time, time to first token and decode tokens/s (median over
// rounds, each a fresh generate() of --new-tokens after a prompt of
// --prompt tokens), and the weight bytes each decode step reads, so that
// tokens/s x weight bytes can be set against the device's copy bandwidth.
//
//   build/tools/generate_bench --shape llama-100m --modes eager,default,reduce-overhead
//   build/tools/generate_bench --shape gemma-2b-layers --layers 2 --backend cpu
#include <kiln/generate.h>
#include <kiln/safetensors.h>

#include "bench/temp_dir.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Shape {
  std::string architecture;
  nlohmann::json config;
  std::string note;
};

// Shapes worth measuring: a ~100M-parameter Llama and Gemma-2B's layers
// (its 256k vocabulary cut to 16k: the 1 GB embedding needs a tensor split
// across bindings, which kiln does not do yet).
Shape shape_named(const std::string& name, std::int64_t layers) {
  if (name == "llama-100m")
    return {"LlamaForCausalLM",
            {{"architectures", {"LlamaForCausalLM"}}, {"vocab_size", 32000}, {"hidden_size", 768},
             {"intermediate_size", 2048}, {"num_hidden_layers", layers ? layers : 12}, {"num_attention_heads", 12},
             {"num_key_value_heads", 4}, {"max_position_embeddings", 1024}, {"rms_norm_eps", 1e-5},
             {"rope_theta", 10000.0}, {"tie_word_embeddings", false}, {"torch_dtype", "float32"},
             {"bos_token_id", 1}, {"eos_token_id", 2}},
            "Llama, 768 wide, 12 heads (4 key/value heads), vocabulary 32000"};
  if (name == "gemma-2b-layers")
    return {"GemmaForCausalLM",
            {{"architectures", {"GemmaForCausalLM"}}, {"vocab_size", 16384}, {"hidden_size", 2048},
             {"intermediate_size", 16384}, {"num_hidden_layers", layers ? layers : 2}, {"num_attention_heads", 8},
             {"num_key_value_heads", 1}, {"head_dim", 256}, {"max_position_embeddings", 8192},
             {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0}, {"hidden_activation", "gelu_pytorch_tanh"},
             {"torch_dtype", "bfloat16"}, {"bos_token_id", 2}, {"eos_token_id", 1}},
            "Gemma-2B's layers (2048 wide, MLP 16384, 8 heads of 256, one key/value head), vocabulary cut to 16384"};
  if (name == "tiny")
    return {"GPT2LMHeadModel",
            {{"architectures", {"GPT2LMHeadModel"}}, {"vocab_size", 512}, {"n_embd", 128}, {"n_layer", layers ? layers : 2},
             {"n_head", 4}, {"n_positions", 256}, {"torch_dtype", "float32"}, {"bos_token_id", 0}, {"eos_token_id", 0}},
            "GPT-2, 128 wide, vocabulary 512"};
  throw std::runtime_error("unknown --shape '" + name + "' (llama-100m, gemma-2b-layers, tiny)");
}

// Random weights for every tensor the architecture reads: the names and
// shapes come from the model itself (a load with an empty checkpoint names
// the first missing weight; instead, build the names from the config).
std::map<std::string, kiln::Tensor> random_weights(const Shape& shape) {
  const nlohmann::json& c = shape.config;
  std::map<std::string, kiln::Tensor> weights;
  std::uint64_t state = 0x9E3779B97F4A7C15ull;
  const kiln::DType dtype = c["torch_dtype"] == "bfloat16" ? kiln::DType::bf16 : kiln::DType::f32;
  const auto add = [&](const std::string& name, kiln::Shape s, float scale, float offset = 0.0f) {
    kiln::Tensor t(kiln::DType::f32, s);
    for (float& v : t.values<float>()) {
      state ^= state << 13, state ^= state >> 7, state ^= state << 17;
      v = offset + scale * (static_cast<float>(state >> 40) / static_cast<float>(1u << 24) * 2.0f - 1.0f);
    }
    weights.emplace(name, t.to(dtype));
  };
  if (shape.architecture == "GPT2LMHeadModel") {
    const std::int64_t h = c["n_embd"], v = c["vocab_size"], p = c["n_positions"];
    add("transformer.wte.weight", {v, h}, 0.02f);
    add("transformer.wpe.weight", {p, h}, 0.02f);
    for (std::int64_t l = 0; l < c["n_layer"].get<std::int64_t>(); ++l) {
      const std::string b = "transformer.h." + std::to_string(l) + ".";
      for (const char* ln : {"ln_1", "ln_2"}) add(b + ln + ".weight", {h}, 0.1f, 1.0f), add(b + ln + ".bias", {h}, 0.1f);
      add(b + "attn.c_attn.weight", {h, 3 * h}, 0.02f), add(b + "attn.c_attn.bias", {3 * h}, 0.02f);
      add(b + "attn.c_proj.weight", {h, h}, 0.02f), add(b + "attn.c_proj.bias", {h}, 0.02f);
      add(b + "mlp.c_fc.weight", {h, 4 * h}, 0.02f), add(b + "mlp.c_fc.bias", {4 * h}, 0.02f);
      add(b + "mlp.c_proj.weight", {4 * h, h}, 0.02f), add(b + "mlp.c_proj.bias", {h}, 0.02f);
    }
    add("transformer.ln_f.weight", {h}, 0.1f, 1.0f), add("transformer.ln_f.bias", {h}, 0.1f);
    return weights;
  }
  const std::int64_t h = c["hidden_size"], v = c["vocab_size"], m = c["intermediate_size"];
  const std::int64_t heads = c["num_attention_heads"], kv = c["num_key_value_heads"];
  const std::int64_t d = c.contains("head_dim") ? c["head_dim"].get<std::int64_t>() : h / heads;
  const bool gemma = shape.architecture == "GemmaForCausalLM";
  add("model.embed_tokens.weight", {v, h}, 0.02f);
  for (std::int64_t l = 0; l < c["num_hidden_layers"].get<std::int64_t>(); ++l) {
    const std::string b = "model.layers." + std::to_string(l) + ".";
    add(b + "input_layernorm.weight", {h}, 0.1f, gemma ? 0.0f : 1.0f);
    add(b + "post_attention_layernorm.weight", {h}, 0.1f, gemma ? 0.0f : 1.0f);
    add(b + "self_attn.q_proj.weight", {heads * d, h}, 0.02f);
    add(b + "self_attn.k_proj.weight", {kv * d, h}, 0.02f);
    add(b + "self_attn.v_proj.weight", {kv * d, h}, 0.02f);
    add(b + "self_attn.o_proj.weight", {h, heads * d}, 0.02f);
    add(b + "mlp.gate_proj.weight", {m, h}, 0.02f);
    add(b + "mlp.up_proj.weight", {m, h}, 0.02f);
    add(b + "mlp.down_proj.weight", {h, m}, 0.02f);
  }
  add("model.norm.weight", {h}, 0.1f, gemma ? 0.0f : 1.0f);
  if (!gemma) add("lm_head.weight", {v, h}, 0.02f);
  return weights;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Where a decode step's time goes: each kernel alone (CompiledModel::profile),
// summed by kernel name up to its knobs.
int profile_step(const kiln::CausalLM& lm, const std::string& backend, std::int64_t cache_length, int calls) {
  const kiln::CausalLMConfig& c = lm.config();
  const kiln::Model step = lm.step_model(1, 1, cache_length);
  kiln::CompiledModel compiled = kiln::compile(step, {.backend = backend});
  std::vector<kiln::Tensor> inputs = {kiln::Tensor::from_i64({1, 1}, {5}), kiln::Tensor::from_i64({1}, {cache_length / 2}),
                                      kiln::Tensor::from_i64({1, 1}, {cache_length / 2}), kiln::Tensor(kiln::DType::i64, {1, cache_length})};
  for (std::int64_t& v : inputs[3].values<std::int64_t>()) v = 1;
  for (std::int64_t i = 0; i < 2 * c.num_layers; ++i)
    inputs.emplace_back(lm.dtype(), kiln::Shape{1, c.num_kv_heads, cache_length, c.head_dim});
  const std::vector<kiln::KernelTiming> timings = compiled.profile(inputs, calls);
  std::map<std::string, std::pair<double, int>> families;
  double total = 0;
  for (const kiln::KernelTiming& t : timings) {
    const std::string family = t.kernel.substr(0, t.kernel.find_first_of("0123456789"));
    families[family].first += t.ms;
    ++families[family].second;
    total += t.ms;
  }
  std::vector<std::pair<double, std::string>> order;
  for (const auto& [family, sum] : families) order.emplace_back(sum.first, family);
  std::sort(order.rbegin(), order.rend());
  std::printf("decode step, cache of %lld: %zu dispatches, %.2f ms in all (each alone, median of %d)\n",
              static_cast<long long>(cache_length), timings.size(), total, calls);
  for (const auto& [ms, family] : order)
    std::printf("%10.3f ms %6.1f%% %5d  %s\n", ms, 100 * ms / total, families[family].second, family.c_str());
  std::vector<const kiln::KernelTiming*> slowest;
  for (const kiln::KernelTiming& t : timings) slowest.push_back(&t);
  std::sort(slowest.begin(), slowest.end(), [](const auto* a, const auto* b) { return a->ms > b->ms; });
  std::printf("slowest dispatches:\n");
  for (std::size_t i = 0; i < slowest.size() && i < 8; ++i)
    std::printf("%10.3f ms  %s -> %s\n", slowest[i]->ms, slowest[i]->kernel.c_str(), slowest[i]->output.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Text generation's speed per mode on a random-weight checkpoint"};
  std::string shape_name = "llama-100m", backend = "vulkan", modes_text = "eager,default,reduce-overhead";
  std::int64_t layers = 0, prompt = 16, new_tokens = 32, prefill_chunk = 0, max_length = 0, vocabulary = 0;
  int rounds = 3;
  int profile_calls = 0;
  app.add_option("--shape", shape_name, "llama-100m, gemma-2b-layers or tiny")->capture_default_str();
  app.add_option("--layers", layers, "decoder layers (0: the shape's)");
  app.add_option("--vocabulary", vocabulary, "vocabulary size (0: the shape's; gemma-2b-layers: 256000 is Gemma-2B's)");
  app.add_option("--backend", backend)->capture_default_str();
  app.add_option("--modes", modes_text, "eager, default, reduce-overhead, max-autotune")->capture_default_str();
  app.add_option("--prompt", prompt, "prompt tokens")->capture_default_str();
  app.add_option("--new-tokens", new_tokens, "tokens generated per round")->capture_default_str();
  app.add_option("--rounds", rounds, "generate() calls per mode; medians")->capture_default_str();
  app.add_option("--max-length", max_length,
                 "positions the static cache holds (GeneratorOptions::max_length; 0: prompt + new tokens)");
  app.add_option("--prefill-chunk", prefill_chunk, "GeneratorOptions::prefill_chunk (0: a token per step)")->capture_default_str();
  app.add_option("--profile", profile_calls,
                 "instead: the compiled decode step (cache of prompt + new tokens) run this many times with each "
                 "kernel in its own submission; time per kernel family (medians)");
  CLI11_PARSE(app, argc, argv);

  Shape shape = shape_named(shape_name, layers);
  if (vocabulary != 0) {
    shape.config["vocab_size"] = vocabulary;
    shape.note = shape.note.substr(0, shape.note.find(", vocabulary")) + ", vocabulary " + std::to_string(vocabulary);
  }
  kiln::tools::bench::TempDir dir("kiln-generate-bench");
  std::ofstream(dir.path() / "config.json") << shape.config.dump(1);
  const std::map<std::string, kiln::Tensor> weights = random_weights(shape);
  std::uint64_t weight_bytes = 0;
  for (const auto& [name, t] : weights) weight_bytes += t.nbytes();
  kiln::save_safetensors((dir.path() / "model.safetensors").string(), weights);
  const kiln::CausalLM lm = kiln::load_causal_lm(dir.path().string());
  std::printf("%s: %s; %.1f M parameters, %.1f MB of weights (%s); prompt %lld tokens (prefill chunk %lld), %lld new, %d rounds, %s\n",
              shape_name.c_str(), shape.note.c_str(), static_cast<double>(weight_bytes) / kiln::dtype_size(lm.dtype()) / 1e6,
              static_cast<double>(weight_bytes) / 1e6, std::string(kiln::dtype_name(lm.dtype())).c_str(),
              static_cast<long long>(prompt), static_cast<long long>(prefill_chunk), static_cast<long long>(new_tokens), rounds,
              backend.c_str());
  if (profile_calls > 0) return profile_step(lm, backend, prompt + new_tokens, profile_calls);
  std::printf("%-16s %10s %10s %12s %12s %12s %10s\n", "mode", "compile", "ttft", "prefill t/s", "decode t/s",
              "weights GB/s", "device MB");
  std::vector<std::int64_t> prompt_ids(static_cast<std::size_t>(prompt));
  for (std::int64_t i = 0; i < prompt; ++i) prompt_ids[i] = 3 + (i * 7919) % 500;
  std::stringstream modes(modes_text);
  std::string mode;
  while (std::getline(modes, mode, ',')) {
    kiln::GeneratorOptions options;
    options.compile.backend = backend;
    options.eager = mode == "eager";
    if (!options.eager) options.compile.mode = kiln::parse_mode(mode);
    options.max_length = max_length != 0 ? max_length : prompt + new_tokens;
    options.prefill_chunk = prefill_chunk;
    kiln::Generator gen(lm, options);
    double compile_ms = 0;
    std::vector<double> ttft, prefill, decode;
    std::uint64_t device_bytes = 0;
    for (int r = 0; r < rounds; ++r) {
      const kiln::GenerationResult result = gen.generate(
          prompt_ids, {.max_new_tokens = new_tokens, .stop_token_ids = std::vector<std::int64_t>{}});
      compile_ms += result.stats.compile_ms;
      ttft.push_back(result.stats.time_to_first_token_ms);
      prefill.push_back(result.stats.prefill_tokens_per_s);
      decode.push_back(result.stats.decode_tokens_per_s);
      device_bytes = result.stats.peak_device_bytes;
    }
    std::printf("%-16s %8.0f ms %7.1f ms %12.2f %12.2f %12.2f %10.1f\n", mode.c_str(), compile_ms, median(ttft),
                median(prefill), median(decode), median(decode) * static_cast<double>(weight_bytes) / 1e9,
                static_cast<double>(device_bytes) / 1e6);
    std::fflush(stdout);
  }
  return 0;
}

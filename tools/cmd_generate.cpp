// `kiln generate DIR --prompt "text"` (or --prompt-ids 1,17,42): text
// generation with a Hugging Face causal LM (kiln::Generator), the text (or,
// without a tokenizer in the folder, the ids) streamed as it comes, then the
// timings; --json prints one object for scripts.
#include "commands.h"
#include "model_args.h"
#include "src/base/check.h"

#include <kiln/generate.h>
#include <kiln/tokenizer.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <iostream>
#include <memory>
#include <sstream>

namespace kiln::tools {
namespace {

struct GenerateArgs {
  std::string folder;
  std::string prompt;
  std::string prompt_ids;
  std::vector<std::string> stop_strings;
  std::string stop_ids = "model";
  std::int64_t max_new_tokens = 32;
  std::int64_t max_length = 0;
  std::int64_t prefill_chunk = 0;
  float temperature = 0.0f;
  std::int64_t top_k = 0;
  float top_p = 1.0f;
  std::uint64_t seed = 0;
  std::string backend = "vulkan";
  std::string device;
  std::string mode = "default";
  bool fullgraph = false;
  bool eager = false;
  std::string dtype = "model";
  std::string cache_dir;
  std::vector<std::string> settings;
  bool json = false;
  bool bench = false;
  std::string modes = "eager,default,reduce-overhead";
  int rounds = 3;
};

// "1,17,42" (commas or spaces) as token ids; throws InvalidArgument naming a bad one.
std::vector<std::int64_t> parse_ids(const std::string& text, const std::string& option) {
  std::vector<std::int64_t> ids;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) {
    std::istringstream words(item);
    std::string word;
    while (words >> word) {
      std::size_t used = 0;
      std::int64_t id = -1;
      try {
        id = std::stoll(word, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      KILN_CHECK(used == word.size() && id >= 0, ErrorKind::InvalidArgument,
                 option + ": '" + word + "' is not a token id (a non-negative integer)");
      ids.push_back(id);
    }
  }
  return ids;
}

std::string mib(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// --bench: the same generation in each mode, `rounds` times; medians.
void run_bench(const GenerateArgs& a, const CausalLM& lm, GeneratorOptions options, const std::vector<std::int64_t>& prompt,
               const GenerationConfig& config) {
  std::printf("%s in %s on %s: %zu prompt tokens, up to %lld new, %d rounds per mode (medians)\n",
              lm.config().architecture.c_str(), std::string(dtype_name(lm.dtype())).c_str(), a.backend.c_str(),
              prompt.size(), static_cast<long long>(config.max_new_tokens), a.rounds);
  std::printf("%-16s %10s %12s %14s %14s %10s\n", "mode", "compile", "first token", "prefill tok/s", "decode tok/s",
              "device");
  std::stringstream modes(a.modes);
  std::string mode;
  while (std::getline(modes, mode, ',')) {
    options.eager = mode == "eager";
    if (!options.eager) options.compile.mode = parse_mode(mode);
    Generator generator(lm, options);
    double compile_ms = 0;
    std::vector<double> first, prefill, decode;
    std::uint64_t device = 0;
    for (int r = 0; r < a.rounds; ++r) {
      const GenerationResult result = generator.generate(prompt, config);
      compile_ms += result.stats.compile_ms;
      first.push_back(result.stats.time_to_first_token_ms);
      prefill.push_back(result.stats.prefill_tokens_per_s);
      decode.push_back(result.stats.decode_tokens_per_s);
      device = result.stats.peak_device_bytes;
    }
    std::printf("%-16s %7.0f ms %9.1f ms %14.2f %14.2f %10s\n", mode.c_str(), compile_ms, median(first),
                median(prefill), median(decode), mib(device).c_str());
    std::fflush(stdout);
  }
}

void run_generate(const GenerateArgs& a) {
  CausalLMOptions load_options;
  if (a.dtype != "model") load_options.dtype = a.dtype == "f32" ? DType::f32 : a.dtype == "f16" ? DType::f16 : DType::bf16;
  CausalLM lm = load_causal_lm(a.folder, load_options);
  GeneratorOptions options;
  options.compile.backend = a.backend;
  options.compile.device = a.device;
  options.compile.mode = parse_mode(a.mode);
  options.compile.fullgraph = a.fullgraph;
  options.compile.cache_dir = a.cache_dir;
  options.compile.settings = parse_settings(a.settings);
  options.eager = a.eager;
  options.max_length = a.max_length;
  options.prefill_chunk = a.prefill_chunk;
  // Text in and out wherever the folder has a tokenizer; --prompt and --stop need one.
  namespace fs = std::filesystem;
  const fs::path folder = fs::is_regular_file(a.folder) ? fs::path(a.folder).parent_path() : fs::path(a.folder);  // an .onnx file's
  const bool has_tokenizer = fs::exists(folder / "tokenizer.json") || fs::exists(folder / "tokenizer.model");
  KILN_CHECK(a.prompt.empty() != a.prompt_ids.empty(), ErrorKind::InvalidArgument,
             "kiln generate takes a prompt: --prompt TEXT or --prompt-ids IDS (one of them)");
  if (has_tokenizer || !a.prompt.empty() || !a.stop_strings.empty()) options.tokenizer = Tokenizer::load(folder.string());
  const std::vector<std::int64_t> prompt =
      a.prompt.empty() ? parse_ids(a.prompt_ids, "--prompt-ids") : options.tokenizer->encode(a.prompt);
  GenerationConfig config{.max_new_tokens = a.max_new_tokens,
                          .temperature = a.temperature,
                          .top_k = a.top_k,
                          .top_p = a.top_p,
                          .seed = a.seed,
                          .stop_strings = a.stop_strings};
  if (a.stop_ids != "model") config.stop_token_ids = parse_ids(a.stop_ids, "--stop-ids");
  if (a.bench) return run_bench(a, lm, options, prompt, config);
  std::optional<TextStream> stream;
  if (options.tokenizer) stream.emplace(*options.tokenizer);
  Generator generator(std::move(lm), options);
  if (!a.json) std::cout << (stream ? a.prompt : std::string("new tokens:")) << std::flush;
  const GenerationResult r = generator.generate(prompt, config, [&](std::int64_t token) {
    if (a.json) return;
    if (stream) std::cout << stream->push(token) << std::flush;
    else std::cout << " " << token << std::flush;
  });
  if (!a.json && stream) std::cout << stream->finish();
  const GenerationStats& s = r.stats;
  const std::string how = a.eager ? "eager" : a.mode;
  if (a.json) {
    nlohmann::json out = {{"model", a.folder},
                          {"architecture", generator.model().config().architecture},
                          {"load", generator.model().explain()},
                          {"dtype", std::string(dtype_name(generator.model().dtype()))},
                          {"backend", a.backend},
                          {"mode", how},
                          {"prompt_ids", prompt},
                          {"new_ids", r.tokens},
                          {"text", r.text},
                          {"stop_reason", r.stop_reason},
                          {"compile_ms", s.compile_ms},
                          {"time_to_first_token_ms", s.time_to_first_token_ms},
                          {"prefill_tokens_per_s", s.prefill_tokens_per_s},
                          {"decode_tokens_per_s", s.decode_tokens_per_s},
                          {"compiles", s.compiles},
                          {"peak_device_bytes", s.peak_device_bytes},
                          {"step_uploaded_bytes", s.step_uploaded_bytes},
                          {"step_downloaded_bytes", s.step_downloaded_bytes},
                          {"cache_length", generator.cache_length()}};
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::cout << "\n"
            << generator.model().config().architecture << " in " << dtype_name(generator.model().dtype()) << ", "
            << a.backend << " " << how << ": " << s.prompt_tokens << " prompt tokens, " << s.new_tokens
            << " new (stopped by " << r.stop_reason << ")\n";
  std::cout << "load: " << generator.model().explain() << "\n";
  std::printf("compile: %.0f ms (%d step model%s, compiled once for every position)\n", s.compile_ms, s.compiles,
              s.compiles == 1 ? "" : "s");
  const bool exported = generator.model().onnx_export().has_value();
  const std::string prefill_how = exported                 ? "the whole prompt in one call"
                                  : a.prefill_chunk > 1 ? std::to_string(a.prefill_chunk) + " tokens per step"
                                                        : "a token per step";
  std::printf("time to first token: %.1f ms; prefill %.1f tokens/s (%s); decode %.1f tokens/s\n",
              s.time_to_first_token_ms, s.prefill_tokens_per_s, prefill_how.c_str(), s.decode_tokens_per_s);
  const std::string cache = exported ? "a cache grown a step at a time"
                                     : "a cache of " + std::to_string(generator.cache_length()) + " positions";
  std::cout << "peak device memory: " << mib(s.peak_device_bytes) << " (weights, " << cache
            << ", activations); a step copies " << s.step_uploaded_bytes << " bytes up and "
            << s.step_downloaded_bytes << " down (the cache stays on the device)\n";
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand(
      "generate",
      "generate text with a Hugging Face causal LM (a folder with config.json, safetensors weights and a "
      "tokenizer: Llama, Mistral, Qwen2, Gemma, GPT-2; or a decoder exported to ONNX with its cache), streaming it, then time to first token, decode tokens/s, "
      "peak device memory and the number of compiles");
  cmd->add_option("model", a->folder, "the model folder, or a decoder exported to ONNX with its cache (an .onnx file)")->required();
  cmd->add_option("--prompt", a->prompt, "the prompt as text (the folder's tokenizer.json or tokenizer.model)");
  cmd->add_option("--prompt-ids", a->prompt_ids, "the prompt as token ids: 1,17,42");
  cmd->add_option("--stop", a->stop_strings, "stop once the new text contains this (repeatable; needs a tokenizer)");
  cmd->add_option("--max-new-tokens", a->max_new_tokens, "tokens to generate at most")->capture_default_str();
  cmd->add_option("--max-length", a->max_length,
                  "positions the cache holds, prompt and new tokens (0: a power of two from 256 that fits the call)")
      ->capture_default_str();
  cmd->add_option("--prefill-chunk", a->prefill_chunk,
                  "feed the prompt N tokens per step (a second compiled step, its own copy of the weights; 0: a token "
                  "per step)")
      ->capture_default_str();
  cmd->add_option("--temperature", a->temperature, "0: greedy; else sample from softmax(logits / T)")->capture_default_str();
  cmd->add_option("--top-k", a->top_k, "sample among the k likeliest tokens (0: all)")->capture_default_str();
  cmd->add_option("--top-p", a->top_p, "sample among the likeliest tokens whose probability reaches p")->capture_default_str();
  cmd->add_option("--seed", a->seed, "the sampling seed: the same seed gives the same tokens")->capture_default_str();
  cmd->add_option("--stop-ids", a->stop_ids, "stop after one of these ids (model: the model's EOS; '' for none)")
      ->capture_default_str();
  cmd->add_option("--backend", a->backend, "vulkan, cuda, hip, cpu")->capture_default_str();
  cmd->add_option("--device", a->device, "a device index or part of its name");
  cmd->add_option("--mode", a->mode, "default, reduce-overhead (replays each step), max-autotune")->capture_default_str();
  cmd->add_flag("--fullgraph", a->fullgraph, "fail unless the step compiles as one graph");
  cmd->add_flag("--eager", a->eager, "run the step op by op (the baseline)");
  cmd->add_option("--dtype", a->dtype, "model (the checkpoint's torch_dtype), f32, f16 or bf16")
      ->check(CLI::IsMember({"model", "f32", "f16", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--cache-dir", a->cache_dir, "where compiled kernels persist (off: nowhere)");
  cmd->add_option("--set", a->settings, "a compiler setting NAME=VALUE (repeatable; kiln settings lists them)");
  cmd->add_flag("--json", a->json, "print one JSON object: prompt and new ids, stop reason, timings");
  cmd->add_flag("--bench", a->bench, "generate --rounds times in each of --modes and print the medians side by side");
  cmd->add_option("--modes", a->modes, "with --bench: eager, default, reduce-overhead, max-autotune")->capture_default_str();
  cmd->add_option("--rounds", a->rounds, "with --bench: generations per mode")->check(CLI::Range(1, 1000))->capture_default_str();
  cmd->callback([a] { run_generate(*a); });
}

}  // namespace kiln::tools

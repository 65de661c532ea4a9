// kiln::Generator (include/kiln/generate.h).
#include <kiln/error.h>
#include <kiln/generate.h>

#include "graph/hf/onnx_export.h"
#include "src/base/check.h"
#include "src/base/log.h"
#include "src/generate/sampling.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <variant>

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Without GeneratorOptions::max_length, the cache holds the power of two at
// least this long that a call needs (each step reads and writes its whole
// cache, so a cache far longer than the text costs on every step).
constexpr std::int64_t kSmallestCache = 256;

}  // namespace

// One step model and what runs it (eager or compiled).
struct StepRunner {
  std::optional<Model> model;
  std::variant<std::monostate, EagerModel, CompiledModel> runner;

  // prepare(): compile now for the model's own shapes (not for an export,
  // whose shapes are the first call's).
  void make(Model step, const GeneratorOptions& options, bool prepare = true) {
    model = std::move(step);
    if (options.eager) {
      runner.emplace<EagerModel>(eager(*model, {.backend = options.compile.backend, .device = options.compile.device}));
    } else {
      CompiledModel& compiled = runner.emplace<CompiledModel>(compile(*model, options.compile));
      if (prepare) compiled.prepare();
    }
  }

  std::vector<DeviceTensor> call(const std::vector<CallInput>& inputs) {
    if (auto* eager = std::get_if<EagerModel>(&runner)) return eager->call_on_device(inputs);
    if (auto* compiled = std::get_if<CompiledModel>(&runner)) return compiled->call_on_device(inputs);
    throw_error(ErrorKind::Internal, "Generator: the step was not made");
  }

  DeviceTensor to_device(const Tensor& tensor) const {
    if (const auto* eager = std::get_if<EagerModel>(&runner)) return eager->to_device(tensor);
    if (const auto* compiled = std::get_if<CompiledModel>(&runner)) return compiled->to_device(tensor);
    throw_error(ErrorKind::Internal, "Generator: the step was not made");
  }

  RunStats stats() const {
    if (const auto* eager = std::get_if<EagerModel>(&runner)) return eager->stats();
    if (const auto* compiled = std::get_if<CompiledModel>(&runner)) return compiled->stats();
    return {};
  }
};

struct Generator::State {
  State(CausalLM model, GeneratorOptions generator_options) : lm(std::move(model)), options(std::move(generator_options)) {
    if (lm.onnx_export()) layout = hf::export_layout(*lm.onnx_export(), lm.config().architecture);
  }

  CausalLM lm;
  GeneratorOptions options;
  // An ONNX export's inputs and outputs (its cache grows by concatenation:
  // the file runs as it is, each step's presents the next step's past).
  std::optional<hf::ExportLayout> layout;
  std::int64_t max_length = 0;     // positions a call may use: options.max_length, else the model's
  std::int64_t cache_length = 0;   // positions the current step's cache holds
  std::int64_t batch = 0;          // rows the current step takes
  // The one-token step (and, with prefill_chunk, the prompt's step of that
  // many tokens), made at the first generate() (and again, longer, for a
  // call its cache is too short for, or for another batch size).
  StepRunner decode;
  std::optional<StepRunner> prefill;
  // The static cache, one tensor per layer's keys and values, allocated at
  // the step's compile and written in place by every step (TensorScatter).
  // Rows a generation has not written yet are masked out; they must be
  // finite (0 x NaN is NaN): zeros, or an earlier generation's keys and values.
  std::vector<DeviceTensor> caches;
  int compiles = 0;

  // The steps' own memory and the caches they write in place.
  std::uint64_t peak_device_bytes() const {
    std::uint64_t bytes = decode.stats().peak_device_bytes + (prefill ? prefill->stats().peak_device_bytes : 0);
    for (const DeviceTensor& cache : caches)
      if (cache.on_device()) bytes += cache.nbytes();
    return bytes;
  }

  // Makes and compiles the steps for `rows` prompts and a cache that holds
  // `needed` positions (once, or again); returns the milliseconds it took.
  double ensure_step(std::int64_t rows, std::int64_t needed) {
    if (layout) return ensure_export();
    if (decode.model && batch == rows && cache_length >= needed) return 0.0;
    batch = rows;
    const auto start = Clock::now();
    const CausalLMConfig& c = lm.config();
    if (options.max_length != 0) {
      cache_length = options.max_length;
    } else {
      cache_length = kSmallestCache;
      while (cache_length < needed) cache_length *= 2;
      cache_length = std::min(cache_length, max_length);
    }
    decode.make(lm.step_model(batch, 1, cache_length), options);
    ++compiles;
    prefill.reset();
    if (options.prefill_chunk > 1 && options.prefill_chunk <= cache_length) {
      prefill.emplace();
      prefill->make(lm.step_model(batch, options.prefill_chunk, cache_length), options);
      ++compiles;
    }
    const Tensor zeros(lm.dtype(), {batch, c.num_kv_heads, cache_length, c.head_dim});
    caches.clear();
    for (std::int64_t i = 0; i < 2 * c.num_layers; ++i) caches.push_back(decode.to_device(zeros));
    const double ms = ms_between(start, Clock::now());
    base::log(base::LogLevel::info,
                 "generator: " + c.architecture + " step compiled for " + std::to_string(batch) + " prompt(s) and a cache of " +
                     std::to_string(cache_length) + " positions" +
                     (prefill ? " (and a prompt step of " + std::to_string(options.prefill_chunk) + " tokens)" : "") +
                     " in " + std::to_string(static_cast<int>(ms)) + " ms; " + std::to_string(compiles) +
                     " step model(s) compiled so far, each serving every position");
    return ms;
  }

  // The export, compiled once: its dynamic dims serve every batch, prompt
  // length and past length.
  double ensure_export() {
    if (decode.model) return 0.0;
    const auto start = Clock::now();
    // Batch, sequence and past lengths dynamic from the first call: one
    // shape set serves every prompt and step (a past of 0 included).
    GeneratorOptions dynamic = options;
    if (dynamic.compile.dynamic_dims.empty()) {
      const std::vector<TensorSpec> inputs = lm.onnx_export()->inputs();
      const auto mark = [&](std::size_t input, std::initializer_list<int> dims) {
        for (int d : dims) dynamic.compile.dynamic_dims.push_back({.input = inputs[input].name, .dim = d});
      };
      mark(layout->input_ids, {0, 1});
      mark(layout->attention_mask, {0, 1});
      if (layout->position_ids) mark(*layout->position_ids, {0, 1});
      for (std::size_t i : layout->past) mark(i, {0, 2});
    }
    decode.make(*lm.onnx_export(), dynamic, false);
    ++compiles;
    base::log(base::LogLevel::info, "generator: " + lm.config().architecture +
                                              " runs with its cache growing a step at a time on the device");
    return ms_between(start, Clock::now());
  }
};

Generator::Generator(CausalLM lm, GeneratorOptions options) : state_(std::make_unique<State>(std::move(lm), std::move(options))) {
  const CausalLMConfig& c = state_->lm.config();
  const std::int64_t max_length = state_->options.max_length;
  // An export without a config.json does not say how many positions it takes.
  const std::int64_t positions = c.max_positions != 0 ? c.max_positions : std::numeric_limits<std::int32_t>::max();
  KILN_CHECK(max_length >= 0 && max_length <= positions, ErrorKind::InvalidArgument,
             "GeneratorOptions::max_length " + std::to_string(max_length) + " is outside [1, " +
                 std::to_string(positions) + "], the positions " + c.architecture + " takes (0: all of them)");
  state_->max_length = max_length != 0 ? max_length : positions;
}

Generator::~Generator() = default;
Generator::Generator(Generator&&) noexcept = default;
Generator& Generator::operator=(Generator&&) noexcept = default;

const CausalLM& Generator::model() const { return state_->lm; }
std::int64_t Generator::max_length() const { return state_->max_length; }
std::int64_t Generator::cache_length() const { return state_->cache_length; }

std::string Generator::explain() const {
  std::string text = state_->lm.explain() + "\n";
  if (const auto* compiled = std::get_if<CompiledModel>(&state_->decode.runner)) text += compiled->explain();
  return text;
}

GenerationResult Generator::generate(const std::vector<std::int64_t>& prompt, const GenerationConfig& config,
                                     const std::function<void(std::int64_t token)>& on_token) {
  return generate_batch({prompt}, config, [&](std::size_t, std::int64_t token) {
    if (on_token) on_token(token);
  })[0];
}

std::vector<GenerationResult> Generator::generate_batch(const std::vector<std::vector<std::int64_t>>& prompts,
                                                        const GenerationConfig& config,
                                                        const std::function<void(std::size_t row, std::int64_t token)>& on_token) {
  State& s = *state_;
  const CausalLMConfig& c = s.lm.config();
  const auto rows = static_cast<std::int64_t>(prompts.size());
  KILN_CHECK(rows >= 1, ErrorKind::InvalidArgument, "generate_batch: no prompts");
  std::int64_t longest = 0;
  for (const std::vector<std::int64_t>& prompt : prompts) {
    KILN_CHECK(!prompt.empty(), ErrorKind::InvalidArgument, "generate: a prompt has no tokens");
    for (std::int64_t id : prompt)
      KILN_CHECK(id >= 0 && id < c.vocab_size, ErrorKind::InvalidArgument,
                 "generate: prompt token " + std::to_string(id) + " is outside the vocabulary [0, " +
                     std::to_string(c.vocab_size) + ")");
    longest = std::max(longest, static_cast<std::int64_t>(prompt.size()));
  }
  KILN_CHECK(config.max_new_tokens >= 0 && longest + config.max_new_tokens <= s.max_length, ErrorKind::InvalidArgument,
             "generate: " + std::to_string(longest) + " prompt tokens and max_new_tokens " +
                 std::to_string(config.max_new_tokens) + " need " + std::to_string(longest + config.max_new_tokens) +
                 " positions; the generator takes " + std::to_string(s.max_length) +
                 (s.options.max_length != 0 ? " (GeneratorOptions::max_length)" : " (the model's max_positions)"));
  generation::check_sampling(config);  // before any work
  std::uint64_t rng = config.seed;
  const std::vector<std::int64_t> stop = config.stop_token_ids.value_or(c.eos_token_ids);
  KILN_CHECK(config.stop_strings.empty() || s.options.tokenizer.has_value(), ErrorKind::InvalidArgument,
             "generate: stop_strings need a tokenizer (GeneratorOptions::tokenizer)");

  std::vector<GenerationResult> results(prompts.size());
  const double compile_ms = s.ensure_step(rows, longest + config.max_new_tokens);
  for (std::size_t r = 0; r < prompts.size(); ++r) {
    results[r].stop_reason = "max_new_tokens";
    results[r].stats.prompt_tokens = static_cast<std::int64_t>(prompts[r].size());
    results[r].stats.compile_ms = compile_ms;
  }
  if (config.max_new_tokens == 0) {
    for (GenerationResult& r : results) r.stats.compiles = s.compiles;
    return results;
  }

  // Left padding, as transformers batches prompts: row r's prompt ends at
  // slot longest - 1; its padding slots are masked out and its positions
  // count its own tokens.
  std::vector<std::int64_t> padding(prompts.size());
  for (std::int64_t r = 0; r < rows; ++r) padding[r] = longest - static_cast<std::int64_t>(prompts[r].size());
  // attention_mask [rows, slots]: 0 on each row's padding.
  const auto mask_of = [&](std::int64_t slots) {
    Tensor mask(DType::i64, {rows, slots});
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t slot = 0; slot < slots; ++slot) mask.values<std::int64_t>()[r * slots + slot] = slot >= padding[r] ? 1 : 0;
    return mask;
  };
  // Each token's position in its own prompt (left padding: fewer than its slot).
  const auto positions_of = [&](std::int64_t slot, std::int64_t n) {
    std::vector<std::int64_t> positions(static_cast<std::size_t>(rows * n));
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t i = 0; i < n; ++i) positions[r * n + i] = std::max<std::int64_t>(0, slot + i - padding[r]);
    return Tensor::from_i64({rows, n}, positions);
  };
  const CallInput attention_mask = s.layout ? CallInput(Tensor()) : CallInput(s.decode.to_device(mask_of(s.cache_length)));

  std::vector<DeviceTensor> caches = s.caches;  // (an export's grow: presents of its own)
  std::vector<float> logits;  // [rows, vocab] of the last step
  std::uint64_t logits_bytes = 0;  // what the last step's logits took to download
  // Tokens [rows, n] at cache slots slot .. slot + n - 1 through `step`; the
  // last slot's logits kept, the caches carried.
  const auto feed = [&](StepRunner& step, const std::vector<std::int64_t>& tokens, std::int64_t slot) {
    const auto n = static_cast<std::int64_t>(tokens.size()) / rows;
    std::vector<DeviceTensor> outputs;
    std::size_t logits_at = 0;
    if (const hf::ExportLayout* layout = s.layout ? &*s.layout : nullptr) {
      // The export: the mask covers past and new tokens; the past starts
      // empty and is then the presents the step before returned.
      std::vector<CallInput> inputs(step.model->inputs().size());
      inputs[layout->input_ids] = Tensor::from_i64({rows, n}, tokens);
      inputs[layout->attention_mask] = mask_of(slot + n);
      if (layout->position_ids) inputs[*layout->position_ids] = positions_of(slot, n);
      for (std::size_t i = 0; i < layout->past.size(); ++i)
        inputs[layout->past[i]] = slot == 0 ? CallInput(Tensor(layout->cache_dtype, {rows, c.num_kv_heads, 0, c.head_dim}))
                                            : CallInput(caches[i]);
      outputs = step.call(inputs);
      caches.clear();
      for (std::size_t i : layout->present) caches.push_back(outputs[i]);
      logits_at = layout->logits;
    } else {
      std::vector<CallInput> inputs = {Tensor::from_i64({rows, n}, tokens), Tensor::from_i64({1}, {slot}),
                                       positions_of(slot, n), attention_mask};
      inputs.insert(inputs.end(), caches.begin(), caches.end());
      outputs = step.call(inputs);
      // The presents: the same caches, written where they lie (the executor's in-place inputs).
      caches.assign(outputs.begin() + 1, outputs.end());
    }
    Tensor host = outputs[logits_at].to_host();
    logits_bytes = outputs[logits_at].on_device() ? host.nbytes() : 0;
    if (host.dtype() != DType::f32) host = host.to(DType::f32);
    // The last position's row per prompt ([rows, vocab], or [rows, n, vocab] from an export).
    const auto values = host.values<float>();
    const auto vocab = static_cast<std::size_t>(c.vocab_size);
    const auto stride = static_cast<std::size_t>(values.size() / static_cast<std::size_t>(rows));
    logits.resize(static_cast<std::size_t>(rows) * vocab);
    for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r)
      std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(r * stride + stride - vocab), vocab,
                  logits.begin() + static_cast<std::ptrdiff_t>(r * vocab));
  };
  // The prompts' tokens at slots slot .. slot + n - 1 (padding: any id, masked out).
  const auto prompt_tokens_at = [&](std::int64_t slot, std::int64_t n) {
    std::vector<std::int64_t> tokens(static_cast<std::size_t>(rows * n), 0);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t i = 0; i < n; ++i)
        if (slot + i >= padding[r]) tokens[r * n + i] = prompts[r][static_cast<std::size_t>(slot + i - padding[r])];
    return tokens;
  };

  const auto start = Clock::now();
  std::int64_t slot = 0;
  if (s.layout) {  // an export takes the whole prompt in one call
    feed(s.decode, prompt_tokens_at(0, longest), 0);
    slot = longest;
  }
  if (s.prefill)
    for (const std::int64_t chunk = s.options.prefill_chunk; longest - slot >= chunk; slot += chunk)
      feed(*s.prefill, prompt_tokens_at(slot, chunk), slot);
  for (; slot < longest; ++slot) feed(s.decode, prompt_tokens_at(slot, 1), slot);
  const auto prefilled = Clock::now();
  Clock::time_point first_token;
  std::vector<bool> finished(prompts.size(), false);
  std::vector<std::int64_t> last(prompts.size(), 0);
  std::int64_t generated = 0;
  const auto vocab = static_cast<std::size_t>(c.vocab_size);
  for (std::int64_t n = 0; n < config.max_new_tokens; ++n) {
    if (n > 0) feed(s.decode, last, longest + n - 1);
    for (std::size_t r = 0; r < prompts.size(); ++r) {
      if (finished[r]) continue;  // fed on (its outputs unused) until every row is done
      const std::int64_t token = pick_token(std::span<const float>(logits).subspan(r * vocab, vocab), config, rng);
      last[r] = token;
      results[r].tokens.push_back(token);
      ++generated;
      if (on_token) on_token(r, token);
      if (std::ranges::find(stop, token) != stop.end()) {
        results[r].stop_reason = "stop token";
        finished[r] = true;
      } else if (!config.stop_strings.empty()) {
        const std::string text = s.options.tokenizer->decode(results[r].tokens, true);
        if (std::ranges::any_of(config.stop_strings, [&](const std::string& t) { return text.find(t) != std::string::npos; })) {
          results[r].stop_reason = "stop string";
          finished[r] = true;
        }
      }
    }
    if (n == 0) first_token = Clock::now();
    if (std::ranges::all_of(finished, [](bool f) { return f; })) break;
  }
  const auto done = Clock::now();
  std::int64_t prompt_tokens = 0;
  for (const std::vector<std::int64_t>& prompt : prompts) prompt_tokens += static_cast<std::int64_t>(prompt.size());
  const std::uint64_t peak = s.peak_device_bytes();
  const RunStats last_step = s.decode.stats();
  for (GenerationResult& result : results) {
    GenerationStats& st = result.stats;
    st.new_tokens = static_cast<std::int64_t>(result.tokens.size());
    st.time_to_first_token_ms = ms_between(start, first_token);
    st.prefill_tokens_per_s = static_cast<double>(prompt_tokens) / std::max(1e-9, ms_between(start, prefilled) / 1e3);
    if (generated > rows)
      st.decode_tokens_per_s = static_cast<double>(generated - rows) / std::max(1e-9, ms_between(first_token, done) / 1e3);
    st.compiles = s.compiles;
    st.peak_device_bytes = peak;
    st.step_uploaded_bytes = last_step.uploaded_bytes;
    st.step_downloaded_bytes = last_step.downloaded_bytes + logits_bytes;
    if (s.options.tokenizer) result.text = s.options.tokenizer->decode(result.tokens, true);
  }
  return results;
}

GenerationResult Generator::generate_text(std::string_view prompt, const GenerationConfig& config,
                                          const std::function<void(std::string_view text)>& on_text) {
  KILN_CHECK(state_->options.tokenizer.has_value(), ErrorKind::InvalidArgument,
             "generate: a text prompt needs a tokenizer (GeneratorOptions::tokenizer; Tokenizer::load)");
  const Tokenizer& tokenizer = *state_->options.tokenizer;
  TextStream stream(tokenizer);
  GenerationResult result = generate(tokenizer.encode(prompt), config, [&](std::int64_t token) {
    if (on_text)
      if (const std::string piece = stream.push(token); !piece.empty()) on_text(piece);
  });
  if (on_text)
    if (const std::string rest = stream.finish(); !rest.empty()) on_text(rest);
  return result;
}

}  // namespace kiln

// kiln::Generator (include/kiln/generate.h).
#include <kiln/error.h>
#include <kiln/generate.h>

#include <algorithm>
#include <chrono>
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

struct Generator::State {
  CausalLM lm;
  GeneratorOptions options;
  std::int64_t max_length = 0;     // positions a call may use: options.max_length, else the model's
  std::int64_t cache_length = 0;   // positions the current step's cache holds
  std::int64_t batch = 0;          // rows the current step takes
  // The one-token step and its callable, made at the first generate() (and
  // again, longer, for a call its cache is too short for).
  std::optional<Model> step;
  std::variant<std::monostate, EagerModel, CompiledModel> runner;
  std::vector<DeviceTensor> empty_caches;  // zeros: rows not yet written must be finite (0 x NaN is NaN)
  int compiles = 0;

  std::vector<DeviceTensor> call(const std::vector<CallInput>& inputs) {
    return std::visit(
        [&](auto& model) -> std::vector<DeviceTensor> {
          if constexpr (std::is_same_v<std::decay_t<decltype(model)>, std::monostate>)
            throw_error(ErrorKind::Internal, "Generator: the step was not made");
          else
            return model.call_on_device(inputs);
        },
        runner);
  }

  RunStats stats() const {
    if (const auto* eager = std::get_if<EagerModel>(&runner)) return eager->stats();
    if (const auto* compiled = std::get_if<CompiledModel>(&runner)) return compiled->stats();
    return {};
  }

  // Makes and compiles a step whose cache holds `needed` positions (once, or
  // again for a longer cache); returns the milliseconds it took.
  double ensure_step(std::int64_t rows, std::int64_t needed) {
    if (step && batch == rows && cache_length >= needed) return 0.0;
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
    step = lm.step_model(batch, 1, cache_length);
    if (options.eager) {
      runner.emplace<EagerModel>(eager(*step, {.backend = options.compile.backend, .device = options.compile.device}));
    } else {
      CompiledModel& compiled = runner.emplace<CompiledModel>(compile(*step, options.compile));
      compiled.prepare();
    }
    ++compiles;
    const Tensor zeros(lm.dtype(), {batch, c.num_kv_heads, cache_length, c.head_dim});
    std::visit(
        [&](auto& model) {
          if constexpr (!std::is_same_v<std::decay_t<decltype(model)>, std::monostate>) {
            const DeviceTensor on_device = model.to_device(zeros);
            empty_caches.assign(static_cast<std::size_t>(2 * c.num_layers), on_device);
          }
        },
        runner);
    return ms_between(start, Clock::now());
  }
};

Generator::Generator(CausalLM lm, GeneratorOptions options) : state_(std::make_unique<State>(State{std::move(lm), std::move(options)})) {
  const CausalLMConfig& c = state_->lm.config();
  const std::int64_t max_length = state_->options.max_length;
  KILN_CHECK(max_length >= 0 && max_length <= c.max_positions, ErrorKind::InvalidArgument,
             "GeneratorOptions::max_length " + std::to_string(max_length) + " is outside [1, " +
                 std::to_string(c.max_positions) + "], the positions " + c.architecture + " takes (0: all of them)");
  state_->max_length = max_length != 0 ? max_length : c.max_positions;
}

Generator::~Generator() = default;
Generator::Generator(Generator&&) noexcept = default;
Generator& Generator::operator=(Generator&&) noexcept = default;

const CausalLM& Generator::model() const { return state_->lm; }
std::int64_t Generator::max_length() const { return state_->max_length; }
std::int64_t Generator::cache_length() const { return state_->cache_length; }

std::string Generator::explain() const {
  if (const auto* compiled = std::get_if<CompiledModel>(&state_->runner)) return compiled->explain();
  return "";
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
  // Checked before any work.
  std::uint64_t rng = config.seed;
  {
    std::uint64_t probe = 0;
    pick_token({0.0f}, config, probe);
  }
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
  const std::int64_t slots = s.cache_length;
  std::vector<std::int64_t> padding(prompts.size());
  Tensor mask(DType::i64, {rows, slots});
  for (std::int64_t r = 0; r < rows; ++r) {
    padding[r] = longest - static_cast<std::int64_t>(prompts[r].size());
    for (std::int64_t slot = 0; slot < slots; ++slot) mask.values<std::int64_t>()[r * slots + slot] = slot >= padding[r] ? 1 : 0;
  }
  const CallInput attention_mask = std::visit(
      [&](auto& model) -> CallInput {
        if constexpr (std::is_same_v<std::decay_t<decltype(model)>, std::monostate>) return mask;
        else return model.to_device(mask);
      },
      s.runner);

  std::vector<DeviceTensor> caches = s.empty_caches;
  std::vector<float> logits;  // [rows, vocab] of the last step
  // One token per row at cache slot `slot` through the step; the logits kept, the caches carried.
  const auto feed = [&](const std::vector<std::int64_t>& tokens, std::int64_t slot) {
    std::vector<std::int64_t> positions(prompts.size());
    for (std::int64_t r = 0; r < rows; ++r) positions[r] = std::max<std::int64_t>(0, slot - padding[r]);
    std::vector<CallInput> inputs = {Tensor::from_i64({rows, 1}, tokens), Tensor::from_i64({1}, {slot}),
                                     Tensor::from_i64({rows, 1}, positions), attention_mask};
    inputs.insert(inputs.end(), caches.begin(), caches.end());
    std::vector<DeviceTensor> outputs = s.call(inputs);
    caches.assign(outputs.begin() + 1, outputs.end());
    const Tensor host = outputs[0].to_host();
    const auto values = host.values<float>();
    logits.assign(values.begin(), values.end());
  };

  const auto start = Clock::now();
  for (std::int64_t slot = 0; slot < longest; ++slot) {
    std::vector<std::int64_t> column(prompts.size(), 0);  // padding: any id, masked out
    for (std::int64_t r = 0; r < rows; ++r)
      if (slot >= padding[r]) column[r] = prompts[r][static_cast<std::size_t>(slot - padding[r])];
    feed(column, slot);
  }
  const auto prefilled = Clock::now();
  Clock::time_point first_token;
  std::vector<bool> finished(prompts.size(), false);
  std::vector<std::int64_t> last(prompts.size(), 0);
  std::int64_t generated = 0;
  const auto vocab = static_cast<std::size_t>(c.vocab_size);
  for (std::int64_t n = 0; n < config.max_new_tokens; ++n) {
    if (n > 0) feed(last, longest + n - 1);
    for (std::size_t r = 0; r < prompts.size(); ++r) {
      if (finished[r]) continue;  // fed on (its outputs unused) until every row is done
      const std::vector<float> row(logits.begin() + static_cast<std::ptrdiff_t>(r * vocab),
                                   logits.begin() + static_cast<std::ptrdiff_t>((r + 1) * vocab));
      const std::int64_t token = pick_token(row, config, rng);
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
  const std::uint64_t peak = s.stats().peak_device_bytes;
  for (GenerationResult& result : results) {
    GenerationStats& st = result.stats;
    st.new_tokens = static_cast<std::int64_t>(result.tokens.size());
    st.time_to_first_token_ms = ms_between(start, first_token);
    st.prefill_tokens_per_s = static_cast<double>(prompt_tokens) / std::max(1e-9, ms_between(start, prefilled) / 1e3);
    if (generated > rows)
      st.decode_tokens_per_s = static_cast<double>(generated - rows) / std::max(1e-9, ms_between(first_token, done) / 1e3);
    st.compiles = s.compiles;
    st.peak_device_bytes = peak;
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

// Text generation with a causal LM (include/kiln/causal_lm.h): the prompt
// and then each new token go through one step model over a static key/value
// cache that stays on the device; only the last position's logits come back
// to the host, where the next token is picked.
//
//   kiln::Generator gen(kiln::load_causal_lm("gpt2"), {.compile = {.mode = kiln::Mode::reduce_overhead}});
//   kiln::GenerationResult r = gen.generate({464, 2068}, {.max_new_tokens = 20},
//                                           [](std::int64_t token) { /* stream it */ });
//
// The step is compiled once (the position is a run-time input, not a
// shape), and serves every position of every generate() call; with
// reduce-overhead each step replays the recorded command buffer.
#pragma once

#include <kiln/causal_lm.h>
#include <kiln/export.h>
#include <kiln/kiln.h>
#include <kiln/tokenizer.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kiln {

// How the next token is picked, as transformers' generate() does: greedy
// (temperature 0: the largest logit, the lowest id among ties), else logits
// divided by the temperature, the top_k largest kept (0: all), then the
// smallest set whose probabilities reach top_p (1: all), and a draw from
// the rest with a generator seeded by `seed` (the same seed, prompt and
// model give the same tokens on every run, backend and mode up to logits
// that differ across a draw's boundary).
struct KILN_API GenerationConfig {
  std::int64_t max_new_tokens = 32;
  float temperature = 0.0f;
  std::int64_t top_k = 0;
  float top_p = 1.0f;
  std::uint64_t seed = 0;
  // Generation stops after one of these (kept in the result). Unset: the
  // model's eos_token_ids; empty: never before max_new_tokens.
  std::optional<std::vector<std::int64_t>> stop_token_ids{};
  // Generation stops once the new text contains one of these (the token that
  // completes it kept, as transformers' stop_strings). Needs the generator's
  // tokenizer.
  std::vector<std::string> stop_strings{};
};

struct KILN_API GeneratorOptions {
  // Where and how the step runs: compile() with these options, or eager().
  CompileOptions compile{};
  bool eager = false;
  // Positions the static cache holds, prompt plus new tokens: one step
  // compiled for it. 0: a cache as long as a call needs (a power of two, at
  // least 256, at most the model's max_positions), compiled again, longer,
  // for a call that needs more. Each step reads and writes its whole cache,
  // so a cache far longer than the text costs time on every step.
  std::int64_t max_length = 0;
  // Prompts go through a step of this many tokens at a time (the rest a
  // token per step): a second compiled step, sharing the decode step's
  // weights on the device, for a first token sooner. 0 or 1: a token per
  // step through the one step model.
  std::int64_t prefill_chunk = 0;
  // For text: generate_text(), stop strings and GenerationResult::text.
  std::optional<Tokenizer> tokenizer{};
};

struct KILN_API GenerationStats {
  std::int64_t prompt_tokens = 0;
  std::int64_t new_tokens = 0;
  // Compiling the step (this call's share: 0 once it is compiled).
  double compile_ms = 0;
  // From the start of the prompt's first step to the first new token, compile excluded.
  double time_to_first_token_ms = 0;
  double prefill_tokens_per_s = 0;
  double decode_tokens_per_s = 0;  // new tokens after the first, per second
  int compiles = 0;                // step models compiled by this generator so far (per batch size and cache length; prefill_chunk's too)
  std::uint64_t peak_device_bytes = 0;  // the compiled steps' (weights shared between them counted once) and the caches
  // What the last step copied between host and device (RunStats'
  // uploaded_bytes, downloaded_bytes): the tokens and positions up, one row
  // of logits per prompt down; the caches stay on the device.
  std::uint64_t step_uploaded_bytes = 0;
  std::uint64_t step_downloaded_bytes = 0;
};

struct KILN_API GenerationResult {
  std::vector<std::int64_t> tokens;  // the new tokens
  std::string text;                  // their text, with a tokenizer (special tokens skipped)
  std::string stop_reason;           // "max_new_tokens", "stop token" or "stop string"
  GenerationStats stats;
};

// Picks the next token from one position's logits (GenerationConfig's rule)
// with a generator state that advances per draw. Throws InvalidArgument for
// a negative temperature or top_k, or top_p outside (0, 1].
KILN_API std::int64_t pick_token(std::span<const float> logits, const GenerationConfig& config,
                                 std::uint64_t& rng_state);

class KILN_API Generator {
 public:
  explicit Generator(CausalLM lm, GeneratorOptions options = {});
  ~Generator();
  Generator(Generator&&) noexcept;
  Generator& operator=(Generator&&) noexcept;

  // Generates after `prompt` (token ids, at least one), calling `on_token`
  // with each new token as it is picked. Throws InvalidArgument for an empty
  // prompt, a token id outside the vocabulary, or prompt + max_new_tokens
  // past max_length. One call at a time per Generator.
  GenerationResult generate(const std::vector<std::int64_t>& prompt, const GenerationConfig& config = {},
                            const std::function<void(std::int64_t token)>& on_token = {});
  // Several prompts at once, left-padded to the longest with an attention
  // mask, as transformers generates a batch: one step model per batch size
  // (compiled once), every row picking its own tokens (the seed's draws go
  // row by row) and stopping on its own; `on_token` gets the row and token.
  // Timings are the batch's (decode tokens/s counts every row's tokens).
  std::vector<GenerationResult> generate_batch(const std::vector<std::vector<std::int64_t>>& prompts,
                                               const GenerationConfig& config = {},
                                               const std::function<void(std::size_t row, std::int64_t token)>& on_token = {});
  // The same from text, encoded with the generator's tokenizer (special
  // tokens added as the model's config says); `on_text` gets the new text
  // as it streams (TextStream). Throws InvalidArgument without a tokenizer.
  GenerationResult generate_text(std::string_view prompt, const GenerationConfig& config = {},
                                 const std::function<void(std::string_view text)>& on_text = {});

  const CausalLM& model() const;
  // The most positions a call may use (max_length, else the model's).
  std::int64_t max_length() const;
  // Positions the current step's cache holds (0 before the first call).
  std::int64_t cache_length() const;
  // What loading the model did (CausalLM::explain()), then what the step's
  // compile did (CompiledModel::explain(); nothing more for eager).
  std::string explain() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kiln

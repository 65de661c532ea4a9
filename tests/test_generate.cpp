#define BOOST_TEST_MODULE generate
#include <boost/test/unit_test.hpp>

// kiln::Generator on the causal-LM fixtures (tests/fixtures/causal_lm):
// greedy generation gives transformers' tokens eagerly and compiled, the
// step compiles once for every position and call, stop tokens stop it, and
// seeded sampling repeats; pick_token's warpers on their own.

#include <kiln/generate.h>
#include <kiln/safetensors.h>
#include <kiln/tokenizer.h>

#include "cli_runner.h"
#include "src/base/log.h"
#include "test_backend.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

fs::path fixture_dir() {
  const char* root = std::getenv("KILN_SOURCE_ROOT");
  const fs::path base = root != nullptr && *root != '\0' ? fs::path(root) / "tests" : fs::path(__FILE__).parent_path();
  return base / "fixtures" / "causal_lm";
}

struct Expected {
  std::vector<std::int64_t> prompt, new_tokens;
};

std::vector<Expected> expected_of(const std::string& arch) {
  std::ifstream in(fixture_dir() / arch / "expected.json");
  const nlohmann::json json = nlohmann::json::parse(in);
  std::vector<Expected> cases;
  for (const nlohmann::json& c : json["cases"])
    cases.push_back({c["prompt"].get<std::vector<std::int64_t>>(), c["new_tokens"].get<std::vector<std::int64_t>>()});
  return cases;
}

kiln::GeneratorOptions options(kiln::Mode mode, bool eager = false) {
  kiln::GeneratorOptions o;
  o.compile.backend = kiln::testing::test_backend();
  o.compile.mode = mode;
  o.compile.fullgraph = true;
  o.eager = eager;
  o.max_length = 48;
  return o;
}

void check_greedy(const std::string& arch, const kiln::GeneratorOptions& opts, const std::string& how) {
  kiln::Generator gen(kiln::load_causal_lm((fixture_dir() / arch).string()), opts);
  for (const Expected& c : expected_of(arch)) {
    std::vector<std::int64_t> streamed;
    const kiln::GenerationResult r =
        gen.generate(c.prompt, {.max_new_tokens = 24, .stop_token_ids = std::vector<std::int64_t>{}},
                     [&](std::int64_t token) { streamed.push_back(token); });
    BOOST_TEST(r.tokens == c.new_tokens, how << " " << arch << ", prompt of " << c.prompt.size());
    BOOST_TEST(streamed == r.tokens);
    BOOST_TEST(r.stop_reason == "max_new_tokens");
    BOOST_TEST(r.stats.prompt_tokens == static_cast<std::int64_t>(c.prompt.size()));
    BOOST_TEST(r.stats.new_tokens == 24);
    BOOST_TEST(r.stats.decode_tokens_per_s > 0.0);
    BOOST_TEST(r.stats.time_to_first_token_ms > 0.0);
    // A step moves the token, slot and position up and one row of logits
    // down; the caches and the attention mask stay on the device.
    BOOST_TEST(r.stats.step_uploaded_bytes == 3 * sizeof(std::int64_t));
    BOOST_TEST(r.stats.step_downloaded_bytes == 96 * sizeof(float));  // the fixtures' vocabulary
    // One step model for every position of every call (and one for prompt chunks).
    BOOST_TEST(r.stats.compiles == (opts.prefill_chunk > 1 ? 2 : 1));
  }
}

// A model folder with a tokenizer: random GPT-2 weights sized to the
// tokenizer fixture "gpt2" (400 ids) beside its tokenizer.json.
struct TextModel {
  fs::path dir;
  TextModel() {
    dir = fs::temp_directory_path() / ("kiln-generate-text-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const fs::path tokenizer = fixture_dir().parent_path() / "tokenizers" / "gpt2";
    fs::copy(tokenizer / "tokenizer.json", dir / "tokenizer.json");
    fs::copy(tokenizer / "tokenizer_config.json", dir / "tokenizer_config.json");
    std::ofstream(dir / "config.json") << R"({"architectures": ["GPT2LMHeadModel"], "vocab_size": 400, "n_embd": 32,
      "n_layer": 2, "n_head": 4, "n_positions": 64, "eos_token_id": 0, "torch_dtype": "float32"})";
    std::map<std::string, kiln::Tensor> weights;
    std::uint64_t state = 12345;
    const auto add = [&](const std::string& name, kiln::Shape shape, float scale, float offset = 0.0f) {
      kiln::Tensor t(kiln::DType::f32, shape);
      for (float& v : t.values<float>()) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        v = offset + scale * (static_cast<float>(state >> 40) / static_cast<float>(1u << 24) - 0.5f);
      }
      weights.emplace(name, t);
    };
    add("transformer.wte.weight", {400, 32}, 2.0f);
    add("transformer.wpe.weight", {64, 32}, 0.5f);
    for (const char* l : {"0", "1"}) {
      const std::string b = std::string("transformer.h.") + l + ".";
      for (const char* ln : {"ln_1", "ln_2"}) add(b + ln + ".weight", {32}, 0.2f, 1.0f), add(b + ln + ".bias", {32}, 0.2f);
      add(b + "attn.c_attn.weight", {32, 96}, 0.5f), add(b + "attn.c_attn.bias", {96}, 0.2f);
      add(b + "attn.c_proj.weight", {32, 32}, 0.5f), add(b + "attn.c_proj.bias", {32}, 0.2f);
      add(b + "mlp.c_fc.weight", {32, 128}, 0.5f), add(b + "mlp.c_fc.bias", {128}, 0.2f);
      add(b + "mlp.c_proj.weight", {128, 32}, 0.3f), add(b + "mlp.c_proj.bias", {32}, 0.2f);
    }
    add("transformer.ln_f.weight", {32}, 0.2f, 1.0f), add("transformer.ln_f.bias", {32}, 0.2f);
    kiln::save_safetensors((dir / "model.safetensors").string(), weights);
  }
  ~TextModel() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(text_in_text_out) {
  const TextModel model;
  const kiln::Tokenizer tokenizer = kiln::Tokenizer::load(model.dir.string());
  kiln::GeneratorOptions opts = options(kiln::Mode::reduce_overhead);
  opts.tokenizer = tokenizer;
  kiln::Generator gen(kiln::load_causal_lm(model.dir.string()), opts);
  std::string streamed;
  const kiln::GenerationConfig config{.max_new_tokens = 12, .stop_token_ids = std::vector<std::int64_t>{}};
  const kiln::GenerationResult r =
      gen.generate_text("Hello world", config, [&](std::string_view piece) { streamed += piece; });
  BOOST_TEST(r.tokens.size() == 12u);
  BOOST_TEST(r.text == tokenizer.decode(r.tokens, true));
  BOOST_TEST(streamed == r.text);
  BOOST_TEST(r.stats.prompt_tokens == static_cast<std::int64_t>(tokenizer.encode("Hello world").size()));
  // The same tokens from the ids.
  BOOST_TEST(gen.generate(tokenizer.encode("Hello world"), config).tokens == r.tokens);
  // A stop string: generation ends with the token that completes it.
  const std::string first_four = tokenizer.decode(std::vector<std::int64_t>(r.tokens.begin(), r.tokens.begin() + 4), true);
  BOOST_TEST_REQUIRE(!first_four.empty());  // the fixture's first tokens decode to text
  {
    kiln::GenerationConfig stopping = config;
    stopping.stop_strings = {first_four};
    const kiln::GenerationResult s = gen.generate_text("Hello world", stopping);
    BOOST_TEST(s.stop_reason == "stop string");
    BOOST_TEST(s.tokens.size() <= 4u);
    BOOST_TEST(std::equal(s.tokens.begin(), s.tokens.end(), r.tokens.begin()));
    BOOST_TEST(s.text.find(first_four) != std::string::npos);
  }
  // Without a tokenizer: text prompts and stop strings are refused.
  kiln::Generator bare(kiln::load_causal_lm(model.dir.string()), options(kiln::Mode::default_));
  BOOST_CHECK_THROW(bare.generate_text("Hello", config), kiln::Error);
  kiln::GenerationConfig needs_tokenizer = config;
  needs_tokenizer.stop_strings = {"x"};
  BOOST_CHECK_THROW(bare.generate({5, 6}, needs_tokenizer), kiln::Error);

  // kiln generate with text.
  const cli_test::Result text = cli_test::run_kiln("generate " + model.dir.string() +
                                                   " --prompt 'Hello world' --max-new-tokens 12 --stop-ids '' --json");
  BOOST_TEST_REQUIRE(text.exit_code == 0, text.output);
  const std::size_t open = text.output.find('{'), close = text.output.rfind('}');
  const nlohmann::json out = nlohmann::json::parse(text.output.substr(open, close - open + 1));
  BOOST_TEST(out["text"].get<std::string>() == r.text);
  BOOST_TEST(out["prompt_ids"].get<std::vector<std::int64_t>>() == tokenizer.encode("Hello world"));
  const cli_test::Result plain = cli_test::run_kiln("generate " + model.dir.string() +
                                                    " --prompt 'Hello world' --max-new-tokens 12 --stop-ids ''");
  BOOST_TEST(plain.exit_code == 0, plain.output);
  BOOST_TEST(plain.output.find("Hello world" + r.text) != std::string::npos, plain.output);
  const cli_test::Result neither = cli_test::run_kiln("generate " + model.dir.string());
  BOOST_TEST(neither.exit_code != 0);
  BOOST_TEST(neither.output.find("--prompt") != std::string::npos, neither.output);
}

BOOST_AUTO_TEST_CASE(greedy_generation_matches_transformers) {
  for (const char* arch : {"gpt2", "llama", "llama3", "qwen2", "mistral", "mistral_window", "gemma"}) {
    check_greedy(arch, options(kiln::Mode::reduce_overhead), "compiled (reduce-overhead)");
    check_greedy(arch, options(kiln::Mode::default_, true), "eager");
  }
  check_greedy("llama", options(kiln::Mode::default_), "compiled (default)");
}

BOOST_AUTO_TEST_CASE(prompts_in_chunks_give_the_same_tokens) {
  kiln::GeneratorOptions chunked = options(kiln::Mode::reduce_overhead);
  chunked.prefill_chunk = 5;  // prompts of 23 and 7 tokens: chunks of 5, then a token per step
  for (const char* arch : {"gpt2", "llama", "llama3", "qwen2", "mistral", "mistral_window", "gemma"})
    check_greedy(arch, chunked, "compiled (reduce-overhead), prompt in chunks of 5");
  chunked.eager = true;
  check_greedy("qwen2", chunked, "eager, prompt in chunks of 5");
  // A batch with left padding, its prompt in chunks.
  std::ifstream in(fixture_dir() / "llama" / "expected.json");
  const nlohmann::json batch = nlohmann::json::parse(in)["batch"];
  chunked.eager = false;
  kiln::Generator gen(kiln::load_causal_lm((fixture_dir() / "llama").string()), chunked);
  const auto results = gen.generate_batch(batch["prompts"].get<std::vector<std::vector<std::int64_t>>>(),
                                          {.max_new_tokens = 24, .stop_token_ids = std::vector<std::int64_t>{}});
  const auto expected = batch["new_tokens"].get<std::vector<std::vector<std::int64_t>>>();
  for (std::size_t r = 0; r < expected.size(); ++r) BOOST_TEST(results[r].tokens == expected[r], "row " << r);
}

BOOST_AUTO_TEST_CASE(batches_with_left_padding_match_transformers) {
  for (const char* arch : {"gpt2", "llama", "llama3", "qwen2", "mistral", "mistral_window", "gemma"}) {
    std::ifstream in(fixture_dir() / arch / "expected.json");
    const nlohmann::json batch = nlohmann::json::parse(in)["batch"];
    const auto prompts = batch["prompts"].get<std::vector<std::vector<std::int64_t>>>();
    const auto expected = batch["new_tokens"].get<std::vector<std::vector<std::int64_t>>>();
    for (const bool eager : {false, true}) {
      kiln::Generator gen(kiln::load_causal_lm((fixture_dir() / arch).string()), options(kiln::Mode::reduce_overhead, eager));
      std::vector<std::vector<std::int64_t>> streamed(prompts.size());
      const std::vector<kiln::GenerationResult> results =
          gen.generate_batch(prompts, {.max_new_tokens = 24, .stop_token_ids = std::vector<std::int64_t>{}},
                             [&](std::size_t row, std::int64_t token) { streamed.at(row).push_back(token); });
      BOOST_TEST_REQUIRE(results.size() == prompts.size());
      for (std::size_t r = 0; r < prompts.size(); ++r) {
        BOOST_TEST(results[r].tokens == expected[r], arch << (eager ? " eager" : " compiled") << ", row " << r);
        BOOST_TEST(streamed[r] == results[r].tokens);
        BOOST_TEST(results[r].stats.compiles == 1);
      }
    }
  }
}

// "The decode step is compiled once": logged once for two calls of 24 tokens.
BOOST_AUTO_TEST_CASE(the_step_compiles_once_and_says_so) {
  std::vector<std::string> lines;
  const auto previous = kiln::base::set_log_sink(
      [&](kiln::base::LogLevel, const std::string& line) { lines.push_back(line); }, kiln::base::LogLevel::info);
  {
    kiln::Generator gen(kiln::load_causal_lm((fixture_dir() / "llama").string()), options(kiln::Mode::reduce_overhead));
    for (const Expected& c : expected_of("llama"))
      gen.generate(c.prompt, {.max_new_tokens = 24, .stop_token_ids = std::vector<std::int64_t>{}});
  }
  kiln::base::set_log_sink(previous);
  const auto compiled = std::count_if(lines.begin(), lines.end(), [](const std::string& line) {
    return line.find("generator: LlamaForCausalLM step compiled for 1 prompt(s) and a cache of 48 positions") != std::string::npos;
  });
  BOOST_TEST(compiled == 1);
}

BOOST_AUTO_TEST_CASE(stop_tokens_end_generation) {
  const std::string arch = "qwen2";
  const Expected c = expected_of(arch)[1];
  kiln::Generator gen(kiln::load_causal_lm((fixture_dir() / arch).string()), options(kiln::Mode::default_));
  const std::int64_t stop = c.new_tokens[5];
  const std::size_t first = std::find(c.new_tokens.begin(), c.new_tokens.end(), stop) - c.new_tokens.begin();
  const kiln::GenerationResult r =
      gen.generate(c.prompt, {.max_new_tokens = 24, .stop_token_ids = std::vector<std::int64_t>{stop}});
  BOOST_TEST(r.stop_reason == "stop token");
  BOOST_TEST(r.tokens == std::vector<std::int64_t>(c.new_tokens.begin(), c.new_tokens.begin() + first + 1));
  // The model's own EOS (id 2) by default.
  const kiln::GenerationResult by_default = gen.generate(c.prompt, {.max_new_tokens = 24});
  const auto eos = std::find(c.new_tokens.begin(), c.new_tokens.end(), 2);
  BOOST_TEST(by_default.tokens == std::vector<std::int64_t>(c.new_tokens.begin(), eos == c.new_tokens.end() ? eos : eos + 1));
  BOOST_TEST(by_default.stats.compiles == 1);
}

BOOST_AUTO_TEST_CASE(seeded_sampling_repeats_across_runs_and_modes) {
  const std::string arch = "gpt2";
  const kiln::CausalLM lm = kiln::load_causal_lm((fixture_dir() / arch).string());
  const std::vector<std::int64_t> prompt = expected_of(arch)[1].prompt;
  const kiln::GenerationConfig sampling{.max_new_tokens = 16, .temperature = 8.0f, .top_k = 40, .top_p = 0.95f,
                                        .seed = 7, .stop_token_ids = std::vector<std::int64_t>{}};
  kiln::Generator compiled(lm, options(kiln::Mode::reduce_overhead));
  kiln::Generator eager(lm, options(kiln::Mode::default_, true));
  const std::vector<std::int64_t> first = compiled.generate(prompt, sampling).tokens;
  BOOST_TEST(first.size() == 16u);
  BOOST_TEST(compiled.generate(prompt, sampling).tokens == first);
  BOOST_TEST(eager.generate(prompt, sampling).tokens == first);
  kiln::GenerationConfig other = sampling;
  other.seed = 8;
  BOOST_TEST(compiled.generate(prompt, other).tokens != first);
  // Sampling is not greedy here: the fixture's logits are far apart (gaps of 6), a hot temperature leaves the greedy path.
  BOOST_TEST(first != expected_of(arch)[1].new_tokens);
}

BOOST_AUTO_TEST_CASE(pick_token_follows_the_warpers) {
  std::uint64_t rng = 1;
  const std::vector<float> logits = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f};
  BOOST_TEST(kiln::pick_token(logits, {}, rng) == 1);  // greedy: the first of the largest
  for (int i = 0; i < 50; ++i) {
    BOOST_TEST(kiln::pick_token(logits, {.temperature = 5.0f, .top_k = 2}, rng) % 2 == 1);  // ids 1 and 3 only
    const std::int64_t top_p = kiln::pick_token(logits, {.temperature = 1.0f, .top_p = 0.5f}, rng);
    BOOST_TEST((top_p == 1 || top_p == 3));
  }
  // Two tokens with probabilities 1/4 and 3/4: the draws follow them.
  const std::vector<float> two = {0.0f, static_cast<float>(std::log(3.0))};
  int ones = 0;
  constexpr int kDraws = 8000;
  for (int i = 0; i < kDraws; ++i) ones += kiln::pick_token(two, {.temperature = 1.0f}, rng) == 1 ? 1 : 0;
  BOOST_TEST(std::fabs(static_cast<double>(ones) / kDraws - 0.75) < 0.02, ones);
  // Temperature 0.5 squares the odds: 1/10 and 9/10.
  ones = 0;
  for (int i = 0; i < kDraws; ++i) ones += kiln::pick_token(two, {.temperature = 0.5f}, rng) == 1 ? 1 : 0;
  BOOST_TEST(std::fabs(static_cast<double>(ones) / kDraws - 0.9) < 0.02, ones);
  BOOST_CHECK_THROW(kiln::pick_token(logits, {.temperature = -1.0f}, rng), kiln::Error);
  BOOST_CHECK_THROW(kiln::pick_token(logits, {.temperature = 1.0f, .top_p = 0.0f}, rng), kiln::Error);
  BOOST_CHECK_THROW(kiln::pick_token(logits, {.temperature = 1.0f, .top_k = -2}, rng), kiln::Error);
}

BOOST_AUTO_TEST_CASE(bad_requests_are_refused) {
  const kiln::CausalLM lm = kiln::load_causal_lm((fixture_dir() / "gpt2").string());
  kiln::Generator gen(lm, options(kiln::Mode::default_));
  BOOST_CHECK_THROW(gen.generate({}, {}), kiln::Error);
  BOOST_CHECK_THROW(gen.generate({96}, {}), kiln::Error);  // vocabulary of 96
  try {
    gen.generate(std::vector<std::int64_t>(30, 5), {.max_new_tokens = 20});
    BOOST_FAIL("no error");
  } catch (const kiln::Error& e) {
    BOOST_TEST(std::string(e.what()).find("48") != std::string::npos, e.what());
  }
  BOOST_CHECK_THROW(kiln::Generator(lm, {.max_length = 65}), kiln::Error);  // past n_positions
  // Without max_length: a cache as long as the call needs, within n_positions (64).
  kiln::GeneratorOptions grow = options(kiln::Mode::default_);
  grow.max_length = 0;
  kiln::Generator growing(lm, grow);
  BOOST_TEST(growing.max_length() == 64);
  const kiln::GenerationResult r = growing.generate({5, 6, 7}, {.max_new_tokens = 10});
  BOOST_TEST(growing.cache_length() == 64);  // 256 capped at n_positions
  BOOST_TEST(r.stats.compiles == 1);
  BOOST_CHECK_THROW(growing.generate(std::vector<std::int64_t>(60, 5), {.max_new_tokens = 10}), kiln::Error);
}

BOOST_AUTO_TEST_CASE(kiln_generate_streams_tokens_and_timings) {
  const Expected c = expected_of("gpt2")[1];
  std::string ids;
  for (std::int64_t id : c.prompt) ids += (ids.empty() ? "" : ",") + std::to_string(id);
  const cli_test::Result text = cli_test::run_kiln("generate tests/fixtures/causal_lm/gpt2 --prompt-ids " + ids +
                                                   " --max-new-tokens 6 --stop-ids '' --mode reduce-overhead");
  BOOST_TEST(text.exit_code == 0, text.output);
  std::string expected_stream = "new tokens:";
  for (int i = 0; i < 6; ++i) expected_stream += " " + std::to_string(c.new_tokens[i]);
  BOOST_TEST(text.output.find(expected_stream) != std::string::npos, text.output);
  BOOST_TEST(text.output.find("decode") != std::string::npos);
  BOOST_TEST(text.output.find("1 step model") != std::string::npos);
  BOOST_TEST(text.output.find("load: GPT2LMHeadModel from 'tests/fixtures/causal_lm/gpt2': checkpoint tensors") !=
                 std::string::npos,
             text.output);

  const cli_test::Result json = cli_test::run_kiln("generate tests/fixtures/causal_lm/gpt2 --prompt-ids " + ids +
                                                   " --max-new-tokens 24 --stop-ids '' --json --eager");
  BOOST_TEST_REQUIRE(json.exit_code == 0, json.output);
  const std::size_t open = json.output.find('{'), close = json.output.rfind('}');
  BOOST_TEST_REQUIRE((open != std::string::npos && close != std::string::npos), json.output);
  const nlohmann::json out = nlohmann::json::parse(json.output.substr(open, close - open + 1));
  BOOST_TEST(out["new_ids"].get<std::vector<std::int64_t>>() == c.new_tokens);
  BOOST_TEST(out["prompt_ids"].get<std::vector<std::int64_t>>() == c.prompt);
  BOOST_TEST(out["compiles"].get<int>() == 1);
  BOOST_TEST(out["mode"].get<std::string>() == "eager");
  BOOST_TEST(out["load"].get<std::string>().find("computing in f32") != std::string::npos, out["load"]);

  const cli_test::Result bench = cli_test::run_kiln("generate tests/fixtures/causal_lm/gpt2 --prompt-ids " + ids +
                                                    " --max-new-tokens 4 --bench --rounds 1 --modes eager,reduce-overhead");
  BOOST_TEST(bench.exit_code == 0, bench.output);
  BOOST_TEST(bench.output.find("decode tok/s") != std::string::npos, bench.output);
  BOOST_TEST(bench.output.find("\neager ") != std::string::npos, bench.output);
  BOOST_TEST(bench.output.find("\nreduce-overhead ") != std::string::npos, bench.output);

  const cli_test::Result bad = cli_test::run_kiln("generate tests/fixtures/causal_lm/gpt2 --prompt-ids 5,x");
  BOOST_TEST(bad.exit_code != 0);
  BOOST_TEST(bad.output.find("--prompt-ids: 'x'") != std::string::npos, bad.output);
  const cli_test::Result missing = cli_test::run_kiln("generate tests/fixtures --prompt-ids 5");
  BOOST_TEST(missing.exit_code != 0);
  BOOST_TEST(missing.output.find("config.json") != std::string::npos, missing.output);
}

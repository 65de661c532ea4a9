#define BOOST_TEST_MODULE tokenizer
#include <boost/test/unit_test.hpp>

// kiln::Tokenizer against transformers' AutoTokenizer
// (tests/fixtures/tokenizers, made by its make_fixtures.py): byte-level BPE
// in GPT-2's, Llama 3's and Qwen2's layouts and a SentencePiece model, on
// strings with Unicode, whitespace runs, special tokens and punctuation;
// streaming decode; damaged files.

#include <kiln/error.h>
#include <kiln/tokenizer.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

fs::path fixture_dir() {
  const char* root = std::getenv("KILN_SOURCE_ROOT");
  const fs::path base = root != nullptr && *root != '\0' ? fs::path(root) / "tests" : fs::path(__FILE__).parent_path();
  return base / "fixtures" / "tokenizers";
}

void check_against_transformers(const std::string& name, const std::string& kind) {
  const kiln::Tokenizer tok = kiln::Tokenizer::load((fixture_dir() / name).string());
  BOOST_TEST(tok.description().find(kind) != std::string::npos, tok.description());
  std::ifstream in(fixture_dir() / name / "expected.json");
  const nlohmann::json expected = nlohmann::json::parse(in);
  BOOST_TEST(tok.vocab_size() == expected["vocab_size"].get<std::int64_t>());
  for (const nlohmann::json& c : expected["cases"]) {
    const std::string text = c["text"].get<std::string>();
    const std::vector<std::int64_t> want = c["ids"].get<std::vector<std::int64_t>>();
    const std::vector<std::int64_t> got = tok.encode(text);
    BOOST_TEST(got == want, name << ": encode(\"" << text << "\")");
    BOOST_TEST(tok.decode(want) == c["decoded"].get<std::string>(), name << ": decode of \"" << text << "\"");
    BOOST_TEST(tok.decode(want, true) == c["decoded_skipping_special"].get<std::string>(),
               name << ": decode skipping special tokens of \"" << text << "\"");
    // Streaming gives the same text, a piece at a time, never a cut character.
    kiln::TextStream stream(tok, true);
    std::string streamed;
    for (std::int64_t id : want) {
      const std::string piece = stream.push(id);
      BOOST_TEST((piece.find("\xEF\xBF\xBD") == std::string::npos || text.find("\xEF\xBF\xBD") != std::string::npos));
      streamed += piece;
    }
    streamed += stream.finish();
    BOOST_TEST(streamed == c["decoded_skipping_special"].get<std::string>(), name << ": streamed \"" << text << "\"");
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(gpt2_byte_level_bpe) { check_against_transformers("gpt2", "byte-level BPE"); }
BOOST_AUTO_TEST_CASE(llama3_split_regex_and_template) { check_against_transformers("llama3", "byte-level BPE"); }
BOOST_AUTO_TEST_CASE(qwen2_nfc_normalizer) { check_against_transformers("qwen2", "byte-level BPE"); }
BOOST_AUTO_TEST_CASE(sentencepiece_model) { check_against_transformers("sentencepiece", "SentencePiece"); }

BOOST_AUTO_TEST_CASE(special_tokens_and_ids) {
  const kiln::Tokenizer tok = kiln::Tokenizer::load((fixture_dir() / "llama3").string());
  BOOST_TEST((tok.token_to_id("<|begin_of_text|>") == std::optional<std::int64_t>(0)));
  BOOST_TEST(!tok.token_to_id("no such token").has_value());
  // Without special tokens: no BOS.
  BOOST_TEST(tok.encode("Hello", false).front() != 0);
  BOOST_TEST(tok.encode("Hello").front() == 0);
  BOOST_CHECK_THROW(tok.decode(std::vector<std::int64_t>{tok.vocab_size()}), kiln::Error);
  BOOST_CHECK_THROW(tok.encode("bad \xff utf-8"), kiln::Error);
}

// Ids may be sparse: loading takes memory by the entries, not by the
// largest id (a 2 KB file with an id near 2^31 once asked for gigabytes).
BOOST_AUTO_TEST_CASE(sparse_ids_take_memory_by_the_entries) {
  const fs::path dir = fs::temp_directory_path() / ("kiln-tokenizer-sparse-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ifstream in(fixture_dir() / "llama3" / "tokenizer.json");
  nlohmann::json tokenizer = nlohmann::json::parse(in);
  constexpr std::int64_t kFar = 2147483646;  // the largest id a file may give
  tokenizer["model"]["vocab"]["zzsparse"] = kFar;
  std::ofstream(dir / "tokenizer.json") << tokenizer.dump();
  const kiln::Tokenizer tok = kiln::Tokenizer::load(dir.string());
  BOOST_TEST(tok.vocab_size() == kFar + 1);
  BOOST_TEST(tok.decode(std::vector<std::int64_t>{kFar}) == "zzsparse");
  BOOST_TEST((tok.token_to_id("zzsparse") == std::optional<std::int64_t>(kFar)));
  // An id between the entries has no token: it decodes to nothing.
  const std::vector<std::int64_t> hello = tok.encode("Hello", false);
  BOOST_TEST(tok.decode(hello) == "Hello");
  BOOST_TEST(tok.decode(std::vector<std::int64_t>{kFar - 1}).empty());
  fs::remove_all(dir);
}

// Found by fuzz_tokenizer: a template's special-token id of 5.6e36 was
// converted to an integer with undefined behaviour (UBSan).
BOOST_AUTO_TEST_CASE(template_ids_that_are_not_token_ids_are_refused) {
  const fs::path dir = fs::temp_directory_path() / ("kiln-tokenizer-template-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ifstream in(fixture_dir() / "llama3" / "tokenizer.json");
  const nlohmann::json original = nlohmann::json::parse(in);
  BOOST_TEST_REQUIRE(original["post_processor"]["type"] == "TemplateProcessing");
  const nlohmann::json bad_ids[] = {5.588888888888889e36, -1, 1.5, "1", 2147483647};
  for (const nlohmann::json& bad : bad_ids) {
    nlohmann::json tokenizer = original;
    for (auto& [name, special] : tokenizer["post_processor"]["special_tokens"].items()) special["ids"] = {bad};
    std::ofstream(dir / "tokenizer.json") << tokenizer.dump();
    try {
      kiln::Tokenizer::load(dir.string());
      BOOST_ERROR("a template id " << bad.dump() << " was taken");
    } catch (const kiln::Error& e) {
      BOOST_TEST(static_cast<int>(e.kind()) == static_cast<int>(kiln::ErrorKind::Corrupt));
      BOOST_TEST(std::string(e.what()).find("not a token id") != std::string::npos, e.what());
    }
  }
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(unsupported_and_damaged_files_are_named) {
  const fs::path dir = fs::temp_directory_path() / ("kiln-tokenizer-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto error_of = [&]() -> std::string {
    try {
      kiln::Tokenizer::load(dir.string());
    } catch (const kiln::Error& e) {
      return e.what();
    }
    return "no error";
  };
  BOOST_TEST(error_of().find("no tokenizer.json") != std::string::npos);
  std::ifstream in(fixture_dir() / "gpt2" / "tokenizer.json");
  nlohmann::json tokenizer = nlohmann::json::parse(in);
  tokenizer["model"]["type"] = "WordPiece";
  std::ofstream(dir / "tokenizer.json") << tokenizer.dump();
  BOOST_TEST(error_of().find("WordPiece") != std::string::npos, error_of());
  tokenizer["model"]["type"] = "BPE";
  tokenizer["normalizer"] = {{"type", "Lowercase"}};
  std::ofstream(dir / "tokenizer.json") << tokenizer.dump();
  BOOST_TEST(error_of().find("Lowercase") != std::string::npos, error_of());
  // Beside a tokenizer.model, a tokenizer.json kiln does not read gives way to it.
  fs::copy(fixture_dir() / "sentencepiece" / "tokenizer.model", dir / "tokenizer.model");
  BOOST_TEST(kiln::Tokenizer::load(dir.string()).description().find("SentencePiece") != std::string::npos);
  fs::remove(dir / "tokenizer.model");
  std::ofstream(dir / "tokenizer.json") << "{ not json";
  BOOST_TEST(error_of().find("not a JSON object") != std::string::npos, error_of());
  fs::remove(dir / "tokenizer.json");
  std::ofstream(dir / "tokenizer.model") << "not a sentencepiece model";
  BOOST_TEST(error_of().find("tokenizer.model") != std::string::npos, error_of());
  fs::remove_all(dir);
}

// A SentencePiece tokenizer.model read by a program linked as applications
// link kiln (libkiln, whose ONNX importer brings libprotobuf): Debian's
// libsentencepiece bundles a protobuf runtime of its own, which the one
// loaded first replaced, so reading the model there aborted the process.
// kiln opens sentencepiece in a link-map namespace of its own
// (src/generate/sentencepiece_shim.cpp): the model reads and encodes right
// after an ONNX import in the same process.
#define BOOST_TEST_MODULE tokenizer_in_libkiln
#include <boost/test/unit_test.hpp>

#include <kiln/kiln.h>
#include <kiln/onnx.h>
#include <kiln/tokenizer.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

fs::path tests_dir() {
  const char* root = std::getenv("KILN_SOURCE_ROOT");
  return root != nullptr && *root != '\0' ? fs::path(root) / "tests" : fs::path(__FILE__).parent_path();
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_sentencepiece_model_reads_beside_the_onnx_importer) {
  // The importer works in this process (and its libprotobuf is loaded).
  const kiln::Model model =
      kiln::load_onnx((tests_dir() / "fixtures" / "onnxruntime" / "dft_inverse_padded" / "model.onnx").string());
  BOOST_TEST(!model.inputs().empty());

  const fs::path folder = tests_dir() / "fixtures" / "tokenizers" / "sentencepiece";
  std::ifstream in(folder / "expected.json");
  const nlohmann::json expected = nlohmann::json::parse(in);
  const kiln::Tokenizer tok = kiln::Tokenizer::load(folder.string());
  BOOST_TEST(tok.vocab_size() == expected["vocab_size"].get<std::int64_t>());
  for (const nlohmann::json& c : expected["cases"]) {
    const std::vector<std::int64_t> want = c["ids"].get<std::vector<std::int64_t>>();
    BOOST_TEST(tok.encode(c["text"].get<std::string>()) == want, c["text"].get<std::string>());
    BOOST_TEST(tok.decode(want) == c["decoded"].get<std::string>());
  }

  // A tokenizer.json reads as ever in the same process.
  const kiln::Tokenizer gpt2 = kiln::Tokenizer::load((tests_dir() / "fixtures" / "tokenizers" / "gpt2").string());
  BOOST_TEST(!gpt2.encode("Hello world").empty());
}

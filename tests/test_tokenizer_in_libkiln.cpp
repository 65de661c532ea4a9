// A SentencePiece tokenizer.model read by a program linked as applications
// link kiln (libkiln, whose ONNX importer brings libprotobuf): Debian's
// libsentencepiece bundles a protobuf runtime of its own, which the one
// loaded first replaces, so reading the model there aborted the process.
// Here it is a clear error naming the cause and the way out, or, where the
// runtimes do not clash, the right tokens; never a crash.
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

BOOST_AUTO_TEST_CASE(a_sentencepiece_model_beside_the_onnx_importer_is_an_error_or_right) {
  // The importer works in this process (and its libprotobuf is loaded).
  const kiln::Model model =
      kiln::load_onnx((tests_dir() / "fixtures" / "onnxruntime" / "dft_inverse_padded" / "model.onnx").string());
  BOOST_TEST(!model.inputs().empty());

  const fs::path folder = tests_dir() / "fixtures" / "tokenizers" / "sentencepiece";
  std::ifstream in(folder / "expected.json");
  const nlohmann::json expected = nlohmann::json::parse(in);
  const nlohmann::json& first = expected["cases"].at(0);
  try {
    const kiln::Tokenizer tok = kiln::Tokenizer::load(folder.string());
    BOOST_TEST_MESSAGE("the protobuf runtimes do not clash here: " + tok.description());
    BOOST_TEST(tok.encode(first["text"].get<std::string>()) == first["ids"].get<std::vector<std::int64_t>>());
  } catch (const kiln::Error& e) {
    BOOST_TEST_MESSAGE(std::string("refused, as it must be where the runtimes clash: ") + e.what());
    BOOST_TEST((e.kind() == kiln::ErrorKind::Unsupported), e.what());
    const std::string message = e.what();
    BOOST_TEST(message.find("tokenizer.model") != std::string::npos, message);
    BOOST_TEST(message.find("protobuf") != std::string::npos, message);
    BOOST_TEST(message.find("tokenizer.json") != std::string::npos, message);
  }

  // A tokenizer.json reads as ever in the same process.
  const kiln::Tokenizer gpt2 = kiln::Tokenizer::load((tests_dir() / "fixtures" / "tokenizers" / "gpt2").string());
  BOOST_TEST(!gpt2.encode("Hello world").empty());
}

// libFuzzer target: Hugging Face tokenizer.json files (kiln::Tokenizer::load
// of a folder holding the input as its tokenizer.json). A tokenizer that
// loads must encode a text that crosses its pre-tokenizer's cases (words,
// digits, spaces, punctuation, multi-byte UTF-8, invalid UTF-8) and decode
// the ids again, with only user errors (a Split pattern PCRE2 refuses, a
// match limit) allowed.
#include <kiln/tokenizer.h>

#include "fuzz_readers.h"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

const std::string& folder() {
  static const std::string dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string path = std::string(base ? base : "/tmp") + "/kiln-fuzz-tokenizer-" + std::to_string(getpid());
    std::filesystem::create_directories(path);
    return path;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  {
    std::ofstream out(folder() + "/tokenizer.json", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  kiln::fuzz::expect_result_or_user_error("a tokenizer.json", [&] {
    const kiln::Tokenizer tokenizer = kiln::Tokenizer::load(folder());
    const std::string text = "Hello world, it's 2026!  \t\n caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x94\xa5 \xff\xfe end";
    const std::vector<std::int64_t> ids = tokenizer.encode(text);
    for (std::int64_t id : ids)
      if (id < 0 || id >= tokenizer.vocab_size()) std::abort();  // an id outside the vocabulary it reports
    tokenizer.decode(ids);
    tokenizer.decode(ids, true);
  });
  return 0;
}

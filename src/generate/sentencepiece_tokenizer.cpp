// A SentencePiece tokenizer.model through Debian's libsentencepiece,
// encoding and decoding as transformers' LlamaTokenizer (legacy) does.
#include "src/base/check.h"
#include "src/generate/tokenizer_impl.h"

#include <kiln/error.h>

#include <sentencepiece_processor.h>

#include <dlfcn.h>

namespace kiln::tokenizers {
namespace {

// Debian's libsentencepiece carries its own protobuf (3.14) and exports it
// without binding its own calls to it, so where the process loaded
// libprotobuf first (kiln's ONNX importer links 3.21: libkiln.so and `kiln`
// do), sentencepiece's model parser runs 3.21's code, which aborts the
// process on the version check. The file that defines the protobuf runtime
// sentencepiece will call, where it is not sentencepiece itself, else "".
std::string foreign_protobuf_runtime() {
  // google::protobuf::internal::VerifyVersion and sentencepiece's processor
  // constructor, found the way sentencepiece's own calls find them.
  void* verify = dlsym(RTLD_DEFAULT, "_ZN6google8protobuf8internal13VerifyVersionEiiPKc");
  void* processor = dlsym(RTLD_DEFAULT, "_ZN13sentencepiece22SentencePieceProcessorC1Ev");
  Dl_info verify_info{}, processor_info{};
  if (verify == nullptr || processor == nullptr || dladdr(verify, &verify_info) == 0 ||
      dladdr(processor, &processor_info) == 0)
    return "";
  if (verify_info.dli_fbase == processor_info.dli_fbase) return "";
  return verify_info.dli_fname != nullptr ? verify_info.dli_fname : "another library";
}

bool flag(const nlohmann::json& config, const char* key, bool fallback) {
  return config.is_object() && config.contains(key) && config[key].is_boolean() ? config[key].get<bool>() : fallback;
}

class SentencePiece final : public Tokenizer::Impl {
 public:
  SentencePiece(const std::string& path, const nlohmann::json& config) : path_(path) {
    if (const std::string runtime = foreign_protobuf_runtime(); !runtime.empty())
      throw_error(ErrorKind::Unsupported,
                  path + ": this program cannot read SentencePiece models: Debian's libsentencepiece bundles its own "
                         "protobuf runtime (3.14), and the one this process loaded first (" + runtime +
                         ", which kiln's ONNX importer uses) would take its place and abort; give the model's "
                         "tokenizer.json instead (transformers saves one with every fast tokenizer)");
    const sentencepiece::util::Status status = processor_.Load(path);
    KILN_CHECK(status.ok(), ErrorKind::Corrupt, path + ": " + status.ToString());
    add_bos_ = flag(config, "add_bos_token", true);
    add_eos_ = flag(config, "add_eos_token", false);
    clean_up_ = flag(config, "clean_up_tokenization_spaces", false);
    legacy_ = flag(config, "legacy", true);
    add_prefix_space_ = flag(config, "add_prefix_space", true);
  }

  std::vector<std::int64_t> encode(std::string_view text, bool add_special_tokens) const override {
    KILN_CHECK(valid_utf8(text) == text, ErrorKind::InvalidArgument, "Tokenizer::encode: the text is not valid UTF-8");
    std::vector<int> pieces;
    if (!text.empty()) {
      const sentencepiece::util::Status status = processor_.Encode(text, &pieces);
      KILN_CHECK(status.ok(), ErrorKind::Internal, path_ + ": encoding failed: " + status.ToString());
    }
    std::vector<std::int64_t> ids;
    if (add_special_tokens && add_bos_ && processor_.bos_id() >= 0) ids.push_back(processor_.bos_id());
    ids.insert(ids.end(), pieces.begin(), pieces.end());
    if (add_special_tokens && add_eos_ && processor_.eos_id() >= 0) ids.push_back(processor_.eos_id());
    return ids;
  }

  // As LlamaTokenizer.convert_tokens_to_string: the first token loses one
  // "▁" (the prefix space SentencePiece added), runs of ordinary pieces
  // decode through SentencePiece (which drops the run's leading space),
  // control tokens (<s>, </s>) are written as they are, after a space where
  // the legacy tokenizer puts one.
  std::string decode(std::span<const std::int64_t> ids, bool skip_special_tokens) const override {
    static const std::string kSpace = "\xE2\x96\x81";  // U+2581
    std::string text;
    std::vector<std::string> run;
    bool previous_special = false;
    const auto flush = [&] {
      if (run.empty()) return;
      std::string piece;
      processor_.Decode(run, &piece);
      text += piece;
      run.clear();
    };
    std::size_t emitted = 0;
    for (const std::int64_t id64 : ids) {
      const int id = static_cast<int>(id64);
      const bool control = processor_.IsControl(id);
      if (control && skip_special_tokens) continue;
      std::string piece = processor_.IdToPiece(id);
      if (emitted++ == 0 && add_prefix_space_ && piece.starts_with(kSpace)) piece.erase(0, kSpace.size());
      if (control) {
        if (!previous_special && emitted != 1 && legacy_) text += ' ';
        flush();
        text += piece;
        previous_special = true;
        continue;
      }
      run.push_back(std::move(piece));
      previous_special = false;
    }
    flush();
    return clean_up_ ? clean_up_tokenization(std::move(text)) : text;
  }

  std::int64_t vocab_size() const override { return processor_.GetPieceSize(); }

  std::optional<std::int64_t> token_to_id(std::string_view token) const override {
    const int id = processor_.PieceToId(token);
    if (id == processor_.unk_id() && token != processor_.IdToPiece(id)) return std::nullopt;
    return id;
  }

  std::string description() const override { return "SentencePiece (tokenizer.model)"; }

 private:
  std::string path_;
  sentencepiece::SentencePieceProcessor processor_;
  bool add_bos_ = true, add_eos_ = false, clean_up_ = false, legacy_ = true, add_prefix_space_ = true;
};

}  // namespace

std::unique_ptr<Tokenizer::Impl> load_sentencepiece(const std::string& path, const nlohmann::json& config) {
  return std::make_unique<SentencePiece>(path, config);
}

}  // namespace kiln::tokenizers

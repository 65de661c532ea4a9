// A SentencePiece tokenizer.model through Debian's libsentencepiece,
// encoding and decoding as transformers' LlamaTokenizer (legacy) does.
//
// libsentencepiece is opened in a link-map namespace of its own (dlmopen),
// through a module with a C interface (sentencepiece_shim.cpp): Debian's
// build carries its own protobuf runtime (3.14) and exports it without
// binding its own calls to it, so in a process that loaded libprotobuf
// first (3.21, the ONNX importer's: libkiln and `kiln` do) its model parser
// ran 3.21's code and aborted in the version check.
#include "src/base/check.h"
#include "src/base/log.h"
#include "src/generate/tokenizer_impl.h"
#include "src/tune/worker_location.h"

#include <kiln/error.h>

#include <dlfcn.h>

#include <cstddef>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::tokenizers {
namespace {

constexpr const char* kModuleName = "libkiln-sentencepiece.so";

using TextSink = void (*)(void* context, const char* data, std::size_t size);
using IdSink = void (*)(void* context, const int* ids, std::size_t count);

// The module's functions (sentencepiece_shim.cpp).
struct Module {
  void* (*load)(const char* path, TextSink error, void* context) = nullptr;
  void (*free)(void* handle) = nullptr;
  int (*encode)(void* handle, const char* text, std::size_t size, IdSink ids, void* ids_context, TextSink error,
                void* error_context) = nullptr;
  void (*decode)(void* handle, const char* const* pieces, const std::size_t* sizes, std::size_t count, TextSink text,
                 void* context) = nullptr;
  void (*id_to_piece)(void* handle, int id, TextSink text, void* context) = nullptr;
  int (*piece_to_id)(void* handle, const char* piece, std::size_t size) = nullptr;
  int (*is_control)(void* handle, int id) = nullptr;
  int (*number)(void* handle, int which) = nullptr;
};

template <typename F>
void bind_symbol(void* library, const char* name, F& function, const std::string& path) {
  function = reinterpret_cast<F>(dlsym(library, name));
  KILN_CHECK(function != nullptr, ErrorKind::Internal, path + " lacks " + name + ": a module of another kiln build?");
}

// The module, opened once per process ($KILN_SENTENCEPIECE_MODULE, else
// beside the tuning worker); throws NotFound naming the places tried.
const Module& module() {
  static std::once_flag once;
  static Module opened;
  static std::string failure;
  std::call_once(once, [] {
    std::string path;
    if (const char* env = std::getenv("KILN_SENTENCEPIECE_MODULE"); env != nullptr && *env != '\0') path = env;
    if (path.empty()) path = tune::find_helper(kModuleName);
    if (path.empty()) {
      failure = std::string("kiln's SentencePiece module (") + kModuleName + ") is not installed; looked in:";
      for (const std::string& tried : tune::helper_search_path(kModuleName)) failure += " " + tried;
      return;
    }
    void* library = dlmopen(LM_ID_NEWLM, path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char* why = dlerror();
      failure = path + ": cannot open kiln's SentencePiece module: " + (why != nullptr ? why : "dlmopen failed");
      return;
    }
    base::log(base::LogLevel::debug, "SentencePiece module: " + path);
    bind_symbol(library, "kiln_spm_load", opened.load, path);
    bind_symbol(library, "kiln_spm_free", opened.free, path);
    bind_symbol(library, "kiln_spm_encode", opened.encode, path);
    bind_symbol(library, "kiln_spm_decode", opened.decode, path);
    bind_symbol(library, "kiln_spm_id_to_piece", opened.id_to_piece, path);
    bind_symbol(library, "kiln_spm_piece_to_id", opened.piece_to_id, path);
    bind_symbol(library, "kiln_spm_is_control", opened.is_control, path);
    bind_symbol(library, "kiln_spm_number", opened.number, path);
  });
  KILN_CHECK(failure.empty(), ErrorKind::NotFound, failure);
  return opened;
}

void append_text(void* context, const char* data, std::size_t size) {
  static_cast<std::string*>(context)->append(data, size);
}

void append_ids(void* context, const int* ids, std::size_t count) {
  auto* out = static_cast<std::vector<int>*>(context);
  out->insert(out->end(), ids, ids + count);
}

bool flag(const nlohmann::json& config, const char* key, bool fallback) {
  return config.is_object() && config.contains(key) && config[key].is_boolean() ? config[key].get<bool>() : fallback;
}

class SentencePiece final : public Tokenizer::Impl {
 public:
  SentencePiece(const std::string& path, const nlohmann::json& config) : path_(path), spm_(module()) {
    std::string error;
    handle_ = spm_.load(path.c_str(), append_text, &error);
    KILN_CHECK(handle_ != nullptr, ErrorKind::Corrupt, path + ": " + error);
    add_bos_ = flag(config, "add_bos_token", true);
    add_eos_ = flag(config, "add_eos_token", false);
    clean_up_ = flag(config, "clean_up_tokenization_spaces", false);
    legacy_ = flag(config, "legacy", true);
    add_prefix_space_ = flag(config, "add_prefix_space", true);
  }
  ~SentencePiece() override { spm_.free(handle_); }
  SentencePiece(const SentencePiece&) = delete;
  SentencePiece& operator=(const SentencePiece&) = delete;

  std::vector<std::int64_t> encode(std::string_view text, bool add_special_tokens) const override {
    KILN_CHECK(valid_utf8(text) == text, ErrorKind::InvalidArgument, "Tokenizer::encode: the text is not valid UTF-8");
    std::vector<int> pieces;
    if (!text.empty()) {
      std::string error;
      const int ok = spm_.encode(handle_, text.data(), text.size(), append_ids, &pieces, append_text, &error);
      KILN_CHECK(ok != 0, ErrorKind::Internal, path_ + ": encoding failed: " + error);
    }
    std::vector<std::int64_t> ids;
    const int bos = spm_.number(handle_, 1), eos = spm_.number(handle_, 2);
    if (add_special_tokens && add_bos_ && bos >= 0) ids.push_back(bos);
    ids.insert(ids.end(), pieces.begin(), pieces.end());
    if (add_special_tokens && add_eos_ && eos >= 0) ids.push_back(eos);
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
      std::vector<const char*> data;
      std::vector<std::size_t> sizes;
      for (const std::string& piece : run) {
        data.push_back(piece.data());
        sizes.push_back(piece.size());
      }
      spm_.decode(handle_, data.data(), sizes.data(), run.size(), append_text, &text);
      run.clear();
    };
    std::size_t emitted = 0;
    for (const std::int64_t id64 : ids) {
      const int id = static_cast<int>(id64);
      const bool control = spm_.is_control(handle_, id) != 0;
      if (control && skip_special_tokens) continue;
      std::string piece = id_to_piece(id);
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

  std::int64_t vocab_size() const override { return spm_.number(handle_, 0); }

  std::optional<std::int64_t> token_to_id(std::string_view token) const override {
    const int id = spm_.piece_to_id(handle_, token.data(), token.size());
    if (id == spm_.number(handle_, 3) && token != id_to_piece(id)) return std::nullopt;
    return id;
  }

  std::string description() const override { return "SentencePiece (tokenizer.model)"; }

 private:
  std::string id_to_piece(int id) const {
    std::string piece;
    spm_.id_to_piece(handle_, id, append_text, &piece);
    return piece;
  }

  std::string path_;
  const Module& spm_;
  void* handle_ = nullptr;
  bool add_bos_ = true, add_eos_ = false, clean_up_ = false, legacy_ = true, add_prefix_space_ = true;
};

}  // namespace

std::unique_ptr<Tokenizer::Impl> load_sentencepiece(const std::string& path, const nlohmann::json& config) {
  return std::make_unique<SentencePiece>(path, config);
}

}  // namespace kiln::tokenizers

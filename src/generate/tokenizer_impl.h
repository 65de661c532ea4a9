// The tokenizer kinds behind kiln::Tokenizer (include/kiln/tokenizer.h).
#pragma once

#include <kiln/tokenizer.h>

#include <nlohmann/json.hpp>

#include <memory>
#include <string>

namespace kiln {

class Tokenizer::Impl {
 public:
  virtual ~Impl() = default;
  virtual std::vector<std::int64_t> encode(std::string_view text, bool add_special_tokens) const = 0;
  virtual std::string decode(std::span<const std::int64_t> ids, bool skip_special_tokens) const = 0;
  virtual std::int64_t vocab_size() const = 0;
  virtual std::optional<std::int64_t> token_to_id(std::string_view token) const = 0;
  virtual std::string description() const = 0;
};

namespace tokenizers {

// tokenizer.json's byte-level BPE; `config` is tokenizer_config.json (or null).
std::unique_ptr<Tokenizer::Impl> load_byte_level_bpe(const std::string& path, const nlohmann::json& config);
// A SentencePiece tokenizer.model.
std::unique_ptr<Tokenizer::Impl> load_sentencepiece(const std::string& path, const nlohmann::json& config);

// transformers' clean_up_tokenization: " ." -> "." and the like.
std::string clean_up_tokenization(std::string text);
// `bytes` with each invalid UTF-8 sequence replaced by U+FFFD (as Python's errors="replace").
std::string valid_utf8(std::string_view bytes);

}  // namespace tokenizers
}  // namespace kiln

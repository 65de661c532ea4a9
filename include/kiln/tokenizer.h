// Tokenizers of Hugging Face model folders, as transformers' AutoTokenizer
// encodes and decodes:
//
//   kiln::Tokenizer tok = kiln::Tokenizer::load("path/to/model");
//   std::vector<std::int64_t> ids = tok.encode("Hello world");   // special tokens added as the model's config says
//   std::string text = tok.decode(ids);
//
// tokenizer.json with a byte-level BPE model (GPT-2, Llama 3, Qwen2 and
// most recent checkpoints): added and special tokens split out first, an
// NFC normalizer (ICU), GPT-2's ByteLevel pre-tokenizer or a Split regex
// (PCRE2) followed by ByteLevel, BPE merges by rank (ignore_merges
// honoured), a TemplateProcessing post-processor, the ByteLevel decoder and
// clean_up_tokenization_spaces. Else tokenizer.model, a SentencePiece model
// (Llama 2, Gemma: Debian's libsentencepiece), with tokenizer_config.json's
// add_bos_token / add_eos_token. Any other component is an error naming it.
#pragma once

#include <kiln/export.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

class KILN_API Tokenizer {
 public:
  // Throws Error(NotFound) if the folder has neither file, Error(Unsupported)
  // naming a component kiln does not implement, Error(Corrupt) for a
  // malformed file.
  static Tokenizer load(const std::string& folder);

  // The ids of `text` (UTF-8), with the model's special tokens (a BOS) when
  // `add_special_tokens`, as tokenizer(text)["input_ids"].
  std::vector<std::int64_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // The text of `ids` (invalid UTF-8 from a cut multi-byte character becomes
  // U+FFFD), as tokenizer.decode(ids). Throws InvalidArgument for an id
  // outside the vocabulary.
  std::string decode(std::span<const std::int64_t> ids, bool skip_special_tokens = false) const;
  // Ids, added tokens included.
  std::int64_t vocab_size() const;
  std::optional<std::int64_t> token_to_id(std::string_view token) const;
  // "byte-level BPE (tokenizer.json)" or "SentencePiece (tokenizer.model)".
  std::string description() const;

  class Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl);

 private:
  std::shared_ptr<const Impl> impl_;
};

// Text as it streams: push() each new id, and get the text it completes
// (held back while it ends in a cut multi-byte character), as transformers'
// TextStreamer prints it.
class KILN_API TextStream {
 public:
  explicit TextStream(const Tokenizer& tokenizer, bool skip_special_tokens = true);
  std::string push(std::int64_t id);
  // What push() held back, at the end.
  std::string finish();

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::vector<std::int64_t> ids_;
  std::size_t printed_ = 0;  // bytes of decode(ids_) already returned
};

}  // namespace kiln

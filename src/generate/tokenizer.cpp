// kiln::Tokenizer::load, TextStream, and what both tokenizer kinds share.
#include "src/base/check.h"
#include "src/generate/tokenizer_impl.h"

#include <kiln/error.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace kiln {

Tokenizer::Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Tokenizer Tokenizer::load(const std::string& folder) {
  namespace fs = std::filesystem;
  const fs::path dir(folder);
  std::error_code ec;
  nlohmann::json config;
  if (const fs::path path = dir / "tokenizer_config.json"; fs::exists(path, ec)) {
    std::ifstream in(path);
    config = nlohmann::json::parse(in, nullptr, false);
    KILN_CHECK(!config.is_discarded() && config.is_object(), ErrorKind::Corrupt, path.string() + ": not a JSON object");
  }
  const fs::path sentencepiece = dir / "tokenizer.model";
  if (const fs::path path = dir / "tokenizer.json"; fs::exists(path, ec)) {
    try {
      return Tokenizer(tokenizers::load_byte_level_bpe(path.string(), config));
    } catch (const Error& e) {
      // Llama 2 ships a SentencePiece-style tokenizer.json beside its tokenizer.model.
      if (e.kind() != ErrorKind::Unsupported || !fs::exists(sentencepiece, ec)) throw;
    }
  }
  if (fs::exists(sentencepiece, ec)) return Tokenizer(tokenizers::load_sentencepiece(sentencepiece.string(), config));
  throw_error(ErrorKind::NotFound, "'" + folder + "' has no tokenizer.json and no tokenizer.model");
}

std::vector<std::int64_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  return impl_->encode(text, add_special_tokens);
}

std::string Tokenizer::decode(std::span<const std::int64_t> ids, bool skip_special_tokens) const {
  for (std::int64_t id : ids)
    KILN_CHECK(id >= 0 && id < impl_->vocab_size(), ErrorKind::InvalidArgument,
               "Tokenizer::decode: id " + std::to_string(id) + " is outside the vocabulary [0, " +
                   std::to_string(impl_->vocab_size()) + ")");
  return impl_->decode(ids, skip_special_tokens);
}

std::int64_t Tokenizer::vocab_size() const { return impl_->vocab_size(); }

std::optional<std::int64_t> Tokenizer::token_to_id(std::string_view token) const { return impl_->token_to_id(token); }

std::string Tokenizer::description() const { return impl_->description(); }

TextStream::TextStream(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_(skip_special_tokens) {}

std::string TextStream::push(std::int64_t id) {
  ids_.push_back(id);
  const std::string text = tokenizer_->decode(ids_, skip_special_);
  // A cut multi-byte character decodes as U+FFFD (EF BF BD) at the end: wait for the rest.
  if (text.size() >= 3 && text.compare(text.size() - 3, 3, "\xEF\xBF\xBD") == 0) return "";
  // Hold back a trailing space and what follows it while a clean-up rule
  // (" ," -> ",", " n't" -> "n't", ...) could still remove that space.
  std::size_t ready = text.size();
  if (const std::size_t space = text.rfind(' '); space != std::string::npos && text.size() - space <= 3) {
    const std::string tail = text.substr(space);
    for (const char* rule : {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " 's", " 've", " 're"})
      if (std::string_view(rule).starts_with(tail)) ready = space;
  }
  if (ready <= printed_) return "";
  std::string fresh = text.substr(printed_, ready - printed_);
  printed_ = ready;
  return fresh;
}

std::string TextStream::finish() {
  const std::string text = tokenizer_->decode(ids_, skip_special_);
  std::string rest = text.size() > printed_ ? text.substr(printed_) : "";
  printed_ = text.size();
  return rest;
}

namespace tokenizers {

std::string clean_up_tokenization(std::string text) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
      {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) {
    const std::string f(from), t(to);
    std::string out;
    std::size_t at = 0;
    for (std::size_t hit; (hit = text.find(f, at)) != std::string::npos; at = hit + f.size()) out += text.substr(at, hit - at) + t;
    text = out + text.substr(at);
  }
  return text;
}

std::string valid_utf8(std::string_view bytes) {
  // Unicode's "maximal subpart" rule, which Python's errors="replace" follows:
  // a bad lead byte is one U+FFFD; a sequence cut short is one U+FFFD for
  // the bytes that were a valid beginning.
  std::string out;
  out.reserve(bytes.size());
  const auto at = [&](std::size_t i) { return static_cast<unsigned char>(bytes[i]); };
  std::size_t i = 0;
  while (i < bytes.size()) {
    const unsigned char lead = at(i);
    if (lead < 0x80) {
      out += static_cast<char>(lead);
      ++i;
      continue;
    }
    std::size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;  // the second byte's range
    if (lead >= 0xC2 && lead <= 0xDF) length = 2;
    else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    }
    std::size_t good = length == 0 ? 0 : 1;  // bytes that form a valid beginning
    while (good != 0 && good < length && i + good < bytes.size()) {
      const unsigned char b = at(i + good);
      const bool fits = good == 1 ? (b >= low && b <= high) : (b >= 0x80 && b <= 0xBF);
      if (!fits) break;
      ++good;
    }
    if (length != 0 && good == length) {
      out.append(bytes.substr(i, length));
      i += length;
    } else {
      out += "\xEF\xBF\xBD";
      i += std::max<std::size_t>(good, 1);
    }
  }
  return out;
}

}  // namespace tokenizers
}  // namespace kiln

// Byte-level BPE from a tokenizer.json (the Hugging Face `tokenizers`
// library's format), encoding and decoding as that library does.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "src/base/check.h"
#include "src/base/printable.h"
#include "src/generate/tokenizer_impl.h"

#include <kiln/error.h>

#include <pcre2.h>
#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <climits>
#include <fstream>
#include <map>
#include <mutex>
#include <unordered_map>

namespace kiln::tokenizers {
namespace {

// GPT-2's pre-tokenizer split, the ByteLevel pre-tokenizer's default.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string utf8_of(std::uint32_t cp) {
  std::string out;
  if (cp < 0x80) out += static_cast<char>(cp);
  else if (cp < 0x800) out += static_cast<char>(0xC0 | cp >> 6), out += static_cast<char>(0x80 | (cp & 0x3F));
  else out += static_cast<char>(0xE0 | cp >> 12), out += static_cast<char>(0x80 | (cp >> 6 & 0x3F)), out += static_cast<char>(0x80 | (cp & 0x3F));
  return out;
}

// GPT-2's bytes_to_unicode(): each byte as a printable character (the
// printable Latin-1 bytes as themselves, the rest from U+0100 on).
struct ByteMap {
  std::string of_byte[256];
  std::unordered_map<std::string, unsigned char> to_byte;
  ByteMap() {
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      of_byte[b] = utf8_of(printable ? static_cast<std::uint32_t>(b) : static_cast<std::uint32_t>(256 + next++));
      to_byte.emplace(of_byte[b], static_cast<unsigned char>(b));
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap kMap;
  return kMap;
}

// One compiled regex (PCRE2, UTF and Unicode properties): the pieces of a
// text as the `tokenizers` Split with behaviour "isolated" makes them: each
// match, and each stretch between matches.
class Splitter {
 public:
  Splitter(const std::string& pattern, const std::string& where) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &error,
                          &offset, nullptr);
    if (code_ == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      throw_error(ErrorKind::Unsupported, where + ": the pattern " + pattern + " does not compile (at " +
                                              std::to_string(offset) + ": " + reinterpret_cast<char*>(message) + ")");
    }
  }
  ~Splitter() { pcre2_code_free(code_); }
  Splitter(const Splitter&) = delete;
  Splitter& operator=(const Splitter&) = delete;

  std::vector<std::string_view> split(std::string_view text) const {
    std::vector<std::string_view> pieces;
    pcre2_match_data* match = pcre2_match_data_create_from_pattern(code_, nullptr);
    std::size_t at = 0, last = 0;
    while (at <= text.size()) {
      const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), at,
                                 at == last ? 0 : 0, match, nullptr);
      if (rc < 0) break;
      const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match);
      if (span[0] > last) pieces.push_back(text.substr(last, span[0] - last));
      if (span[1] > span[0]) pieces.push_back(text.substr(span[0], span[1] - span[0]));
      last = span[1];
      // An empty match moves on by one character.
      at = span[1] > span[0] ? span[1] : span[1] + 1;
      while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
    }
    if (last < text.size()) pieces.push_back(text.substr(last));
    pcre2_match_data_free(match);
    return pieces;
  }

 private:
  pcre2_code* code_ = nullptr;
};

struct AddedToken {
  std::int64_t id;
  std::string content;
  bool special;
};

class ByteLevelBpe final : public Tokenizer::Impl {
 public:
  ByteLevelBpe(const std::string& path, const nlohmann::json& tokenizer, const nlohmann::json& config) : path_(path) {
    read_model(tokenizer.at("model"));
    read_added_tokens(tokenizer.value("added_tokens", nlohmann::json::array()));
    read_normalizer(tokenizer.value("normalizer", nlohmann::json()));
    read_pre_tokenizer(tokenizer.value("pre_tokenizer", nlohmann::json()));
    read_post_processor(tokenizer.value("post_processor", nlohmann::json()));
    read_decoder(tokenizer.value("decoder", nlohmann::json()));
    if (config.is_object() && config.contains("clean_up_tokenization_spaces"))
      clean_up_ = config["clean_up_tokenization_spaces"].is_boolean() && config["clean_up_tokenization_spaces"].get<bool>();
    for (const auto& [token, id] : vocab_) vocab_size_ = std::max(vocab_size_, id + 1);
    for (const AddedToken& t : added_) vocab_size_ = std::max(vocab_size_, t.id + 1);
    token_of_.reserve(vocab_.size());
    for (const auto& [token, id] : vocab_) token_of_.emplace(id, token);
    for (const AddedToken& t : added_) added_of_[t.id] = &t;
  }

  std::vector<std::int64_t> encode(std::string_view text, bool add_special_tokens) const override {
    KILN_CHECK(valid_utf8(text) == text, ErrorKind::InvalidArgument, "Tokenizer::encode: the text is not valid UTF-8");
    std::vector<std::int64_t> ids;
    if (add_special_tokens) ids = prefix_;
    std::size_t at = 0;
    while (at <= text.size()) {
      // The next added token (earliest; the longest of those starting there).
      std::size_t hit = std::string_view::npos;
      const AddedToken* found = nullptr;
      for (const AddedToken& t : added_) {
        const std::size_t p = text.find(t.content, at);
        if (p != std::string_view::npos && (p < hit || (p == hit && t.content.size() > found->content.size()))) {
          hit = p;
          found = &t;
        }
      }
      encode_text(text.substr(at, (found ? hit : text.size()) - at), ids);
      if (!found) break;
      ids.push_back(found->id);
      at = hit + found->content.size();
    }
    if (add_special_tokens) ids.insert(ids.end(), suffix_.begin(), suffix_.end());
    return ids;
  }

  std::string decode(std::span<const std::int64_t> ids, bool skip_special_tokens) const override {
    std::string text, pending;  // pending: byte-level characters not yet turned into bytes
    const auto flush = [&] {
      std::string bytes;
      const ByteMap& map = byte_map();
      for (std::size_t i = 0; i < pending.size();) {
        const auto lead = static_cast<unsigned char>(pending[i]);
        const std::size_t length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
        const std::string ch = pending.substr(i, length);
        const auto it = map.to_byte.find(ch);
        if (it != map.to_byte.end()) bytes += static_cast<char>(it->second);
        else bytes += ch;  // not a byte-level character: kept as it is
        i += length;
      }
      text += valid_utf8(bytes);
      pending.clear();
    };
    for (std::int64_t id : ids) {
      if (const auto added = added_of_.find(id); added != added_of_.end()) {
        if (skip_special_tokens && added->second->special) continue;
        flush();
        text += added->second->content;
        continue;
      }
      if (const auto token = token_of_.find(id); token != token_of_.end()) pending += token->second;
    }
    flush();
    return clean_up_ ? clean_up_tokenization(std::move(text)) : text;
  }

  std::int64_t vocab_size() const override { return vocab_size_; }

  std::optional<std::int64_t> token_to_id(std::string_view token) const override {
    for (const AddedToken& t : added_)
      if (t.content == token) return t.id;
    const auto it = vocab_.find(std::string(token));
    return it == vocab_.end() ? std::nullopt : std::optional(it->second);
  }

  std::string description() const override { return "byte-level BPE (tokenizer.json)"; }

 private:
  [[noreturn]] void unsupported(const std::string& what, const nlohmann::json& value) const {
    throw_error(ErrorKind::Unsupported, path_ + ": " + what + " " + value.dump().substr(0, 200) +
                                            " is not one kiln implements (byte-level BPE: ByteLevel or Split + "
                                            "ByteLevel pre-tokenizers, NFC, TemplateProcessing, ByteLevel decoder)");
  }

  void read_model(const nlohmann::json& model) {
    if (model.value("type", "") != "BPE") unsupported("model", model.value("type", nlohmann::json()));
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (model.contains(key) && !model[key].is_null() && model[key] != "") unsupported(std::string("model.") + key, model[key]);
    if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"] != 0.0) unsupported("model.dropout", model["dropout"]);
    if (model.value("byte_fallback", false)) unsupported("model.byte_fallback", true);
    ignore_merges_ = model.value("ignore_merges", false);
    for (const auto& [token, id] : model.at("vocab").items()) {
      KILN_CHECK(id.is_number_integer() && id.get<std::int64_t>() >= 0 && id.get<std::int64_t>() < INT32_MAX,
                 ErrorKind::Corrupt, path_ + ": vocabulary entry '" + token + "' has the id " + id.dump());
      vocab_.emplace(token, id.get<std::int64_t>());
    }
    int rank = 0;
    for (const nlohmann::json& merge : model.at("merges")) {
      std::string a, b;
      if (merge.is_string()) {
        const std::string text = merge.get<std::string>();
        const std::size_t space = text.find(' ');
        KILN_CHECK(space != std::string::npos, ErrorKind::Corrupt, path_ + ": merge '" + text + "' is not two tokens");
        a = text.substr(0, space), b = text.substr(space + 1);
      } else {
        KILN_CHECK(merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string(),
                   ErrorKind::Corrupt, path_ + ": merge " + merge.dump() + " is not two tokens");
        a = merge[0].get<std::string>(), b = merge[1].get<std::string>();
      }
      ranks_.emplace(a + '\0' + b, rank++);
    }
    if (model.contains("unk_token") && model["unk_token"].is_string()) {
      const auto it = vocab_.find(model["unk_token"].get<std::string>());
      if (it != vocab_.end()) unk_ = it->second;
    }
  }

  void read_added_tokens(const nlohmann::json& tokens) {
    for (const nlohmann::json& t : tokens) {
      KILN_CHECK(t.is_object() && t.contains("id") && t["id"].is_number_integer() && t.contains("content") &&
                     t["content"].is_string() && !t["content"].get<std::string>().empty(),
                 ErrorKind::Corrupt, path_ + ": added token " + t.dump().substr(0, 200) + " has no id and content");
      for (const char* flag : {"lstrip", "rstrip", "single_word"})
        if (t.value(flag, false)) unsupported(std::string("added token flag ") + flag, t);
      const std::int64_t id = t["id"].get<std::int64_t>();
      KILN_CHECK(id >= 0 && id < INT32_MAX, ErrorKind::Corrupt, path_ + ": added token id " + std::to_string(id));
      added_.push_back({id, t["content"].get<std::string>(), t.value("special", false)});
    }
  }

  void read_normalizer(const nlohmann::json& normalizer) {
    if (normalizer.is_null()) return;
    if (normalizer.value("type", "") == "NFC") nfc_ = true;
    else unsupported("normalizer", normalizer);
  }

  void read_byte_level(const nlohmann::json& p) {
    byte_level_ = true;
    add_prefix_space_ = p.value("add_prefix_space", false);
    if (p.value("use_regex", true)) splitter_ = std::make_unique<Splitter>(kGpt2Pattern, path_);
  }

  void read_pre_tokenizer(const nlohmann::json& p) {
    const std::string type = p.is_object() ? p.value("type", "") : "";
    if (type == "ByteLevel") return read_byte_level(p);
    if (type == "Sequence" && p.contains("pretokenizers") && p["pretokenizers"].size() == 2) {
      const nlohmann::json& split = p["pretokenizers"][0];
      const nlohmann::json& bytes = p["pretokenizers"][1];
      if (split.value("type", "") == "Split" && split.value("behavior", "") == "Isolated" && !split.value("invert", false) &&
          split.contains("pattern") && bytes.value("type", "") == "ByteLevel" && !bytes.value("use_regex", true)) {
        const nlohmann::json& pattern = split["pattern"];
        if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
          read_byte_level(bytes);
          splitter_ = std::make_unique<Splitter>(pattern["Regex"].get<std::string>(), path_);
          return;
        }
      }
    }
    unsupported("pre_tokenizer", p);
  }

  void read_template(const nlohmann::json& t) {
    bool after = false;
    for (const nlohmann::json& piece : t.at("single")) {
      if (piece.contains("Sequence")) {
        after = true;
        continue;
      }
      const std::string name = piece.at("SpecialToken").at("id").get<std::string>();
      const nlohmann::json& special = t.at("special_tokens").at(name);
      for (const nlohmann::json& id : special.at("ids")) {
        // Checked before get<>: a float out of an integer's range converts with undefined behaviour.
        KILN_CHECK(id.is_number_integer() && id.get<std::int64_t>() >= 0 && id.get<std::int64_t>() < INT32_MAX,
                   ErrorKind::Corrupt,
                   path_ + ": post_processor: special token '" + base::printable(name) + "' has id " + id.dump().substr(0, 40) +
                       ", not a token id");
        (after ? suffix_ : prefix_).push_back(id.get<std::int64_t>());
      }
    }
  }

  void read_post_processor(const nlohmann::json& p) {
    if (p.is_null()) return;
    const std::string type = p.value("type", "");
    if (type == "ByteLevel") return;  // offsets only
    if (type == "TemplateProcessing") return read_template(p);
    if (type == "Sequence") {
      for (const nlohmann::json& each : p.at("processors")) read_post_processor(each);
      return;
    }
    unsupported("post_processor", p);
  }

  void read_decoder(const nlohmann::json& d) {
    if (d.is_object() && d.value("type", "") == "ByteLevel") return;
    unsupported("decoder", d);
  }

  // Appends the ids of `text`, a stretch without added tokens.
  void encode_text(std::string_view text, std::vector<std::int64_t>& ids) const {
    if (text.empty()) return;
    std::string normalised(text);
    if (nfc_) {
      UErrorCode status = U_ZERO_ERROR;
      const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
      KILN_CHECK(U_SUCCESS(status), ErrorKind::Internal, "ICU's NFC normaliser is unavailable");
      const icu::UnicodeString composed = nfc->normalize(icu::UnicodeString::fromUTF8(normalised), status);
      normalised.clear();
      composed.toUTF8String(normalised);
    }
    if (add_prefix_space_ && normalised.front() != ' ') normalised.insert(normalised.begin(), ' ');
    const std::vector<std::string_view> words =
        splitter_ ? splitter_->split(normalised) : std::vector<std::string_view>{normalised};
    for (std::string_view word : words) encode_word(word, ids);
  }

  void encode_word(std::string_view word, std::vector<std::int64_t>& ids) const {
    {
      std::lock_guard lock(cache_mutex_);
      if (const auto it = cache_.find(std::string(word)); it != cache_.end()) {
        ids.insert(ids.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    const ByteMap& map = byte_map();
    std::vector<std::string> symbols;
    std::string whole;
    for (char c : word) {
      symbols.push_back(map.of_byte[static_cast<unsigned char>(c)]);
      whole += symbols.back();
    }
    std::vector<std::int64_t> word_ids;
    if (const auto it = vocab_.find(whole); ignore_merges_ && it != vocab_.end()) {
      word_ids.push_back(it->second);
    } else {
      // Merge the adjacent pair of lowest rank, all its occurrences, until none has a rank.
      while (symbols.size() > 1) {
        int best = INT_MAX;
        std::string best_pair;
        for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
          const auto it2 = ranks_.find(symbols[i] + '\0' + symbols[i + 1]);
          if (it2 != ranks_.end() && it2->second < best) best = it2->second, best_pair = it2->first;
        }
        if (best == INT_MAX) break;
        std::vector<std::string> merged;
        for (std::size_t i = 0; i < symbols.size(); ++i) {
          if (i + 1 < symbols.size() && symbols[i] + '\0' + symbols[i + 1] == best_pair) {
            merged.push_back(symbols[i] + symbols[i + 1]);
            ++i;
          } else {
            merged.push_back(symbols[i]);
          }
        }
        symbols = std::move(merged);
      }
      for (const std::string& s : symbols) {
        const auto it3 = vocab_.find(s);
        if (it3 != vocab_.end()) word_ids.push_back(it3->second);
        else if (unk_) word_ids.push_back(*unk_);
        else throw_error(ErrorKind::Corrupt, path_ + ": the token '" + s + "' is not in the vocabulary and there is no unk_token");
      }
    }
    ids.insert(ids.end(), word_ids.begin(), word_ids.end());
    std::lock_guard lock(cache_mutex_);
    if (cache_.size() < 100000) cache_.emplace(std::string(word), std::move(word_ids));
  }

  std::string path_;
  std::unordered_map<std::string, std::int64_t> vocab_;
  std::unordered_map<std::string, int> ranks_;  // "a\0b" -> merge rank
  std::vector<AddedToken> added_;
  std::map<std::int64_t, const AddedToken*> added_of_;
  // By id; a map, not a table: ids may be sparse, and a file's largest id
  // must not decide how much memory loading it takes.
  std::unordered_map<std::int64_t, std::string> token_of_;
  std::int64_t vocab_size_ = 0;
  std::optional<std::int64_t> unk_;
  bool ignore_merges_ = false;
  bool nfc_ = false;
  bool byte_level_ = false;
  bool add_prefix_space_ = false;
  bool clean_up_ = true;  // transformers' default
  std::unique_ptr<Splitter> splitter_;
  std::vector<std::int64_t> prefix_, suffix_;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<std::int64_t>> cache_;
};

}  // namespace

std::unique_ptr<Tokenizer::Impl> load_byte_level_bpe(const std::string& path, const nlohmann::json& config) {
  std::ifstream in(path);
  KILN_CHECK(in.good(), ErrorKind::Io, "cannot read '" + path + "'");
  const nlohmann::json tokenizer = nlohmann::json::parse(in, nullptr, false);
  KILN_CHECK(!tokenizer.is_discarded() && tokenizer.is_object(), ErrorKind::Corrupt, path + ": not a JSON object");
  try {
    return std::make_unique<ByteLevelBpe>(path, tokenizer, config);
  } catch (const nlohmann::json::exception& e) {
    throw_error(ErrorKind::Corrupt, path + ": " + e.what());
  }
}

}  // namespace kiln::tokenizers

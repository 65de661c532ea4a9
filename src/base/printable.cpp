#include "src/base/printable.h"

#include <cstdint>

namespace kiln::base {
namespace {

void append_escaped(std::string& out, unsigned char byte) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\x";
  out += kHex[byte >> 4];
  out += kHex[byte & 0xf];
}

// The length of the valid UTF-8 sequence at `at` (2 to 4 bytes, no overlong
// forms, surrogates or code points past U+10FFFF), or 0.
std::size_t utf8_sequence(std::string_view s, std::size_t at, std::uint32_t& code_point) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(at);
  std::size_t length = 0;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
    code_point = lead & 0x1f;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    code_point = lead & 0x0f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    code_point = lead & 0x07;
  } else {
    return 0;
  }
  if (at + length > s.size()) return 0;
  for (std::size_t i = 1; i < length; ++i) {
    if ((byte(at + i) & 0xc0) != 0x80) return 0;
    code_point = code_point << 6 | (byte(at + i) & 0x3f);
  }
  const std::uint32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code_point < smallest[length] || code_point > 0x10ffff || (code_point >= 0xd800 && code_point <= 0xdfff))
    return 0;
  return length;
}

}  // namespace

bool is_valid_utf8(std::string_view text) {
  for (std::size_t at = 0; at < text.size();) {
    if (static_cast<unsigned char>(text[at]) < 0x80) {
      ++at;
      continue;
    }
    std::uint32_t code_point = 0;
    const std::size_t length = utf8_sequence(text, at, code_point);
    if (length == 0) return false;
    at += length;
  }
  return true;
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    const auto byte = static_cast<unsigned char>(text[at]);
    if (byte >= 0x20 && byte < 0x7f) {
      out += static_cast<char>(byte);
      ++at;
      continue;
    }
    std::uint32_t code_point = 0;
    const std::size_t length = byte >= 0x80 ? utf8_sequence(text, at, code_point) : 0;
    if (length != 0 && code_point > 0x9f) {
      out.append(text.substr(at, length));
      at += length;
      continue;
    }
    append_escaped(out, byte);
    ++at;
  }
  return out;
}

}  // namespace kiln::base

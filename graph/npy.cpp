// kiln::load_npy and kiln::save_npy (include/kiln/npy.h): a small, strict
// .npy reader and writer (Debian has no maintained C++ .npy library that
// fits; xtensor's needs all of xtensor).
#include <kiln/npy.h>

#include <kiln/error.h>

#include "src/base/atomic_write.h"
#include "src/base/check.h"
#include "src/base/printable.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

namespace kiln {

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
// The header is a short Python dict; anything much longer is not a real one.
constexpr std::size_t kMaxHeaderBytes = 1 << 16;
constexpr std::uintmax_t kMaxFileBytes = std::uintmax_t{1} << 36;

// The .npy descr of each kiln dtype ('|' for one-byte types, as NumPy writes).
// NumPy has no bfloat16: bf16 is '<V2', two-byte records, which is what
// np.save writes for an ml_dtypes.bfloat16 array (np.load(f).view(
// ml_dtypes.bfloat16) reads it back as such).
const std::map<std::string, DType>& descr_types() {
  static const std::map<std::string, DType> types = {
      {"<f4", DType::f32}, {"<f2", DType::f16}, {"<V2", DType::bf16}, {"|V2", DType::bf16},
      {"<i4", DType::i32}, {"<i8", DType::i64},
      {"|u1", DType::u8},  {"<u1", DType::u8},  {"|b1", DType::boolean}, {"<b1", DType::boolean},
  };
  return types;
}

std::string descr_of(DType dtype) {
  switch (dtype) {
    case DType::f32: return "<f4";
    case DType::f16: return "<f2";
    case DType::bf16: return "<V2";
    case DType::i32: return "<i4";
    case DType::i64: return "<i8";
    case DType::u8: return "|u1";
    case DType::boolean: return "|b1";
  }
  return "";
}

// A strict reader of the header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& name) : text_(text), name_(name) {}

  struct Header {
    std::string descr;
    std::optional<bool> fortran_order;
    std::optional<Shape> shape;
  };

  Header parse() {
    Header h;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = quoted();
      expect(':');
      skip_space();
      if (key == "descr") h.descr = quoted();
      else if (key == "fortran_order") h.fortran_order = boolean();
      else if (key == "shape") h.shape = tuple();
      else fail("unknown key '" + key + "'");
      skip_space();
      if (peek() == ',') ++pos_;
    }
    ++pos_;
    if (h.descr.empty() || !h.fortran_order || !h.shape) fail("'descr', 'fortran_order' and 'shape' are required");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    // `what` may quote the file's bytes (a key's name).
    throw_error(ErrorKind::Corrupt, name_ + ": not a valid .npy header (" + base::printable(what) + ")");
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string quoted() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a quoted string");
    const std::size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string s(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return s;
  }
  bool boolean() {
    if (text_.substr(pos_, 4) == "True") return pos_ += 4, true;
    if (text_.substr(pos_, 5) == "False") return pos_ += 5, false;
    fail("expected True or False");
  }
  Shape tuple() {
    expect('(');
    Shape shape;
    while (true) {
      skip_space();
      if (peek() == ')') break;
      std::size_t digits = 0;
      std::int64_t value = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        if (++digits > 15) fail("a dimension is too large");
        value = value * 10 + (peek() - '0');
        ++pos_;
      }
      if (digits == 0) fail("expected a non-negative dimension");
      shape.push_back(value);
      if (shape.size() > 32) fail("more than 32 dimensions");
      skip_space();
      if (peek() == ',') ++pos_;
      else if (peek() != ')') fail("expected ',' or ')' in the shape");
    }
    ++pos_;
    return shape;
  }

  std::string_view text_;
  const std::string& name_;
  std::size_t pos_ = 0;
};

}  // namespace

Tensor parse_npy(std::string_view bytes, const std::string& name) {
  KILN_CHECK(bytes.size() >= 10 && bytes.substr(0, 6) == kMagic, ErrorKind::Corrupt,
             name + ": not a .npy file (no \\x93NUMPY magic)");
  const auto major = static_cast<unsigned char>(bytes[6]);
  KILN_CHECK(major >= 1 && major <= 3, ErrorKind::Unsupported,
             name + ": .npy format version " + std::to_string(major) + " is not supported (1, 2 or 3)");
  std::size_t header_len = 0, offset = 0;
  auto byte = [&](std::size_t i) { return static_cast<std::size_t>(static_cast<unsigned char>(bytes[i])); };
  if (major == 1) {
    header_len = byte(8) | byte(9) << 8;
    offset = 10;
  } else {
    KILN_CHECK(bytes.size() >= 12, ErrorKind::Corrupt, name + ": truncated .npy header");
    header_len = byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24;
    offset = 12;
  }
  KILN_CHECK(header_len <= kMaxHeaderBytes && offset + header_len <= bytes.size(), ErrorKind::Corrupt,
             name + ": the .npy header length " + std::to_string(header_len) + " does not fit the file");
  const auto header = HeaderParser(bytes.substr(offset, header_len), name).parse();
  KILN_CHECK(!*header.fortran_order, ErrorKind::Unsupported,
             name + ": Fortran-order arrays are not supported; save with np.ascontiguousarray");
  auto type = descr_types().find(header.descr);
  if (type == descr_types().end()) {
    const std::string hint = header.descr.size() > 0 && header.descr[0] == '>' ? " (big-endian; use '<')"
                             : header.descr == "<f8" ? " (float64; save with .astype(np.float32))"
                                                     : "";
    throw_error(ErrorKind::Unsupported, name + ": .npy dtype '" + base::printable(header.descr) + "' is not supported" + hint +
                                            "; kiln reads float32, float16, int32, int64, uint8 and bool");
  }
  const Shape& shape = *header.shape;
  // The data must fill the rest of the file exactly; this also bounds the allocation.
  const std::size_t data_bytes = bytes.size() - offset - header_len;
  // A zero extent (an empty key/value cache) makes the array empty whatever
  // the other extents are; otherwise the product must not pass the data.
  const bool empty = std::find(shape.begin(), shape.end(), 0) != shape.end();
  std::size_t expected = empty ? 0 : dtype_size(type->second);
  for (std::int64_t d : shape) {
    const auto dim = static_cast<std::size_t>(d);
    KILN_CHECK(empty || expected <= data_bytes / dim, ErrorKind::Corrupt,
               name + ": shape " + shape_str(shape) + " needs more data than the file's " + std::to_string(data_bytes) + " bytes");
    expected *= dim;
  }
  KILN_CHECK(expected == data_bytes, ErrorKind::Corrupt,
             name + ": " + base::printable(header.descr) + " " + shape_str(shape) + " needs " + std::to_string(expected) +
                 " bytes of data, the file holds " + std::to_string(data_bytes));
  Tensor tensor(type->second, shape);
  if (data_bytes > 0) std::memcpy(tensor.bytes().data(), bytes.data() + offset + header_len, data_bytes);
  if (type->second == DType::boolean)
    for (std::byte& b : tensor.bytes()) b = static_cast<std::byte>(b != std::byte{0});
  return tensor;
}

Tensor load_npy(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  KILN_CHECK(!ec, ErrorKind::Io, "cannot read '" + path + "': " + ec.message());
  KILN_CHECK(size <= kMaxFileBytes, ErrorKind::Corrupt, path + ": the file is larger than kiln's limit for .npy inputs");
  std::ifstream in(path, std::ios::binary);
  std::string bytes(static_cast<std::size_t>(size), '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  KILN_CHECK(in.good() || size == 0, ErrorKind::Io, "reading '" + path + "' failed");
  return parse_npy(bytes, path);
}

std::string format_npy(const Tensor& tensor) {
  std::string shape = "(";
  for (std::int64_t d : tensor.shape()) shape += std::to_string(d) + (tensor.rank() == 1 ? ",)" : ", ");
  if (tensor.rank() != 1) {
    if (tensor.rank() > 1) shape.resize(shape.size() - 2);
    shape += ")";
  }
  std::string header = "{'descr': '" + descr_of(tensor.dtype()) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Magic, version and length take 10 bytes; pad so the data starts 64-byte aligned.
  const std::size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header += '\n';
  std::string out(kMagic);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  const auto data = tensor.bytes();
  out.append(reinterpret_cast<const char*>(data.data()), data.size());
  return out;
}

void save_npy(const std::string& path, const Tensor& tensor) {
  const std::string bytes = format_npy(tensor);
  base::write_file_atomically(path, [&](std::ostream& out) { out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); });
}

}  // namespace kiln

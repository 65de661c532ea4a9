// Error and DType basics of the public API (include/kiln/error.h, dtype.h).
#include <kiln/dtype.h>
#include <kiln/error.h>

#include <ostream>
#include <string>

namespace kiln {

std::string_view error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::InvalidArgument: return "invalid argument";
    case ErrorKind::ShapeMismatch: return "shape mismatch";
    case ErrorKind::Unsupported: return "unsupported";
    case ErrorKind::NotFound: return "not found";
    case ErrorKind::DeviceUnavailable: return "device unavailable";
    case ErrorKind::OutOfMemory: return "out of memory";
    case ErrorKind::Io: return "i/o error";
    case ErrorKind::Corrupt: return "corrupt input";
    case ErrorKind::Internal: return "internal error";
  }
  return "error";
}

std::ostream& operator<<(std::ostream& out, ErrorKind kind) { return out << error_kind_name(kind); }

namespace {

// See kMaxErrorMessageBytes. The cut never splits a UTF-8 sequence.
std::string bounded_message(const std::string& message) {
  if (message.size() <= kMaxErrorMessageBytes + kErrorContextMargin) return message;
  std::size_t keep = kMaxErrorMessageBytes;
  while (keep > 0 && (static_cast<unsigned char>(message[keep]) & 0xC0u) == 0x80u) --keep;
  return message.substr(0, keep) + " ... [message cut: " + std::to_string(message.size() - keep) + " of " +
         std::to_string(message.size()) + " bytes left out]";
}

}  // namespace

Error::Error(ErrorKind kind, const std::string& message) : std::runtime_error(bounded_message(message)), kind_(kind) {}

void throw_error(ErrorKind kind, const std::string& message) { throw Error(kind, message); }

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u8: return 1;
    case DType::boolean: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
    case DType::boolean: return "bool";
  }
  return "?";
}

bool is_float(DType dtype) { return dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16; }

}  // namespace kiln

// kiln's one error type. Every fallible public call throws kiln::Error.
//
// The kind tells a user error (a bad model, a bad option, a wrong shape, a
// missing device) from an internal one (a bug in kiln): user errors say what to
// change; internal errors ask for a bug report.
#pragma once

#include <kiln/export.h>

#include <cstddef>
#include <iosfwd>
#include <stdexcept>
#include <string>
#include <string_view>

namespace kiln {

enum class ErrorKind {
  InvalidArgument,    // a bad option, attribute or argument value
  ShapeMismatch,      // tensor shapes or dtypes that do not fit together
  Unsupported,        // an op, dtype or feature that kiln (or a backend) lacks
  NotFound,           // unknown backend, device index/name, model, file
  DeviceUnavailable,  // the backend exists but cannot run here (no driver/GPU)
  OutOfMemory,        // a device allocation failed (or, evaluating on the host, a host one)
  Io,                 // reading or writing a file failed
  Corrupt,            // a file's content is malformed
  Internal,           // a bug in kiln
};

KILN_API std::string_view error_kind_name(ErrorKind kind);
KILN_API std::ostream& operator<<(std::ostream& out, ErrorKind kind);

// The most of a message an Error keeps. Formatting sites bound what they
// print (lists end in "... (N more)"); this is the backstop: a longer message
// keeps its first kMaxErrorMessageBytes and a note of how many bytes were cut.
// A message up to kErrorContextMargin past the limit is kept whole, so that
// re-throwing a cut message with a context prefix ("node 'x': ") keeps its note.
inline constexpr std::size_t kMaxErrorMessageBytes = 4096;
inline constexpr std::size_t kErrorContextMargin = 512;

class KILN_API Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message);
  ErrorKind kind() const { return kind_; }
  bool is_user_error() const { return kind_ != ErrorKind::Internal; }

 private:
  ErrorKind kind_;
};

[[noreturn]] KILN_API void throw_error(ErrorKind kind, const std::string& message);

}  // namespace kiln

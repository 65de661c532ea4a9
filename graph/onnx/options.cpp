#include "graph/onnx/options.h"

#include "src/base/check.h"

#include <kiln/error.h>

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <string>
#include <system_error>

namespace kiln::onnx_import {

std::int64_t default_max_folded_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  // sysconf may fail (-1) or be unknown: then the lower bound.
  if (pages <= 0 || page_size <= 0) return kMinDefaultFoldedBytes;
  const std::int64_t quarter = static_cast<std::int64_t>(pages) / 4 * static_cast<std::int64_t>(page_size);
  return std::clamp(quarter, kMinDefaultFoldedBytes, kMaxDefaultFoldedBytes);
}

std::int64_t resolve_max_folded_bytes(const OnnxOptions& options) {
  KILN_CHECK(options.max_folded_bytes >= 0, ErrorKind::InvalidArgument,
             "OnnxOptions::max_folded_bytes is " + std::to_string(options.max_folded_bytes) +
                 "; give a positive byte count, or 0 for the default");
  if (options.max_folded_bytes > 0) return options.max_folded_bytes;
  const char* text = std::getenv(kMaxFoldedBytesVariable);
  if (text == nullptr || *text == '\0') return default_max_folded_bytes();
  const std::string value(text);
  std::int64_t bytes = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), bytes);
  KILN_CHECK(ec == std::errc{} && end == value.data() + value.size() && bytes > 0 && value[0] != '-',
             ErrorKind::InvalidArgument,
             std::string(kMaxFoldedBytesVariable) + " is '" + value.substr(0, 64) +
                 "'; give a positive number of bytes (e.g. 8589934592 for 8 GiB), or unset it for the default");
  return bytes;
}

}  // namespace kiln::onnx_import

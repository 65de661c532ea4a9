// printf-style formatting for the bench's notes and tables (and `kiln tune`'s).
#pragma once

#include <cstdarg>
#include <cstdio>
#include <string>

namespace kiln::tools::bench {

// The formatted text, cut at 255 characters (notes and table cells are short).
inline std::string format(const char* pattern, ...) __attribute__((format(printf, 1, 2)));
inline std::string format(const char* pattern, ...) {
  char text[256];
  va_list args;
  va_start(args, pattern);
  std::vsnprintf(text, sizeof text, pattern, args);
  va_end(args);
  return text;
}

// `value` with `decimals` digits after the point.
inline std::string fixed(double value, int decimals) { return format("%.*f", decimals, value); }

}  // namespace kiln::tools::bench

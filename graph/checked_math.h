// Overflow-checked arithmetic on sizes that come from files and attributes.
// Signed overflow and out-of-range float-to-int conversions are undefined
// behaviour, so every product, sum or conversion of such a size goes through
// these: each returns nullopt where the exact result does not fit, and the
// caller throws an error naming the node and the values.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>

namespace kiln::graph {

inline std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t result = 0;
  if (__builtin_mul_overflow(a, b, &result)) return std::nullopt;
  return result;
}

inline std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t result = 0;
  if (__builtin_add_overflow(a, b, &result)) return std::nullopt;
  return result;
}

inline std::optional<std::int64_t> checked_sub(std::int64_t a, std::int64_t b) {
  std::int64_t result = 0;
  if (__builtin_sub_overflow(a, b, &result)) return std::nullopt;
  return result;
}

// The product of `dims` (1 for none). A zero dim makes it 0 whatever the
// others are, so [2^62, 4, 0] is 0, not an overflow.
inline std::optional<std::int64_t> checked_product(std::span<const std::int64_t> dims) {
  for (std::int64_t d : dims)
    if (d == 0) return 0;
  std::int64_t product = 1;
  for (std::int64_t d : dims) {
    const std::optional<std::int64_t> next = checked_mul(product, d);
    if (!next) return std::nullopt;
    product = *next;
  }
  return product;
}

// `value` as an int64 if it is finite, integral and within [lo, hi]; nullopt
// for NaN, infinities, fractions and values out of range (converting those
// is undefined behaviour). Callers floor or round first.
inline std::optional<std::int64_t> to_int64_in_range(double value, std::int64_t lo, std::int64_t hi) {
  if (!std::isfinite(value) || value != std::trunc(value)) return std::nullopt;
  // 2^63 is exactly representable; every double below it converts safely.
  constexpr double kTwoTo63 = 9223372036854775808.0;
  if (value < -kTwoTo63 || value >= kTwoTo63) return std::nullopt;
  const auto converted = static_cast<std::int64_t>(value);
  if (converted < lo || converted > hi) return std::nullopt;
  return converted;
}

}  // namespace kiln::graph

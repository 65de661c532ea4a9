// 16-bit float conversions (include/kiln/float16.h).
#include <kiln/float16.h>

#include <kiln/error.h>

#include <bit>
#include <cmath>
#include <limits>
#include <string>

namespace kiln {

std::uint16_t f16_bits(float value) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u);  // NaN, infinity
  if (x >= 0x47800000u) return sign | 0x7c00u;                                  // >= 65536: infinity
  const std::uint32_t exponent = x >> 23;
  std::uint32_t mantissa = x & 0x7fffffu;
  std::uint32_t result;
  std::uint32_t shift;
  if (exponent >= 113) {  // a normal half: rebias the exponent, drop 13 mantissa bits
    result = ((exponent - 112) << 10) | (mantissa >> 13);
    shift = 13;
  } else {  // a subnormal half (or zero): count units of 2^-24
    if (exponent < 102) return sign;  // below 2^-25: rounds to zero
    mantissa |= 0x800000u;
    shift = 126 - exponent;
    result = mantissa >> shift;
  }
  const std::uint32_t remainder = mantissa & ((1u << shift) - 1);
  const std::uint32_t half = 1u << (shift - 1);
  // A carry out of the mantissa correctly moves to the next exponent (or infinity).
  if (remainder > half || (remainder == half && (result & 1u))) ++result;
  return static_cast<std::uint16_t>(sign | result);
}

float f16_value(std::uint16_t bits) {
  const bool negative = (bits & 0x8000u) != 0;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = bits & 0x3ffu;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    magnitude = mantissa != 0 ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    magnitude = std::bit_cast<float>(((exponent + 112) << 23) | (mantissa << 13));
  }
  return negative ? -magnitude : magnitude;
}

std::uint16_t bf16_bits(float value) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x0040u);  // quiet NaN
  // Adding 0x7fff plus the kept part's lowest bit rounds to nearest even;
  // a carry moves into the exponent (the largest values round to infinity).
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

double float_epsilon(DType dtype) {
  switch (dtype) {
    case DType::f32: return 0x1p-23;
    case DType::f16: return 0x1p-10;
    case DType::bf16: return 0x1p-7;
    default: break;
  }
  throw_error(ErrorKind::InvalidArgument, std::string("float_epsilon of ") + std::string(dtype_name(dtype)) +
                                              ", which is not a float type");
}

float bf16_value(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

}  // namespace kiln

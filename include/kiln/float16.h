// 16-bit floating-point element values: IEEE binary16 (DType::f16) and
// bfloat16 (DType::bf16), held as their bits (std::uint16_t; a Tensor's
// values<std::uint16_t>() of either type).
//
// To 16 bits rounds to nearest, ties to even, as PyTorch's and NumPy's
// conversions do: a value past the largest finite one rounds to infinity,
// one below the smallest subnormal to a signed zero, and NaN stays a quiet
// NaN of its sign. From 16 bits is exact.
#pragma once

#include <kiln/dtype.h>
#include <kiln/export.h>

#include <cstdint>

namespace kiln {

KILN_API std::uint16_t f16_bits(float value);
KILN_API float f16_value(std::uint16_t bits);
KILN_API std::uint16_t bf16_bits(float value);
KILN_API float bf16_value(std::uint16_t bits);

// The spacing of a float type's values at 1: 2^-23 (f32), 2^-10 (f16),
// 2^-7 (bf16); the unit kiln's tolerances for the type are stated in
// (docs/precision.md). Throws InvalidArgument for a type that is not a float.
KILN_API double float_epsilon(DType dtype);

}  // namespace kiln

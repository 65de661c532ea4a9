// Element types and shapes shared by every layer of kiln.
#pragma once

#include <kiln/export.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// f16: IEEE binary16; bf16: bfloat16 (float32's top 16 bits). Both are held
// as their bits (kiln/float16.h converts).
enum class DType : std::uint8_t { f32, f16, i32, i64, u8, boolean, bf16 };

KILN_API std::size_t dtype_size(DType dtype);
KILN_API std::string_view dtype_name(DType dtype);  // "f32", "bf16", "i64", ...
// f32, f16 and bf16.
KILN_API bool is_float(DType dtype);

// A static shape: one extent per dimension, outermost first; {} is a scalar.
using Shape = std::vector<std::int64_t>;

KILN_API std::int64_t num_elements(const Shape& shape);
// "[1, 3, 224, 224]". Shapes and attribute lists in messages come from files,
// so at most kMaxListedEntries are printed, then "... (N more)".
inline constexpr std::size_t kMaxListedEntries = 32;
KILN_API std::string shape_str(const Shape& shape);

}  // namespace kiln

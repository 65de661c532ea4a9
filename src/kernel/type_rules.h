// The kernel IR's type and naming rules, shared by the construction helpers
// (ir.cpp) and verify() (verify.cpp); the table of rules is at the top of
// ir.cpp. Internal to src/kernel.
#pragma once

#include "src/kernel/ir.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::kir {

// Throws Error(Internal) with `message`.
[[noreturn]] void fail(const std::string& message);

// The result type of an operation on operands of these types; nullopt where
// the rules refuse them, and the message that says why.
std::optional<ScalarType> unary_result_type(UnaryOp op, ScalarType a);
std::optional<ScalarType> binary_result_type(BinaryOp op, ScalarType a, ScalarType b);
std::string unary_type_error(UnaryOp op, ScalarType a);
std::string binary_type_error(BinaryOp op, ScalarType a, ScalarType b);

// Why a cast from `from` to `to` is refused (f16 meets f32 only), or nullopt.
std::optional<std::string> cast_type_error(ScalarType to, ScalarType from);

bool is_index_type(ScalarType t);  // i32 or u32
// A name every language can take once prefixed: a letter, then letters,
// digits and single underscores.
bool is_identifier(std::string_view name);
// A keyword or library function of the languages kernels are rendered in.
bool is_reserved_kernel_name(const std::string& name);

// Shared arrays are bounded so that every element index fits an i32 and the
// byte total cannot overflow; targets allow far less (16-64 KiB).
constexpr std::int64_t kMaxSharedElements = std::int64_t{1} << 28;
// Fragments are a matrix unit's tiles (8 to 32 a side on today's hardware).
constexpr std::uint32_t kMaxFragmentDim = 64;

}  // namespace kiln::kir

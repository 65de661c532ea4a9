// Index arithmetic shared by the kernel templates: i32 expressions built
// without the multiplications by one and additions of zero a naive tree
// would carry (the renderers print what they are given).
#pragma once

#include "src/kernel/ir.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::shaders::detail {

// base + term * coefficient; base may be empty (then term * coefficient).
kir::Expr add_scaled(kir::Expr base, kir::Expr term, std::int64_t coefficient);
// e + constant.
kir::Expr add_constant(kir::Expr e, std::int64_t constant);
// Declares the i32 variable `name` = value in `body` and returns it; a
// constant is returned as is, with nothing declared.
kir::Expr declare_i32(std::vector<kir::Stmt>& body, const std::string& name, kir::Expr value);

// Splits the linear index `linear` into row-major coordinates over
// `extents` (name, extent), outermost first, declaring each as an i32 named
// after its entry. Unit extents are the constant 0; the outermost coordinate
// needs no modulo (linear < product of extents).
std::vector<kir::Expr> split_index(std::vector<kir::Stmt>& body, kir::Expr linear,
                                   const std::vector<std::pair<std::string, std::int64_t>>& extents);

// ceil(a / b) for positive b.
constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Elements per vector load (load_vector) in every template.
inline constexpr std::int64_t kVector = 4;

// Names of unrolled register-block variables: "acc" + i, "acc" + i + "_" + j.
inline std::string indexed(const std::string& prefix, std::int64_t i) { return prefix + std::to_string(i); }
inline std::string indexed(const std::string& prefix, std::int64_t i, std::int64_t j) {
  return prefix + std::to_string(i) + "_" + std::to_string(j);
}

}  // namespace kiln::shaders::detail

// Index arithmetic shared by the kernel templates: i32 expressions built
// without the multiplications by one and additions of zero a naive tree
// would carry (the renderers print what they are given).
#pragma once

#include "src/kernel/ir.h"

#include <cstdint>
#include <functional>
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
// after its entry. Unit extents are the constant 0, except those `keep_unit`
// marks (extents that vary from one dispatch to another, so the kernel's
// structure must not depend on them being 1); the outermost coordinate needs
// no modulo (linear < product of extents).
std::vector<kir::Expr> split_index(std::vector<kir::Stmt>& body, kir::Expr linear,
                                   const std::vector<std::pair<std::string, std::int64_t>>& extents,
                                   const std::vector<bool>& keep_unit = {});

// Whether a and b are the same expression tree (same kinds, types, values,
// names, buffers and operands).
bool same_expr(const kir::Expr& a, const kir::Expr& b);
// `e` with every subtree that is the same expression as `from` replaced by `to`.
kir::Expr replace_expr(const kir::Expr& e, const kir::Expr& from, const kir::Expr& to);

// One row of a register tile's output: values[j] goes to element(j) of Y.
struct TileRow {
  std::vector<kir::Expr> values;
  std::function<kir::Expr(std::size_t column)> element;
  // The elements are consecutive, element(0) is a multiple of 4 and there
  // are a multiple of 4 values: stored as vec4s.
  bool vector = false;
  // Unset: every column is stored. Set: the condition for storing columns
  // from j on (asked for the first column of each group but the first; the
  // first is stored whenever the row is).
  std::function<kir::Expr(std::size_t column)> column_guard;
};
// The statements that store `row` to `y` (names numbered by `row_index`):
// loads of read-only buffers that the row's values share and that its
// first store reads (a per-channel bias) are read once, then one store per
// value or per vec4, each group after the first under column_guard. On CPU
// Vulkan drivers each buffer access compiles to a loop over SIMD lanes, so
// this is most of a tile kernel's compile time as well as its memory work.
std::vector<kir::Stmt> store_tile_row(const kir::Kernel& kernel, kir::Buf y, const TileRow& row,
                                      std::uint32_t row_index);

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

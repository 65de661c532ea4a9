// Index arithmetic shared by the lowerings: shapes are static, so every extent
// and stride becomes an i32 constant, and coordinates are computed once per
// invocation into declared variables (division and modulo are expensive on
// lavapipe, a CPU). Host-side shape arithmetic (strides, broadcasting rules)
// comes from graph/broadcast.h.
#pragma once

#include <kiln/dtype.h>

#include "src/kernel/ir.h"

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace kiln::lower {

// Product of shape[begin, end).
std::int64_t extent_product(const Shape& shape, std::size_t begin, std::size_t end);

// True if `expr` is an integer constant equal to `value`.
bool is_int_constant(const kir::Expr& expr, std::int64_t value);

// A sum of i32 terms `expr * coefficient` plus a constant, built without the
// multiplications by one and additions of zero a naive expression would carry.
class IndexSum {
 public:
  IndexSum() = default;
  explicit IndexSum(std::int64_t constant) : constant_(constant) {}
  // Adds expr * coefficient (a zero coefficient adds nothing).
  IndexSum& add(kir::Expr expr, std::int64_t coefficient = 1);
  // Adds a constant.
  IndexSum& add(std::int64_t constant);
  // The i32 expression; i32(constant) when there are no terms.
  kir::Expr expr() const;

 private:
  std::vector<std::pair<kir::Expr, std::int64_t>> terms_;
  std::int64_t constant_ = 0;
};

// Declares `name` = value (i32) in `body` and returns the variable.
kir::Expr declare_index(std::vector<kir::Stmt>& body, const std::string& name, kir::Expr value);

// Declares the coordinates of `linear` (an index into a row-major tensor of
// `shape`) as i32 variables `<prefix><dim>` and returns one expression per
// dimension. Unit dimensions are the constant 0 and declare nothing; the
// outermost non-unit coordinate needs no modulo since linear < numel(shape).
std::vector<kir::Expr> unravel(std::vector<kir::Stmt>& body, kir::Expr linear, const Shape& shape,
                               const std::string& prefix);

// The linear offset into an input of `input_shape` that numpy-broadcasts
// (right-aligned) to `output_shape`, given the output coordinates.
kir::Expr broadcast_offset(std::span<const kir::Expr> output_coords, const Shape& output_shape,
                           const Shape& input_shape);

// Offsets into several inputs that numpy-broadcast to `output_shape`, for the
// linear output index `linear`. Adjacent dimensions that every input treats
// alike (all broadcast or all full) are merged first and only the coordinates
// some input needs are computed, so e.g. a per-channel [C, 1, 1] operand of an
// [N, C, H, W] output costs one division and one modulo, and a same-shape
// operand costs nothing (its offset is `linear`).
std::vector<kir::Expr> broadcast_offsets(std::vector<kir::Stmt>& body, kir::Expr linear,
                                         const Shape& output_shape, std::span<const Shape> input_shapes,
                                         const std::string& prefix);

// Appends `body` to `out`, inside `if (condition)` unless condition is empty.
void append_guarded(std::vector<kir::Stmt>& out, const kir::Expr& condition, std::vector<kir::Stmt> body);

// One spatial dimension of a sliding window (Conv, pooling): input position =
// out * stride - pad_begin + tap * dilation for tap in [0, kernel).
struct WindowAxis {
  std::int64_t input_extent;
  std::int64_t output_extent;
  std::int64_t kernel;
  std::int64_t stride;
  std::int64_t dilation;
  std::int64_t pad_begin;

  // Whether some position falls below 0 / at or past input_extent; when
  // neither, the kernel needs no bounds check on this axis.
  bool can_underflow() const;
  bool can_overflow() const;
  // The boolean "0 <= position < input_extent", leaving out the comparisons
  // that cannot fail; an empty Expr when none can.
  kir::Expr in_bounds(kir::Expr position) const;
};

}  // namespace kiln::lower

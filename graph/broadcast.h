// Shape arithmetic shared by shape inference, the reference ops and lowering:
// numpy broadcasting and row-major strides (in elements, not bytes).
#pragma once

#include "graph/sym_shape.h"

#include <kiln/dtype.h>

#include <cstdint>
#include <vector>

namespace kiln::graph {

using Strides = std::vector<std::int64_t>;

// numpy multidirectional broadcasting of two shapes (aligned at the right).
// Throws ShapeMismatch naming both shapes and the dimension that differs.
Shape broadcast_shapes(const Shape& a, const Shape& b);
// The same over dims that may be symbolic: equal expressions need no guard.
SymShape broadcast_dims(const SymShape& a, const SymShape& b);

// True if `from` broadcasts to exactly `to` (ONNX unidirectional broadcasting,
// as Gemm's C or a LayerNormalization scale).
bool is_broadcastable_to(const Shape& from, const Shape& to);
// The same over dims that may be symbolic.
bool dims_broadcast_to(const SymShape& from, const SymShape& to);

// Row-major strides of a dense tensor: the last dimension has stride 1.
Strides row_major_strides(const Shape& shape);

// Strides that read a dense tensor of shape `from` as if it had shape `to`:
// one stride per dimension of `to`, 0 along dimensions that are broadcast or
// that `from` lacks. Throws ShapeMismatch if `from` does not broadcast to `to`.
Strides broadcast_strides(const Shape& from, const Shape& to);

// The coordinates of a row-major linear index into `shape`.
std::vector<std::int64_t> unravel_index(std::int64_t index, const Shape& shape);

}  // namespace kiln::graph

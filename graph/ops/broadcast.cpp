#include "graph/broadcast.h"

#include "src/base/check.h"

#include <kiln/error.h>

#include <algorithm>

namespace kiln::graph {

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const std::size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    // Walk from the right: dimension i counts from the last.
    const std::int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const std::int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    KILN_CHECK(da == db || da == 1 || db == 1, ErrorKind::ShapeMismatch,
               "cannot broadcast shapes " + shape_str(a) + " and " + shape_str(b) + ": dimension " +
                   std::to_string(rank - 1 - i) + " of the result is " + std::to_string(da) + " in one and " +
                   std::to_string(db) + " in the other");
    out[rank - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

SymShape broadcast_dims(const SymShape& a, const SymShape& b) {
  if (!a.symbolic() && !b.symbolic()) return broadcast_shapes(a.hints(), b.hints());
  const std::size_t rank = std::max(a.size(), b.size());
  SymShape out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const sym::Dim da = i < a.size() ? a[a.size() - 1 - i] : sym::Dim(1);
    const sym::Dim db = i < b.size() ? b[b.size() - 1 - i] : sym::Dim(1);
    if (da == db) {
      out[rank - 1 - i] = da;
    } else {
      KILN_CHECK(da == 1 || db == 1, ErrorKind::ShapeMismatch,
                 "cannot broadcast shapes " + shape_str(a.hints()) + " and " + shape_str(b.hints()) + ": dimension " +
                     std::to_string(rank - 1 - i) + " of the result is " + std::to_string(da.hint()) +
                     " in one and " + std::to_string(db.hint()) + " in the other");
      out[rank - 1 - i] = da == 1 ? db : da;
    }
  }
  return out;
}

bool is_broadcastable_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const std::size_t offset = to.size() - from.size();
  for (std::size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[offset + i]) return false;
  return true;
}

bool dims_broadcast_to(const SymShape& from, const SymShape& to) {
  if (from.size() > to.size()) return false;
  const std::size_t offset = to.size() - from.size();
  for (std::size_t i = 0; i < from.size(); ++i)
    if (from[i] != to[offset + i] && from[i] != 1) return false;
  return true;
}

Strides row_major_strides(const Shape& shape) {
  Strides strides(shape.size());
  std::int64_t stride = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

Strides broadcast_strides(const Shape& from, const Shape& to) {
  KILN_CHECK(is_broadcastable_to(from, to), ErrorKind::ShapeMismatch,
             "shape " + shape_str(from) + " does not broadcast to " + shape_str(to));
  const Strides dense = row_major_strides(from);
  const std::size_t offset = to.size() - from.size();
  Strides strides(to.size(), 0);
  for (std::size_t i = 0; i < from.size(); ++i)
    // A size-1 dimension stretched to size n re-reads the same element.
    strides[offset + i] = (from[i] == 1 && to[offset + i] != 1) ? 0 : dense[i];
  return strides;
}

std::vector<std::int64_t> unravel_index(std::int64_t index, const Shape& shape) {
  std::vector<std::int64_t> coords(shape.size());
  for (std::size_t i = shape.size(); i-- > 0;) {
    const std::int64_t extent = shape[i];
    KILN_ASSERT(extent > 0);
    coords[i] = index % extent;
    index /= extent;
  }
  return coords;
}

}  // namespace kiln::graph

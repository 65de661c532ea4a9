// A value's dims in the graph IR: each a sym::Dim, a plain extent or one that
// depends on a model input's dynamic extents (src/base/symbolic.h). A
// SymShape reads as a kiln::Shape (each dim's value, guarded), so code that
// needs plain extents keeps working and specialises the plan on what it
// reads; code that keeps a dim symbolic uses the Dims themselves.
#pragma once

#include "src/base/symbolic.h"

#include <kiln/dtype.h>

#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

namespace kiln::graph {

class SymShape : public std::vector<sym::Dim> {
 public:
  using std::vector<sym::Dim>::vector;
  SymShape() = default;
  SymShape(std::initializer_list<sym::Dim> dims) : std::vector<sym::Dim>(dims) {}
  SymShape(const Shape& shape) : std::vector<sym::Dim>(shape.begin(), shape.end()) {}  // NOLINT: plain extents
  // Each dim's value, guarded where symbolic.
  operator Shape() const { return values(); }  // NOLINT: code that reads plain extents
  Shape values() const;
  // Each dim's value without a guard: for messages only.
  Shape hints() const;
  // Whether some dim depends on a symbol.
  bool symbolic() const;
  friend bool operator==(const SymShape& a, const SymShape& b);
};

// The product of the dims (1 for none), kept symbolic.
sym::Dim element_count(std::span<const sym::Dim> dims);

}  // namespace kiln::graph

#include "graph/sym_shape.h"

#include <algorithm>

namespace kiln::graph {

Shape SymShape::values() const {
  Shape out;
  out.reserve(size());
  for (const sym::Dim& d : *this) out.push_back(d.value());
  return out;
}

Shape SymShape::hints() const {
  Shape out;
  out.reserve(size());
  for (const sym::Dim& d : *this) out.push_back(d.hint());
  return out;
}

bool SymShape::symbolic() const {
  return std::any_of(begin(), end(), [](const sym::Dim& d) { return d.symbolic(); });
}

bool operator==(const SymShape& a, const SymShape& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}

sym::Dim element_count(std::span<const sym::Dim> dims) {
  sym::Dim product(1);
  for (const sym::Dim& d : dims) product = product * d;
  return product;
}

}  // namespace kiln::graph

#include "graph/onnx/limits.h"

#include "src/base/check.h"

#include <kiln/error.h>

namespace kiln::onnx_import {

std::string where(const std::string& file, const std::string& node, const std::string& op) {
  std::string text = file + ": ";
  if (!node.empty() || !op.empty()) text += "node '" + node + "' (" + op + "): ";
  return text;
}

Shape checked_shape(const std::int64_t* dims, int count, const std::string& what) {
  KILN_CHECK(count >= 0 && count <= kMaxRank, ErrorKind::Corrupt,
             what + "rank " + std::to_string(count) + " is more than kiln's limit of " + std::to_string(kMaxRank));
  Shape shape(dims, dims + count);
  // The product of the non-zero dims, multiplied only while it stays within
  // the limit so that it cannot overflow.
  std::int64_t elements = 1;
  for (std::int64_t d : shape) {
    KILN_CHECK(d >= 0, ErrorKind::Corrupt, what + "negative dimension " + std::to_string(d) + " in shape " + shape_str(shape));
    if (d == 0) continue;
    KILN_CHECK(elements <= kMaxTensorElements / d, ErrorKind::Corrupt,
               what + "shape " + shape_str(shape) + " has more than " + std::to_string(kMaxTensorElements) +
                   " elements (kiln's limit)");
    elements *= d;
  }
  return shape;
}

Shape checked_shape(const Shape& dims, const std::string& what) {
  return checked_shape(dims.data(), static_cast<int>(dims.size()), what);
}

void check_string(const std::string& text, const std::string& what) {
  KILN_CHECK(text.size() <= kMaxStringBytes, ErrorKind::Corrupt,
             what + "a string of " + std::to_string(text.size()) + " bytes is longer than kiln's limit of " +
                 std::to_string(kMaxStringBytes));
}

}  // namespace kiln::onnx_import

#include "src/lower/index.h"

#include "graph/broadcast.h"
#include "src/base/check.h"

#include <kiln/error.h>

#include <map>
#include <utility>

namespace kiln::lower {

using kir::Expr;
using kir::ScalarType;
using kir::Stmt;

std::int64_t extent_product(const Shape& shape, std::size_t begin, std::size_t end) {
  std::int64_t product = 1;
  for (std::size_t d = begin; d < end && d < shape.size(); ++d) product *= shape[d];
  return product;
}

bool is_int_constant(const Expr& expr, std::int64_t value) {
  return expr && expr->kind == kir::ExprKind::constant && expr->type != ScalarType::f32 &&
         expr->ivalue == value;
}

IndexSum& IndexSum::add(Expr expr, std::int64_t coefficient) {
  if (coefficient == 0 || is_int_constant(expr, 0)) return *this;
  if (expr->kind == kir::ExprKind::constant) {
    constant_ += expr->ivalue * coefficient;
    return *this;
  }
  terms_.emplace_back(std::move(expr), coefficient);
  return *this;
}

IndexSum& IndexSum::add(std::int64_t constant) {
  constant_ += constant;
  return *this;
}

Expr IndexSum::expr() const {
  Expr sum;
  for (const auto& [term, coefficient] : terms_) {
    Expr scaled = coefficient == 1 ? term : term * kir::i32(coefficient);
    sum = sum ? sum + scaled : scaled;
  }
  if (!sum) return kir::i32(constant_);
  if (constant_ > 0) return sum + kir::i32(constant_);
  if (constant_ < 0) return sum - kir::i32(-constant_);
  return sum;
}

Expr declare_index(std::vector<Stmt>& body, const std::string& name, Expr value) {
  body.push_back(kir::declare(name, ScalarType::i32, std::move(value)));
  return kir::var(name, ScalarType::i32);
}

namespace {

// (linear / divisor) % modulus, leaving out a division by one and, when
// `outermost`, the modulo (the quotient is already below the modulus).
Expr digit(Expr linear, std::int64_t divisor, std::int64_t modulus, bool outermost) {
  Expr value = divisor == 1 ? linear : linear / kir::i32(divisor);
  return outermost ? value : value % kir::i32(modulus);
}

}  // namespace

std::vector<Expr> unravel(std::vector<Stmt>& body, Expr linear, const Shape& shape, const std::string& prefix) {
  const std::vector<std::int64_t> strides = graph::row_major_strides(shape);
  std::vector<Expr> coords(shape.size(), kir::i32(0));
  bool outermost = true;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    coords[d] = declare_index(body, prefix + std::to_string(d), digit(linear, strides[d], shape[d], outermost));
    outermost = false;
  }
  return coords;
}

Expr broadcast_offset(std::span<const Expr> output_coords, const Shape& output_shape, const Shape& input_shape) {
  KILN_ASSERT(output_coords.size() == output_shape.size() && input_shape.size() <= output_shape.size());
  const std::size_t lead = output_shape.size() - input_shape.size();
  const std::vector<std::int64_t> strides = graph::row_major_strides(input_shape);
  IndexSum offset;
  for (std::size_t d = 0; d < input_shape.size(); ++d) {
    if (input_shape[d] == 1) continue;
    KILN_ASSERT(input_shape[d] == output_shape[lead + d]);
    offset.add(output_coords[lead + d], strides[d]);
  }
  return offset.expr();
}

std::vector<Expr> broadcast_offsets(std::vector<Stmt>& body, Expr linear, const Shape& output_shape,
                                    std::span<const Shape> input_shapes, const std::string& prefix) {
  const std::size_t rank = output_shape.size();
  // full[j][d]: input j spans output dimension d (rather than broadcasting it).
  std::vector<std::vector<bool>> full(input_shapes.size(), std::vector<bool>(rank, false));
  for (std::size_t j = 0; j < input_shapes.size(); ++j) {
    const Shape& in = input_shapes[j];
    KILN_ASSERT(in.size() <= rank);
    const std::size_t lead = rank - in.size();
    for (std::size_t d = 0; d < in.size(); ++d) {
      KILN_ASSERT(in[d] == 1 || in[d] == output_shape[lead + d]);
      full[j][lead + d] = in[d] != 1;
    }
  }

  // Merge adjacent non-unit output dimensions that every input treats alike.
  struct MergedDim {
    std::int64_t extent;
    std::vector<bool> full;  // per input
  };
  std::vector<MergedDim> dims;
  for (std::size_t d = 0; d < rank; ++d) {
    if (output_shape[d] == 1) continue;
    std::vector<bool> pattern(input_shapes.size());
    for (std::size_t j = 0; j < input_shapes.size(); ++j) pattern[j] = full[j][d];
    if (!dims.empty() && dims.back().full == pattern) {
      dims.back().extent *= output_shape[d];
    } else {
      dims.push_back({output_shape[d], std::move(pattern)});
    }
  }
  std::vector<std::int64_t> output_strides(dims.size());
  for (std::size_t k = dims.size(), stride = 1; k-- > 0;) {
    output_strides[k] = static_cast<std::int64_t>(stride);
    stride *= static_cast<std::size_t>(dims[k].extent);
  }

  // Each maximal run of merged dimensions an input spans is one "digit" of
  // the linear index; equal digits are shared between inputs.
  std::map<std::pair<std::int64_t, std::int64_t>, Expr> digits;
  auto digit_var = [&](std::int64_t divisor, std::int64_t modulus, bool outermost) -> Expr {
    auto key = std::make_pair(divisor, outermost ? std::int64_t{-1} : modulus);
    auto it = digits.find(key);
    if (it != digits.end()) return it->second;
    // A digit that is the linear index itself needs no variable.
    Expr value = linear;
    if (divisor != 1 || !outermost) {
      const std::string name = prefix + std::to_string(digits.size());
      value = declare_index(body, name, digit(linear, divisor, modulus, outermost));
    }
    digits.emplace(key, value);
    return value;
  };

  std::vector<Expr> offsets;
  offsets.reserve(input_shapes.size());
  for (std::size_t j = 0; j < input_shapes.size(); ++j) {
    IndexSum offset;
    std::int64_t input_stride = 1;  // stride in input j of the run being walked (innermost first)
    for (std::size_t k = dims.size(); k-- > 0;) {
      if (!dims[k].full[j]) continue;
      std::size_t first = k;  // extend the run outwards
      std::int64_t run_extent = dims[k].extent;
      while (first > 0 && dims[first - 1].full[j]) {
        --first;
        run_extent *= dims[first].extent;
      }
      offset.add(digit_var(output_strides[k], run_extent, first == 0), input_stride);
      input_stride *= run_extent;
      k = first;
    }
    offsets.push_back(offset.expr());
  }
  return offsets;
}

void append_guarded(std::vector<Stmt>& out, const Expr& condition, std::vector<Stmt> body) {
  if (!condition) {
    for (Stmt& stmt : body) out.push_back(std::move(stmt));
    return;
  }
  out.push_back(kir::branch(condition, std::move(body)));
}

bool WindowAxis::can_underflow() const { return pad_begin > 0; }

bool WindowAxis::can_overflow() const {
  return (output_extent - 1) * stride - pad_begin + (kernel - 1) * dilation >= input_extent;
}

Expr WindowAxis::in_bounds(Expr position) const {
  Expr low = can_underflow() ? position >= kir::i32(0) : Expr();
  Expr high = can_overflow() ? position < kir::i32(input_extent) : Expr();
  // (Expr overloads && to build IR, so test presence explicitly.)
  if (static_cast<bool>(low) && static_cast<bool>(high)) return low && high;
  return low ? low : high;
}

}  // namespace kiln::lower

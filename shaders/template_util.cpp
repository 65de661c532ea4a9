#include "shaders/template_util.h"

namespace kiln::shaders::detail {

using kir::Expr;

namespace {

bool is_constant(const Expr& e) { return e && e->kind == kir::ExprKind::constant; }

}  // namespace

Expr add_scaled(Expr base, Expr term, std::int64_t coefficient) {
  if (coefficient == 0 || (is_constant(term) && term->ivalue == 0)) return base ? base : kir::i32(0);
  Expr scaled = is_constant(term) ? kir::i32(term->ivalue * coefficient)
                : coefficient == 1 ? term
                                   : term * kir::i32(coefficient);
  if (!base || (is_constant(base) && base->ivalue == 0)) return scaled;
  if (is_constant(base) && is_constant(scaled)) return kir::i32(base->ivalue + scaled->ivalue);
  return base + scaled;
}

Expr add_constant(Expr e, std::int64_t constant) {
  if (constant == 0) return e;
  if (is_constant(e)) return kir::i32(e->ivalue + constant);
  return constant > 0 ? e + kir::i32(constant) : e - kir::i32(-constant);
}

Expr declare_i32(std::vector<kir::Stmt>& body, const std::string& name, Expr value) {
  if (is_constant(value)) return value;
  body.push_back(kir::declare(name, kir::ScalarType::i32, std::move(value)));
  return kir::var(name, kir::ScalarType::i32);
}

std::vector<Expr> split_index(std::vector<kir::Stmt>& body, Expr linear,
                              const std::vector<std::pair<std::string, std::int64_t>>& extents) {
  std::vector<Expr> coords(extents.size());
  // The outermost non-unit extent takes the quotient as is.
  std::size_t outermost = extents.size();
  for (std::size_t d = 0; d < extents.size(); ++d)
    if (extents[d].second != 1) {
      outermost = d;
      break;
    }
  Expr rest = linear;
  for (std::size_t d = extents.size(); d-- > 0;) {
    const auto& [name, extent] = extents[d];
    if (extent == 1) {
      coords[d] = kir::i32(0);
      continue;
    }
    if (d == outermost) {
      coords[d] = declare_i32(body, name, rest);
      continue;
    }
    coords[d] = declare_i32(body, name, rest % kir::i32(extent));
    rest = declare_i32(body, name + "_rest", rest / kir::i32(extent));
  }
  return coords;
}

}  // namespace kiln::shaders::detail

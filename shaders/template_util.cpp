#include "shaders/template_util.h"

#include <memory>

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
                              const std::vector<std::pair<std::string, std::int64_t>>& extents,
                              const std::vector<bool>& keep_unit) {
  std::vector<Expr> coords(extents.size());
  auto unit = [&](std::size_t d) { return extents[d].second == 1 && !(d < keep_unit.size() && keep_unit[d]); };
  // The outermost non-unit extent takes the quotient as is.
  std::size_t outermost = extents.size();
  for (std::size_t d = 0; d < extents.size(); ++d)
    if (!unit(d)) {
      outermost = d;
      break;
    }
  Expr rest = linear;
  for (std::size_t d = extents.size(); d-- > 0;) {
    const auto& [name, extent] = extents[d];
    if (unit(d)) {
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

bool same_expr(const Expr& a, const Expr& b) {
  if (a.operator->() == b.operator->()) return true;
  if (!a || !b) return false;
  const kir::ExprNode& x = *a;
  const kir::ExprNode& y = *b;
  if (x.kind != y.kind || x.type != y.type || x.fvalue != y.fvalue || x.ivalue != y.ivalue || x.name != y.name ||
      x.buffer != y.buffer || x.param != y.param || x.unary != y.unary || x.binary != y.binary ||
      x.args.size() != y.args.size())
    return false;
  for (std::size_t i = 0; i < x.args.size(); ++i)
    if (!same_expr(x.args[i], y.args[i])) return false;
  return true;
}

Expr replace_expr(const Expr& e, const Expr& from, const Expr& to) {
  if (!e) return e;
  if (same_expr(e, from)) return to;
  if (e->args.empty()) return e;
  kir::ExprNode copy = *e;
  bool changed = false;
  for (Expr& arg : copy.args) {
    Expr replaced = replace_expr(arg, from, to);
    changed = changed || replaced.operator->() != arg.operator->();
    arg = std::move(replaced);
  }
  return changed ? Expr(std::make_shared<const kir::ExprNode>(std::move(copy))) : e;
}

namespace {

int count_expr(const Expr& e, const Expr& target) {
  if (!e) return 0;
  if (same_expr(e, target)) return 1;
  int n = 0;
  for (const Expr& arg : e->args) n += count_expr(arg, target);
  return n;
}

// Loads of read-only buffers below `e`, innermost first.
void collect_loads(const kir::Kernel& kernel, const Expr& e, std::vector<Expr>& out) {
  if (!e) return;
  for (const Expr& arg : e->args) collect_loads(kernel, arg, out);
  if (e->kind == kir::ExprKind::load && kernel.buffers[static_cast<std::size_t>(e->buffer)].access == kir::Access::read)
    out.push_back(e);
}

}  // namespace

std::vector<kir::Stmt> store_tile_row(const kir::Kernel& kernel, kir::Buf y, const TileRow& row,
                                      std::uint32_t row_index) {
  std::vector<kir::Stmt> out;
  std::vector<Expr> values = row.values;
  const std::size_t group = row.vector ? static_cast<std::size_t>(kVector) : 1;
  // Shared loads: only those the first group reads, which is stored whenever
  // the row is, so reading them first reads nothing the row would not.
  std::vector<Expr> candidates;
  for (std::size_t j = 0; j < group && j < values.size(); ++j) collect_loads(kernel, values[j], candidates);
  std::vector<std::pair<Expr, Expr>> shared;  // load -> its variable
  for (const Expr& original : candidates) {
    Expr load = original;
    for (const auto& [from, to] : shared) load = replace_expr(load, from, to);
    if (load->kind != kir::ExprKind::load) continue;  // already shared
    int uses = 0;
    for (const Expr& v : values) uses += count_expr(v, load);
    if (uses < 2) continue;
    const std::string name = indexed("row_load", row_index) + "_" + std::to_string(shared.size());
    out.push_back(kir::declare(name, load.type(), load));
    const Expr var = kir::var(name, load.type());
    for (Expr& v : values) v = replace_expr(v, load, var);
    shared.emplace_back(load, var);
  }
  Expr first_vector;
  if (row.vector) first_vector = declare_i32(out, indexed("y_vec", row_index), row.element(0) / kir::i32(kVector));
  for (std::size_t j = 0; j < values.size(); j += group) {
    kir::Stmt store =
        row.vector ? kir::store_vector(y, add_constant(first_vector, static_cast<std::int64_t>(j) / kVector),
                                       std::vector<Expr>(values.begin() + static_cast<std::ptrdiff_t>(j),
                                                         values.begin() + static_cast<std::ptrdiff_t>(j + group)))
                   : kir::store(y, row.element(j), values[j]);
    if (j > 0 && row.column_guard) store = kir::branch(row.column_guard(j), {std::move(store)});
    out.push_back(std::move(store));
  }
  return out;
}

}  // namespace kiln::shaders::detail

#include "src/base/symbolic.h"

#include "src/base/check.h"

#include <kiln/error.h>

#include <algorithm>
#include <functional>
#include <utility>

namespace kiln::sym {

Expr make(Node node);  // the one constructor of expressions: hash and size

namespace {

std::size_t mix(std::size_t seed, std::size_t value) {
  return seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}

void overflow_if(bool overflowed, const char* what) {
  KILN_CHECK(!overflowed, ErrorKind::InvalidArgument, std::string("symbolic extent arithmetic overflows 64 bits in ") + what);
}

std::int64_t add_checked(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  overflow_if(__builtin_add_overflow(a, b, &r), "a sum");
  return r;
}

std::int64_t sub_checked(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  overflow_if(__builtin_sub_overflow(a, b, &r), "a difference");
  return r;
}

std::int64_t mul_checked(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  overflow_if(__builtin_mul_overflow(a, b, &r), "a product");
  return r;
}

// Floor division of integers (b != 0).
std::int64_t floor_divide(std::int64_t a, std::int64_t b) {
  KILN_CHECK(!(a == INT64_MIN && b == -1), ErrorKind::InvalidArgument, "symbolic extent arithmetic overflows 64 bits in a division");
  std::int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

// A polynomial: constant + sum of coefficient * monomial, where a monomial is
// a canonically ordered list of atoms (symbols, floor_div, min, max).
using Monomial = std::vector<Expr>;
struct Poly {
  std::int64_t constant = 0;
  std::vector<std::pair<std::int64_t, Monomial>> terms;
};

int compare_monomials(const Monomial& a, const Monomial& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (const int c = compare(a[i], b[i])) return c;
  return 0;
}

Monomial atoms_of(const Expr& term) {
  if (term.node().kind == Kind::product) return term.node().operands;
  return {term};
}

Poly to_poly(const Expr& e) {
  Poly p;
  const Node& n = e.node();
  if (n.kind == Kind::constant) {
    p.constant = n.value;
  } else if (n.kind == Kind::sum) {
    p.constant = n.value;
    for (const auto& [coefficient, term] : n.terms) p.terms.emplace_back(coefficient, atoms_of(term));
  } else {
    p.terms.emplace_back(1, atoms_of(e));
  }
  return p;
}

Expr monomial_expr(Monomial atoms) {
  if (atoms.size() == 1) return atoms[0];
  Node n;
  n.kind = Kind::product;
  n.operands = std::move(atoms);
  return make(std::move(n));
}

Expr from_poly(Poly p) {
  for (auto& term : p.terms) std::sort(term.second.begin(), term.second.end(), [](const Expr& a, const Expr& b) { return compare(a, b) < 0; });
  std::sort(p.terms.begin(), p.terms.end(), [](const auto& a, const auto& b) { return compare_monomials(a.second, b.second) < 0; });
  std::vector<std::pair<std::int64_t, Monomial>> merged;
  for (auto& term : p.terms) {
    if (!term.second.empty() && !merged.empty() && compare_monomials(merged.back().second, term.second) == 0)
      merged.back().first = add_checked(merged.back().first, term.first);
    else if (term.second.empty())
      p.constant = add_checked(p.constant, term.first);
    else
      merged.push_back(std::move(term));
  }
  std::erase_if(merged, [](const auto& term) { return term.first == 0; });
  if (merged.empty()) return constant(p.constant);
  if (merged.size() == 1 && merged[0].first == 1 && p.constant == 0) return monomial_expr(std::move(merged[0].second));
  Node n;
  n.kind = Kind::sum;
  n.value = p.constant;
  for (auto& [coefficient, atoms] : merged) n.terms.emplace_back(coefficient, monomial_expr(std::move(atoms)));
  return make(std::move(n));
}

Expr binary(Kind kind, Expr a, Expr b) {
  Node n;
  n.kind = kind;
  n.operands = {std::move(a), std::move(b)};
  return make(std::move(n));
}

// Names of relations as they print after an expression.
const char* relation_text(Relation r) {
  switch (r) {
    case Relation::eq: return " == 0";
    case Relation::ne: return " != 0";
    case Relation::lt: return " < 0";
    case Relation::le: return " <= 0";
    case Relation::gt: return " > 0";
    case Relation::ge: return " >= 0";
  }
  return "";
}

bool relation_holds(Relation r, std::int64_t v) {
  switch (r) {
    case Relation::eq: return v == 0;
    case Relation::ne: return v != 0;
    case Relation::lt: return v < 0;
    case Relation::le: return v <= 0;
    case Relation::gt: return v > 0;
    case Relation::ge: return v >= 0;
  }
  return false;
}

thread_local Guards* current_guards = nullptr;

}  // namespace

Expr make(Node node) {
  std::size_t h = std::hash<int>{}(static_cast<int>(node.kind));
  h = mix(h, std::hash<std::int64_t>{}(node.value));
  for (const auto& [coefficient, term] : node.terms) {
    h = mix(mix(h, std::hash<std::int64_t>{}(coefficient)), term.hash());
    node.size += term.node().size;
  }
  for (const Expr& operand : node.operands) {
    h = mix(h, operand.hash());
    node.size += operand.node().size;
  }
  node.hash = h;
  Expr e;
  e.node_ = std::make_shared<const Node>(std::move(node));
  return e;
}

std::size_t Expr::hash() const { return node_ ? node_->hash : 0; }

bool Expr::operator==(const Expr& other) const {
  if (node_ == other.node_) return true;
  if (!node_ || !other.node_ || node_->hash != other.node_->hash) return false;
  return compare(*this, other) == 0;
}

int compare(const Expr& a, const Expr& b) {
  if (!a || !b) return static_cast<int>(static_cast<bool>(a)) - static_cast<int>(static_cast<bool>(b));
  const Node& x = a.node();
  const Node& y = b.node();
  if (&x == &y) return 0;
  if (x.kind != y.kind) return x.kind < y.kind ? -1 : 1;
  if (x.value != y.value) return x.value < y.value ? -1 : 1;
  if (x.terms.size() != y.terms.size()) return x.terms.size() < y.terms.size() ? -1 : 1;
  for (std::size_t i = 0; i < x.terms.size(); ++i) {
    if (x.terms[i].first != y.terms[i].first) return x.terms[i].first < y.terms[i].first ? -1 : 1;
    if (const int c = compare(x.terms[i].second, y.terms[i].second)) return c;
  }
  if (x.operands.size() != y.operands.size()) return x.operands.size() < y.operands.size() ? -1 : 1;
  for (std::size_t i = 0; i < x.operands.size(); ++i)
    if (const int c = compare(x.operands[i], y.operands[i])) return c;
  return 0;
}

Expr constant(std::int64_t value) {
  Node n;
  n.kind = Kind::constant;
  n.value = value;
  return make(std::move(n));
}

Expr symbol(int index, std::string name) {
  KILN_ASSERT(index >= 0);
  Node n;
  n.kind = Kind::symbol;
  n.value = index;
  n.name = std::move(name);
  return make(std::move(n));
}

Expr operator+(const Expr& a, const Expr& b) {
  Poly p = to_poly(a);
  Poly q = to_poly(b);
  p.constant = add_checked(p.constant, q.constant);
  for (auto& term : q.terms) p.terms.push_back(std::move(term));
  return from_poly(std::move(p));
}

Expr operator-(const Expr& a) { return constant(-1) * a; }

Expr operator-(const Expr& a, const Expr& b) { return a + -b; }

Expr operator*(const Expr& a, const Expr& b) {
  const Poly p = to_poly(a);
  const Poly q = to_poly(b);
  // (c + sum a_i m_i)(d + sum b_j n_j), expanded.
  Poly r;
  r.constant = mul_checked(p.constant, q.constant);
  for (const auto& [coefficient, atoms] : p.terms)
    if (q.constant != 0) r.terms.emplace_back(mul_checked(coefficient, q.constant), atoms);
  for (const auto& [coefficient, atoms] : q.terms)
    if (p.constant != 0) r.terms.emplace_back(mul_checked(coefficient, p.constant), atoms);
  for (const auto& [ca, ma] : p.terms)
    for (const auto& [cb, mb] : q.terms) {
      Monomial atoms = ma;
      atoms.insert(atoms.end(), mb.begin(), mb.end());
      r.terms.emplace_back(mul_checked(ca, cb), std::move(atoms));
    }
  return from_poly(std::move(r));
}

Expr floor_div(const Expr& a, const Expr& b) {
  if (const auto d = constant_value(b)) {
    KILN_ASSERT(*d != 0);
    if (*d == 1) return a;
    if (*d < 0) return floor_div(-a, constant(-*d));
    if (const auto c = constant_value(a)) return constant(floor_divide(*c, *d));
    // floor((d*k + rest) / d) = k + floor(rest / d): split off the terms d divides.
    Poly p = to_poly(a);
    Poly exact, rest;
    exact.constant = floor_divide(p.constant, *d);
    rest.constant = sub_checked(p.constant, mul_checked(exact.constant, *d));  // in [0, d)
    for (auto& [coefficient, atoms] : p.terms) {
      // A positive coefficient keeps its remainder by d (5*H = 4*H + H).
      const std::int64_t whole = coefficient > 0 ? coefficient / *d : (coefficient % *d == 0 ? coefficient / *d : 0);
      if (whole != 0) exact.terms.emplace_back(whole, atoms);
      if (coefficient - whole * *d != 0) rest.terms.emplace_back(coefficient - whole * *d, std::move(atoms));
    }
    Expr quotient = from_poly(std::move(exact));
    if (rest.terms.empty()) return quotient;  // rest is a constant in [0, d)
    // floor((floor(x / e) + c) / d) = floor((x + c*e) / (e*d)) for positive e and d.
    if (rest.terms.size() == 1 && rest.terms[0].first == 1 && rest.terms[0].second.size() == 1) {
      const Node& inner = rest.terms[0].second[0].node();
      if (inner.kind == Kind::floor_div)
        if (const auto e = constant_value(inner.operands[1]); e && *e > 0)
          return quotient + floor_div(inner.operands[0] + constant(mul_checked(rest.constant, *e)), constant(mul_checked(*e, *d)));
    }
    return quotient + binary(Kind::floor_div, from_poly(std::move(rest)), b);
  }
  if (a == b) return constant(1);
  // A single term over a single term dividing it: c*m*n / (e*n) = (c/e)*m.
  const Poly p = to_poly(a);
  const Poly q = to_poly(b);
  if (p.constant == 0 && q.constant == 0 && p.terms.size() == 1 && q.terms.size() == 1 &&
      p.terms[0].first % q.terms[0].first == 0) {
    Monomial left = p.terms[0].second;
    bool divides = true;
    for (const Expr& atom : q.terms[0].second) {
      const auto at = std::find(left.begin(), left.end(), atom);
      if (at == left.end()) {
        divides = false;
        break;
      }
      left.erase(at);
    }
    if (divides) {
      Poly quotient;
      quotient.terms.emplace_back(p.terms[0].first / q.terms[0].first, std::move(left));
      return from_poly(std::move(quotient));
    }
  }
  return binary(Kind::floor_div, a, b);
}

Expr ceil_div(const Expr& a, const Expr& b) { return floor_div(a + b - constant(1), b); }

Expr mod(const Expr& a, const Expr& b) { return a - b * floor_div(a, b); }

namespace {

Expr extremum(Kind kind, const Expr& a, const Expr& b) {
  if (a == b) return a;
  if (const auto difference = constant_value(a - b)) {
    const bool a_larger = *difference > 0;
    return (kind == Kind::max) == a_larger ? a : b;
  }
  return compare(a, b) <= 0 ? binary(kind, a, b) : binary(kind, b, a);
}

}  // namespace

Expr min(const Expr& a, const Expr& b) { return extremum(Kind::min, a, b); }
Expr max(const Expr& a, const Expr& b) { return extremum(Kind::max, a, b); }

std::optional<std::int64_t> constant_value(const Expr& e) {
  if (e && e.node().kind == Kind::constant) return e.node().value;
  return std::nullopt;
}

bool is_symbolic(const Expr& e) { return e && e.node().kind != Kind::constant; }

std::int64_t evaluate(const Expr& e, std::span<const std::int64_t> symbols) {
  const Node& n = e.node();
  switch (n.kind) {
    case Kind::constant: return n.value;
    case Kind::symbol:
      KILN_CHECK(static_cast<std::size_t>(n.value) < symbols.size(), ErrorKind::Internal,
                 "symbolic extent '" + n.name + "' has no value (" + std::to_string(symbols.size()) + " bound)");
      return symbols[static_cast<std::size_t>(n.value)];
    case Kind::sum: {
      std::int64_t total = n.value;
      for (const auto& [coefficient, term] : n.terms) total = add_checked(total, mul_checked(coefficient, evaluate(term, symbols)));
      return total;
    }
    case Kind::product: {
      std::int64_t total = 1;
      for (const Expr& factor : n.operands) total = mul_checked(total, evaluate(factor, symbols));
      return total;
    }
    case Kind::floor_div: {
      const std::int64_t divisor = evaluate(n.operands[1], symbols);
      KILN_CHECK(divisor != 0, ErrorKind::InvalidArgument, "symbolic extent arithmetic divides by zero in " + to_string(e));
      return floor_divide(evaluate(n.operands[0], symbols), divisor);
    }
    case Kind::min: return std::min(evaluate(n.operands[0], symbols), evaluate(n.operands[1], symbols));
    case Kind::max: return std::max(evaluate(n.operands[0], symbols), evaluate(n.operands[1], symbols));
  }
  KILN_ASSERT(false);
  return 0;
}

std::string to_string(const Expr& e) {
  if (!e) return "(none)";
  const Node& n = e.node();
  switch (n.kind) {
    case Kind::constant: return std::to_string(n.value);
    case Kind::symbol: return n.name;
    case Kind::sum: {
      std::string text;
      for (const auto& [coefficient, term] : n.terms) {
        const std::string body = to_string(term);
        if (text.empty()) text += coefficient < 0 ? "-" : "";
        else text += coefficient < 0 ? " - " : " + ";
        const std::int64_t magnitude = coefficient < 0 ? -coefficient : coefficient;
        text += (magnitude == 1 ? "" : std::to_string(magnitude) + "*") + body;
      }
      if (n.value != 0) text += (n.value < 0 ? " - " : " + ") + std::to_string(n.value < 0 ? -n.value : n.value);
      return "(" + text + ")";
    }
    case Kind::product: {
      std::string text;
      for (const Expr& factor : n.operands) text += (text.empty() ? "" : "*") + to_string(factor);
      return text;
    }
    case Kind::floor_div: return "floor(" + to_string(n.operands[0]) + " / " + to_string(n.operands[1]) + ")";
    case Kind::min: return "min(" + to_string(n.operands[0]) + ", " + to_string(n.operands[1]) + ")";
    case Kind::max: return "max(" + to_string(n.operands[0]) + ", " + to_string(n.operands[1]) + ")";
  }
  return "?";
}

bool holds(const Guard& guard, std::span<const std::int64_t> symbols) {
  return relation_holds(guard.relation, evaluate(guard.expr, symbols));
}

std::string to_string(const Guard& guard) { return to_string(guard.expr) + relation_text(guard.relation); }

void Guards::add(Guard guard) {
  const std::size_t key = mix(guard.expr.hash(), static_cast<std::size_t>(guard.relation));
  for (auto [at, end] = by_hash_.equal_range(key); at != end; ++at)
    if (guards_[at->second] == guard) return;
  by_hash_.emplace(key, guards_.size());
  guards_.push_back(std::move(guard));
}

const Guard* Guards::first_failing(std::span<const std::int64_t> symbols) const {
  for (const Guard& g : guards_)
    if (!holds(g, symbols)) return &g;
  return nullptr;
}

GuardScope::GuardScope(Guards& guards) : previous_(current_guards) { current_guards = &guards; }
GuardScope::~GuardScope() { current_guards = previous_; }

void record(const Guard& guard, const char* what) {
  if (!is_symbolic(guard.expr)) return;
  KILN_CHECK(current_guards != nullptr, ErrorKind::Internal,
             std::string("internal error: ") + what + " of symbolic extent " + to_string(guard.expr) +
                 " outside a guard scope (nothing would record that the plan depends on it)");
  current_guards->add(guard);
}

namespace {

// Where an expression would grow past kMaxExpressionNodes, the operands are
// fixed at their values (guarded) and the result is a constant.
Dim combine(const Dim& a, const Dim& b, std::int64_t value, Expr (*op)(const Expr&, const Expr&)) {
  if (!a.symbolic() && !b.symbolic()) return Dim(value);
  Expr e = op(a.as_expr(), b.as_expr());
  if (e.node().size > kMaxExpressionNodes) {
    (void)a.value();
    (void)b.value();
    return Dim(value);
  }
  return Dim(value, std::move(e));
}

Expr add_op(const Expr& a, const Expr& b) { return a + b; }
Expr sub_op(const Expr& a, const Expr& b) { return a - b; }
Expr mul_op(const Expr& a, const Expr& b) { return a * b; }
Expr floor_div_op(const Expr& a, const Expr& b) { return floor_div(a, b); }
Expr ceil_div_op(const Expr& a, const Expr& b) { return ceil_div(a, b); }
Expr mod_op(const Expr& a, const Expr& b) { return mod(a, b); }
Expr min_op(const Expr& a, const Expr& b) { return min(a, b); }
Expr max_op(const Expr& a, const Expr& b) { return max(a, b); }

std::int64_t nonzero(std::int64_t divisor) {
  KILN_CHECK(divisor != 0, ErrorKind::InvalidArgument, "symbolic extent arithmetic divides by zero");
  return divisor;
}

}  // namespace

Dim::Dim(std::int64_t value, Expr expr) : value_(value) {
  if (is_symbolic(expr)) expr_ = std::move(expr);
  else KILN_ASSERT(!expr || *constant_value(expr) == value);
}

std::int64_t Dim::value() const {
  if (expr_) record(Guard{expr_ - constant(value_), Relation::eq}, "reading the value");
  return value_;
}

Dim operator+(const Dim& a, const Dim& b) { return combine(a, b, add_checked(a.value_, b.value_), add_op); }
Dim operator-(const Dim& a, const Dim& b) { return combine(a, b, sub_checked(a.value_, b.value_), sub_op); }
Dim operator*(const Dim& a, const Dim& b) { return combine(a, b, mul_checked(a.value_, b.value_), mul_op); }
Dim floor_div(const Dim& a, const Dim& b) {
  return combine(a, b, floor_divide(a.value_, nonzero(b.value_)), floor_div_op);
}
Dim ceil_div(const Dim& a, const Dim& b) {
  return combine(a, b, floor_divide(add_checked(a.value_, sub_checked(b.value_, 1)), nonzero(b.value_)), ceil_div_op);
}
Dim mod(const Dim& a, const Dim& b) {
  return combine(a, b, sub_checked(a.value_, mul_checked(b.value_, floor_divide(a.value_, nonzero(b.value_)))), mod_op);
}
Dim min(const Dim& a, const Dim& b) { return combine(a, b, std::min(a.value_, b.value_), min_op); }
Dim max(const Dim& a, const Dim& b) { return combine(a, b, std::max(a.value_, b.value_), max_op); }

bool operator==(const Dim& a, const Dim& b) {
  if (!a.symbolic() && !b.symbolic()) return a.value_ == b.value_;
  const Expr difference = a.as_expr() - b.as_expr();
  const bool equal = a.value_ == b.value_;
  record(Guard{difference, equal ? Relation::eq : Relation::ne}, "comparing");
  return equal;
}

bool operator<(const Dim& a, const Dim& b) {
  if (!a.symbolic() && !b.symbolic()) return a.value_ < b.value_;
  const Expr difference = a.as_expr() - b.as_expr();
  const bool less = a.value_ < b.value_;
  record(Guard{difference, less ? Relation::lt : Relation::ge}, "comparing");
  return less;
}

}  // namespace kiln::sym

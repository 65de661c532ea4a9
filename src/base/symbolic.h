// Integer expressions over a model's dynamic extents, and the dim type that
// carries one beside its value: what lets a plan made at one extent be
// evaluated at another (docs/benchmarks/dynamic-dims.md, "a plan over
// symbolic extents").
//
// An Expr is an immutable expression over symbols (a model input's dynamic
// axes, numbered by the caller): constants, +, *, floor division, min, max.
// Construction keeps one canonical form: sums are polynomials with like
// terms merged and products expanded, so two computations of the same
// quantity compare equal (H*W + H == H*(W + 1)), and floor division splits
// off what it divides exactly (floor((4*H + 6) / 4) is H + 1, floor(5*H / 4)
// is H + floor(H / 4)). ceil_div and mod are written with floor division.
//
// A Dim is a value and, when it depends on a symbol, the expression that
// made it. Arithmetic on dims builds expressions; reading a symbolic dim as
// a plain number (value(), or the implicit conversion unconverted code uses)
// or comparing two whose difference is not a constant records a guard in
// the thread's GuardScope: the condition under which the value, or the
// comparison's outcome, holds at other extents. A plan made under guards is
// reused at new extents where every guard holds, so code that specialises
// on an extent is correct by construction and code that keeps it symbolic
// is general. Reading a symbolic dim as a number outside any GuardScope is
// a bug (Error Internal): nothing would know the value was fixed.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::sym {

struct Node;

// A canonical expression; a default-constructed Expr is empty (no expression).
class Expr {
 public:
  Expr() = default;
  explicit operator bool() const { return node_ != nullptr; }
  const Node& node() const { return *node_; }
  std::size_t hash() const;
  // Structural equality: canonical forms make it mean "the same quantity"
  // for everything the canonical form decides.
  bool operator==(const Expr& other) const;

 private:
  friend Expr make(Node node);
  std::shared_ptr<const Node> node_;
};

enum class Kind : std::uint8_t { constant, symbol, sum, product, floor_div, min, max };

struct Node {
  Kind kind = Kind::constant;
  std::int64_t value = 0;  // constant: the value; symbol: its index; sum: the constant part
  std::string name;        // symbol: its name, for messages
  // sum: (coefficient, term) with each term a symbol, product, floor_div,
  // min or max, in canonical order and unique
  std::vector<std::pair<std::int64_t, Expr>> terms;
  // product: its factors (two or more, canonical order); floor_div:
  // {dividend, divisor}; min, max: the two operands in canonical order
  std::vector<Expr> operands;
  std::size_t hash = 0;
  std::size_t size = 1;  // nodes in the expression
};

Expr constant(std::int64_t value);
// Symbol `index` (the position of its value in the bindings given to
// evaluate), printed as `name`.
Expr symbol(int index, std::string name);

Expr operator+(const Expr& a, const Expr& b);
Expr operator-(const Expr& a, const Expr& b);
Expr operator-(const Expr& a);
Expr operator*(const Expr& a, const Expr& b);
// Floor division (rounds toward negative infinity). A constant divisor of 0
// is an error (Internal).
Expr floor_div(const Expr& a, const Expr& b);
// ceil(a / b) for b > 0, as floor_div(a + b - 1, b).
Expr ceil_div(const Expr& a, const Expr& b);
// a - b * floor(a / b): in [0, b) for b > 0.
Expr mod(const Expr& a, const Expr& b);
Expr min(const Expr& a, const Expr& b);
Expr max(const Expr& a, const Expr& b);

// The value where the expression is a constant.
std::optional<std::int64_t> constant_value(const Expr& e);
// Whether `e` mentions a symbol.
bool is_symbolic(const Expr& e);
// Its value with symbol i bound to symbols[i]. Throws Error(InvalidArgument)
// where a result overflows 64 bits or a divisor is zero (that message names
// the expression), Error(Internal) for a symbol with no binding.
std::int64_t evaluate(const Expr& e, std::span<const std::int64_t> symbols);
std::string to_string(const Expr& e);
// Total order on canonical expressions (negative, zero, positive).
int compare(const Expr& a, const Expr& b);

// A condition on the symbols: `expr relation 0`.
enum class Relation : std::uint8_t { eq, ne, lt, le, gt, ge };
struct Guard {
  Expr expr;
  Relation relation = Relation::eq;
  bool operator==(const Guard&) const = default;
};
bool holds(const Guard& guard, std::span<const std::int64_t> symbols);
std::string to_string(const Guard& guard);

// The guards a plan was made under, each once.
class Guards {
 public:
  void add(Guard guard);
  const std::vector<Guard>& all() const { return guards_; }
  bool empty() const { return guards_.empty(); }
  // The first guard that does not hold at `symbols`, if any.
  const Guard* first_failing(std::span<const std::int64_t> symbols) const;

 private:
  std::vector<Guard> guards_;
  std::unordered_multimap<std::size_t, std::size_t> by_hash_;  // hash -> index in guards_
};

// Guards recorded on this thread go to `guards` while the scope lives;
// scopes nest (the innermost records).
class GuardScope {
 public:
  explicit GuardScope(Guards& guards);
  ~GuardScope();
  GuardScope(const GuardScope&) = delete;
  GuardScope& operator=(const GuardScope&) = delete;

 private:
  Guards* previous_;
};

// Records `guard` in the thread's innermost scope; Error(Internal) naming
// `what` when there is none. A guard on a constant is not recorded.
void record(const Guard& guard, const char* what);

// Expressions larger than this are not built: a dim whose arithmetic would
// make one specialises its operands (guards) and is a constant.
inline constexpr std::size_t kMaxExpressionNodes = 256;

class Dim {
 public:
  Dim() = default;
  Dim(std::int64_t value) : value_(value) {}  // a constant dim (implicit: shapes of plain integers)
  // `value` is the expression's value at the extents being planned for.
  Dim(std::int64_t value, Expr expr);

  bool symbolic() const { return static_cast<bool>(expr_); }
  // The expression; empty for a constant dim.
  const Expr& expr() const { return expr_; }
  // The expression, a constant one for a constant dim.
  Expr as_expr() const { return expr_ ? expr_ : constant(value_); }
  // The value at the extents being planned for, read without a guard: for
  // messages and logs only, never for a decision.
  std::int64_t hint() const { return value_; }
  // The value, guarding that the expression keeps it.
  std::int64_t value() const;
  operator std::int64_t() const { return value(); }

  Dim& operator+=(const Dim& b) { return *this = *this + b; }
  Dim& operator-=(const Dim& b) { return *this = *this - b; }
  Dim& operator*=(const Dim& b) { return *this = *this * b; }

  friend Dim operator+(const Dim& a, const Dim& b);
  friend Dim operator-(const Dim& a, const Dim& b);
  friend Dim operator*(const Dim& a, const Dim& b);
  friend Dim floor_div(const Dim& a, const Dim& b);
  friend Dim ceil_div(const Dim& a, const Dim& b);
  friend Dim mod(const Dim& a, const Dim& b);
  friend Dim min(const Dim& a, const Dim& b);
  friend Dim max(const Dim& a, const Dim& b);
  // Comparisons decided by the expressions alone (equal expressions, a
  // constant difference) record nothing; others guard their outcome.
  friend bool operator==(const Dim& a, const Dim& b);
  friend bool operator<(const Dim& a, const Dim& b);
  friend bool operator!=(const Dim& a, const Dim& b) { return !(a == b); }
  friend bool operator>(const Dim& a, const Dim& b) { return b < a; }
  friend bool operator<=(const Dim& a, const Dim& b) { return !(b < a); }
  friend bool operator>=(const Dim& a, const Dim& b) { return !(a < b); }

 private:
  std::int64_t value_ = 0;
  Expr expr_;
};

// Mixed with plain integers: templates, so that `dim + 1` prefers these to
// converting the dim and adding integers.
template <std::integral I> Dim operator+(const Dim& a, I b) { return a + Dim(static_cast<std::int64_t>(b)); }
template <std::integral I> Dim operator+(I a, const Dim& b) { return Dim(static_cast<std::int64_t>(a)) + b; }
template <std::integral I> Dim operator-(const Dim& a, I b) { return a - Dim(static_cast<std::int64_t>(b)); }
template <std::integral I> Dim operator-(I a, const Dim& b) { return Dim(static_cast<std::int64_t>(a)) - b; }
template <std::integral I> Dim operator*(const Dim& a, I b) { return a * Dim(static_cast<std::int64_t>(b)); }
template <std::integral I> Dim operator*(I a, const Dim& b) { return Dim(static_cast<std::int64_t>(a)) * b; }
template <std::integral I> bool operator==(const Dim& a, I b) { return a == Dim(static_cast<std::int64_t>(b)); }
template <std::integral I> bool operator!=(const Dim& a, I b) { return !(a == b); }
template <std::integral I> bool operator<(const Dim& a, I b) { return a < Dim(static_cast<std::int64_t>(b)); }
template <std::integral I> bool operator<(I a, const Dim& b) { return Dim(static_cast<std::int64_t>(a)) < b; }
template <std::integral I> bool operator>(const Dim& a, I b) { return b < a; }
template <std::integral I> bool operator<=(const Dim& a, I b) { return !(b < a); }
template <std::integral I> bool operator>=(const Dim& a, I b) { return !(a < b); }
template <std::integral I> bool operator>(I a, const Dim& b) { return b < a; }
template <std::integral I> bool operator<=(I a, const Dim& b) { return !(b < a); }
template <std::integral I> bool operator>=(I a, const Dim& b) { return !(a < b); }

}  // namespace kiln::sym

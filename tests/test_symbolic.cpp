// Expressions over dynamic extents (src/base/symbolic.h): canonical forms,
// evaluation against plain integer arithmetic, dims and the guards they record.
#define BOOST_TEST_MODULE symbolic
#include <boost/test/unit_test.hpp>

#include "src/base/symbolic.h"

#include <kiln/error.h>

#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace sym = kiln::sym;
using sym::Dim;
using sym::Expr;

namespace {

const Expr H = sym::symbol(0, "H");
const Expr W = sym::symbol(1, "W");
Expr c(std::int64_t v) { return sym::constant(v); }

std::int64_t floor_div_ref(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

bool throws_kind(const std::function<void()>& f, kiln::ErrorKind kind) {
  try {
    f();
  } catch (const kiln::Error& e) {
    return e.kind() == kind;
  }
  return false;
}

}  // namespace

BOOST_AUTO_TEST_CASE(equal_quantities_have_one_form) {
  BOOST_TEST((H * W + H == H * (W + c(1))));
  BOOST_TEST(((H + c(1)) * (W + c(1)) - H * W - W == H + c(1)));
  BOOST_TEST((sym::constant_value(H - H) == std::optional<std::int64_t>(0)));
  BOOST_TEST((sym::constant_value(c(3) * c(4) + c(2)) == std::optional<std::int64_t>(14)));
  BOOST_TEST((W * H == H * W));
  BOOST_TEST(!(H == W));
  BOOST_TEST((H * W).hash() == (W * H).hash());
  // Division splits off what the divisor divides, and nests into one division.
  BOOST_TEST((sym::floor_div(c(4) * H + c(6), c(4)) == H + c(1)));
  BOOST_TEST((sym::floor_div(c(5) * H, c(4)) == H + sym::floor_div(H, c(4))));
  BOOST_TEST((sym::ceil_div(sym::ceil_div(H, c(2)), c(2)) == sym::ceil_div(H, c(4))));
  BOOST_TEST((sym::floor_div(sym::floor_div(H, c(2)), c(8)) == sym::floor_div(H, c(16))));
  BOOST_TEST((sym::floor_div(c(6) * H * W, c(2) * W) == c(3) * H));  // Reshape's -1: the product over the known dims
  BOOST_TEST((sym::floor_div(H, H) == c(1)));
  BOOST_TEST((sym::min(H + c(2), H) == H));
  BOOST_TEST((sym::max(H, H + c(2)) == H + c(2)));
  BOOST_TEST((sym::min(H, W) == sym::min(W, H)));
  BOOST_TEST(sym::to_string(c(2) * H * W - c(3) * H + c(1)) == "(-3*H + 2*H*W + 1)");
}

BOOST_AUTO_TEST_CASE(expressions_evaluate_as_integer_arithmetic_does) {
  // Random expressions built alongside their values at six bindings of
  // (H, W, B), up to three levels of operations: every simplification must keep every value.
  const std::vector<Expr> symbols = {H, W, sym::symbol(2, "B")};
  const std::vector<std::vector<std::int64_t>> bindings = {{1, 1, 1}, {7, 3, 2}, {32, 40, 1}, {25, 17, 5}, {40, 38, 16}, {3, 11, 7}};
  std::mt19937 random(20261207);
  struct Built {
    Expr expr;
    std::vector<std::int64_t> values;
  };
  const auto leaf = [&]() {
    Built b;
    if (random() % 3 == 0) {
      const std::int64_t v = static_cast<std::int64_t>(random() % 19) - 9;
      b.expr = c(v);
      b.values.assign(bindings.size(), v);
    } else {
      const std::size_t s = random() % symbols.size();
      b.expr = symbols[s];
      for (const auto& binding : bindings) b.values.push_back(binding[s]);
    }
    return b;
  };
  std::function<Built(int)> build = [&](int depth) -> Built {
    if (depth == 0) return leaf();
    Built a = build(depth - 1);
    const unsigned op = random() % 7;
    if (op >= 4) {  // division and friends by a positive constant or a symbol
      const bool by_symbol = random() % 3 == 0;
      const std::size_t s = random() % symbols.size();
      const std::int64_t d = static_cast<std::int64_t>(random() % 9) + 1;
      const Expr divisor = by_symbol ? symbols[s] : c(d);
      Built r;
      r.expr = op == 4 ? sym::floor_div(a.expr, divisor) : op == 5 ? sym::ceil_div(a.expr, divisor) : sym::mod(a.expr, divisor);
      for (std::size_t i = 0; i < bindings.size(); ++i) {
        const std::int64_t dv = by_symbol ? bindings[i][s] : d;
        const std::int64_t q = floor_div_ref(a.values[i], dv);
        r.values.push_back(op == 4 ? q : op == 5 ? floor_div_ref(a.values[i] + dv - 1, dv) : a.values[i] - dv * q);
      }
      return r;
    }
    Built b = build(depth - 1);
    Built r;
    const bool take_min = random() % 2 == 0;
    r.expr = op == 0 ? a.expr + b.expr
           : op == 1 ? a.expr - b.expr
           : op == 2 ? a.expr * b.expr
           : take_min ? sym::min(a.expr, b.expr) : sym::max(a.expr, b.expr);
    for (std::size_t i = 0; i < bindings.size(); ++i) {
      const std::int64_t x = a.values[i], y = b.values[i];
      r.values.push_back(op == 0 ? x + y : op == 1 ? x - y : op == 2 ? x * y : take_min ? std::min(x, y) : std::max(x, y));
    }
    return r;
  };
  for (int trial = 0; trial < 2000; ++trial) {
    const Built b = build(1 + trial % 3);  // three levels: values stay far from overflow
    for (std::size_t i = 0; i < bindings.size(); ++i)
      BOOST_TEST_REQUIRE(sym::evaluate(b.expr, bindings[i]) == b.values[i],
                         sym::to_string(b.expr) << " at binding " << i << " (trial " << trial << ")");
  }
}

BOOST_AUTO_TEST_CASE(min_and_max_evaluate_to_the_smaller_and_larger) {
  const Expr lo = sym::min(H, c(2) * W), hi = sym::max(H, c(2) * W);
  for (const std::vector<std::int64_t>& binding : {std::vector<std::int64_t>{3, 5}, {30, 5}, {10, 5}}) {
    BOOST_TEST(sym::evaluate(lo, binding) == std::min(binding[0], 2 * binding[1]));
    BOOST_TEST(sym::evaluate(hi, binding) == std::max(binding[0], 2 * binding[1]));
  }
}

BOOST_AUTO_TEST_CASE(evaluation_errors_name_the_problem) {
  const std::vector<std::int64_t> big = {INT64_C(1) << 40, INT64_C(1) << 40};
  BOOST_TEST(throws_kind([&] { sym::evaluate(H * W, big); }, kiln::ErrorKind::InvalidArgument));
  const std::vector<std::int64_t> zero = {5, 0};
  BOOST_TEST(throws_kind([&] { sym::evaluate(sym::floor_div(H, W), zero); }, kiln::ErrorKind::InvalidArgument));
  const std::vector<std::int64_t> one = {5};
  BOOST_TEST(throws_kind([&] { sym::evaluate(H + W, one); }, kiln::ErrorKind::Internal));
}

BOOST_AUTO_TEST_CASE(dims_keep_expressions_through_arithmetic) {
  sym::Guards guards;
  const sym::GuardScope scope(guards);
  const Dim h(224, H), w(160, W);
  // A 3x3 stride-2 convolution with padding 1, then a 2x2 pool, then flatten.
  const Dim conv_h = floor_div(h + 2 * 1 - 3, Dim(2)) + 1;
  const Dim pooled = floor_div(conv_h, Dim(2));
  const Dim flat = pooled * floor_div(floor_div(w - 1, Dim(2)) + 1, Dim(2)) * 64;
  BOOST_TEST(conv_h.hint() == 112);
  BOOST_TEST(pooled.hint() == 56);
  BOOST_TEST(flat.hint() == 56 * 40 * 64);
  BOOST_TEST(guards.empty());  // nothing was read as a number
  for (const std::vector<std::int64_t>& at : {std::vector<std::int64_t>{320, 256}, {97, 33}}) {
    const std::int64_t ch = (at[0] - 1) / 2 + 1;
    BOOST_TEST(sym::evaluate(conv_h.expr(), at) == ch);
    BOOST_TEST(sym::evaluate(flat.expr(), at) == ch / 2 * (((at[1] - 1) / 2 + 1) / 2) * 64);
  }
  // A constant dim has no expression; a dim whose expression folds to a constant neither.
  BOOST_TEST(!Dim(7).symbolic());
  BOOST_TEST(!(h - h).symbolic());
  BOOST_TEST((h - h).hint() == 0);
}

BOOST_AUTO_TEST_CASE(reading_or_comparing_dims_guards_what_was_decided) {
  sym::Guards guards;
  const sym::GuardScope scope(guards);
  const Dim h(224, H), w(160, W);
  // Decided by the expressions: no guard.
  BOOST_TEST((h + 1 == 1 + h));
  BOOST_TEST((h < h + 1));
  BOOST_TEST((floor_div(h * 4, Dim(4)) == h));
  BOOST_TEST(guards.empty());
  // Decided by the values: each outcome guarded.
  BOOST_TEST((w < h));
  BOOST_TEST(!(h == w));
  const std::int64_t rows = h;  // unconverted code reading the value
  BOOST_TEST(rows == 224);
  BOOST_TEST_REQUIRE(guards.all().size() == 3u);
  const std::vector<std::int64_t> same = {224, 100}, taller = {300, 100}, wider = {224, 400};
  BOOST_TEST(guards.first_failing(same) == nullptr);
  const sym::Guard* failing = guards.first_failing(taller);
  BOOST_TEST_REQUIRE(failing != nullptr);
  BOOST_TEST(sym::to_string(*failing) == "(H - 224) == 0");
  BOOST_TEST(guards.first_failing(wider) != nullptr);  // w < h no longer holds
  // Guards are kept once.
  (void)h.value();
  BOOST_TEST(guards.all().size() == 3u);
}

BOOST_AUTO_TEST_CASE(a_symbolic_dim_read_outside_a_guard_scope_is_a_bug) {
  const Dim h(224, H);
  BOOST_TEST(throws_kind([&] { (void)h.value(); }, kiln::ErrorKind::Internal));
  BOOST_TEST(throws_kind([&] { (void)(h < Dim(5, W)); }, kiln::ErrorKind::Internal));
  BOOST_TEST(h.hint() == 224);  // a hint is not a decision
  BOOST_TEST(Dim(5).value() == 5);  // constants need no scope
}

BOOST_AUTO_TEST_CASE(scopes_nest_and_record_in_the_innermost) {
  sym::Guards outer, inner;
  const Dim h(8, H);
  {
    const sym::GuardScope a(outer);
    {
      const sym::GuardScope b(inner);
      (void)h.value();
    }
    (void)(h + 1).value();
  }
  BOOST_TEST(inner.all().size() == 1u);
  BOOST_TEST(outer.all().size() == 1u);
}

BOOST_AUTO_TEST_CASE(expressions_past_the_size_limit_specialise) {
  sym::Guards guards;
  const sym::GuardScope scope(guards);
  // (H + W + 1)^k expands into ever more terms; past the limit the dims are fixed.
  const Dim base(5, H + W + c(1));
  Dim power = base;
  int steps = 0;
  while (power.symbolic() && steps < 40) {
    power = power * base;
    ++steps;
  }
  BOOST_TEST(!power.symbolic());
  BOOST_TEST(steps < 40);
  BOOST_TEST(!guards.empty());  // the operands' values were guarded
  std::int64_t expected = 5;
  for (int i = 0; i < steps; ++i) expected *= 5;
  BOOST_TEST(power.hint() == expected);
}

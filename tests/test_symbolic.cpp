// Expressions over dynamic extents (src/base/symbolic.h): canonical forms,
// evaluation against plain integer arithmetic, dims and the guards they record;
// the graph layer's shape inference over them.
#define BOOST_TEST_MODULE symbolic
#include <boost/test/unit_test.hpp>

#include "graph/ir.h"
#include "op_cases.h"
#include "src/base/symbolic.h"
#include "src/runtime/internal_access.h"

#include <kiln/error.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
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

// ---- the graph layer's shape inference over symbolic extents ----------------------------

namespace {

kiln::Attributes attrs(std::initializer_list<std::pair<std::string, kiln::Attribute>> list) {
  kiln::Attributes a;
  for (const auto& [name, value] : list) a.set(name, value);
  return a;
}

using Ints = std::vector<std::int64_t>;

// A detector-like graph on an input [1, 3, height, width]: a strided
// convolution with SiLU, a pool, a 1x1 convolution, an upsample, a
// broadcast bias, a concatenation, and the head's reshape, transpose,
// softmax and flatten. Returns the graph; its output is the last value.
kiln::graph::Graph detector_like(const Dim& height, const Dim& width) {
  kiln::graph::Graph g;
  const auto x = g.add_input("x", {kiln::DType::f32, kiln::graph::SymShape{1, 3, height, width}});
  const auto w1 = g.add_constant("w1", kiln::Tensor(kiln::DType::f32, {16, 3, 3, 3}));
  const auto c1 = g.add_node("Conv", {x, w1}, attrs({{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}), "c1")[0];
  const auto s1 = g.add_node("Sigmoid", {c1}, {}, "s1")[0];
  const auto a1 = g.add_node("Mul", {c1, s1}, {}, "a1")[0];
  const auto p1 = g.add_node("MaxPool", {a1}, attrs({{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}), "p1")[0];
  const auto w2 = g.add_constant("w2", kiln::Tensor(kiln::DType::f32, {8, 16, 1, 1}));
  const auto c2 = g.add_node("Conv", {p1, w2}, {}, "c2")[0];
  const auto up = g.add_node("Resize", {c2}, attrs({{"scales", std::vector<double>{1, 1, 2, 2}}, {"mode", std::string("nearest")}}), "up")[0];
  const auto bias = g.add_constant("bias", kiln::Tensor(kiln::DType::f32, {1, 8, 1, 1}));
  const auto biased = g.add_node("Add", {up, bias}, {}, "biased")[0];
  const auto cat = g.add_node("Concat", {biased, biased}, attrs({{"axis", std::int64_t{1}}}), "cat")[0];
  const auto flat = g.add_node("Reshape", {cat}, attrs({{"shape", Ints{1, 16, -1}}}), "flat")[0];
  const auto t = g.add_node("Transpose", {flat}, attrs({{"perm", Ints{0, 2, 1}}}), "t")[0];
  const auto sm = g.add_node("Softmax", {t}, attrs({{"axis", std::int64_t{-1}}}), "sm")[0];
  const auto out = g.add_node("Flatten", {sm}, attrs({{"axis", std::int64_t{1}}}), "out")[0];
  g.set_outputs({out});
  return g;
}

}  // namespace

BOOST_AUTO_TEST_CASE(inferred_shapes_follow_the_extents_without_fixing_them) {
  sym::Guards guards;
  const sym::GuardScope scope(guards);
  const kiln::graph::Graph g = detector_like(Dim(64, H), Dim(48, W));
  // No dim was fixed at its value: every guard is a condition that holds for a
  // range of extents (a dim is not 1, a window fits), never "H == 64".
  for (const sym::Guard& guard : guards.all())
    BOOST_TEST((guard.relation != sym::Relation::eq), sym::to_string(guard));
  // Every value's dims, evaluated at other extents, are what inference gives
  // when the graph is built at those extents.
  for (const std::vector<std::int64_t>& at : {std::vector<std::int64_t>{64, 48}, {96, 160}, {40, 72}, {320, 256}}) {
    BOOST_TEST_CONTEXT("at " << at[0] << "x" << at[1]) {
      BOOST_TEST(guards.first_failing(at) == nullptr);
      const kiln::graph::Graph concrete = detector_like(Dim(at[0]), Dim(at[1]));
      BOOST_TEST_REQUIRE(concrete.values().size() == g.values().size());
      for (std::size_t v = 0; v < g.values().size(); ++v) {
        const kiln::graph::SymShape& symbolic = g.values()[v].type.shape;
        const kiln::Shape expected = concrete.values()[v].type.shape.hints();
        std::vector<std::int64_t> got;
        for (const Dim& d : symbolic) got.push_back(d.symbolic() ? sym::evaluate(d.expr(), at) : d.hint());
        BOOST_TEST(got == expected, g.values()[v].name);
      }
    }
  }
  // The head's length is one expression of both extents.
  const Dim& length = g.values()[g.outputs()[0]].type.shape[1];
  BOOST_TEST(length.symbolic());
  BOOST_TEST(sym::evaluate(length.expr(), std::vector<std::int64_t>{320, 256}) == 16 * 160 * 128);
}

BOOST_AUTO_TEST_CASE(an_unconverted_read_fixes_the_extent) {
  sym::Guards guards;
  const sym::GuardScope scope(guards);
  kiln::graph::Graph g;
  const auto x = g.add_input("x", {kiln::DType::f32, kiln::graph::SymShape{1, 3, Dim(64, H), Dim(48, W)}});
  // Resize by a scale that is not a whole number reads the extent.
  (void)g.add_node("Resize", {x}, attrs({{"scales", std::vector<double>{1, 1, 1.5, 1}}, {"mode", std::string("nearest")}}));
  BOOST_TEST_REQUIRE(guards.all().size() == 1u);
  BOOST_TEST(sym::to_string(guards.all()[0]) == "(H - 64) == 0");
}

// Every op case's graph inferred again with input dims made symbols, two
// ways: every dim a symbol of its own (each rule's expressions are checked
// against its values: the two are computed apart), and only the dims a
// model leaves dynamic in practice (a leading batch dim, a 4-D input's
// height and width, extents past 1), one symbol per position and extent as a batch or an
// image size is shared by a model's inputs. Either way the dims must agree
// with concrete inference. The second is the census of which rules keep an
// extent symbolic: the ops listed below must not fix one.
namespace {

struct Reinferred {
  bool built = false;
  bool fixed = false;  // some guard fixes an expression at its value
};

Reinferred reinfer(const kiln::graph::Graph& original, bool every_dim) {
  sym::Guards guards;
  const sym::GuardScope scope(guards);
  std::vector<std::int64_t> bindings;
  std::map<std::pair<std::size_t, std::int64_t>, Expr> shared;  // (position, extent) -> symbol
  const auto new_symbol = [&](std::int64_t value) {
    const int index = static_cast<int>(bindings.size());
    bindings.push_back(value);
    return sym::symbol(index, "s" + std::to_string(index));
  };
  kiln::graph::Graph g;
  std::vector<kiln::graph::ValueId> map(original.values().size(), -1);
  std::size_t max_rank = 0;
  for (kiln::graph::ValueId id : original.inputs()) max_rank = std::max(max_rank, original.value(id).type.shape.size());
  for (kiln::graph::ValueId id : original.inputs()) {
    const kiln::graph::Value& v = original.value(id);
    kiln::graph::TensorType type = v.type;
    if (!v.type.dynamic)
      for (std::size_t i = 0; i < type.shape.size(); ++i) {
        Dim& d = type.shape[i];
        // Extents 0 and 1 stay plain, as in PyTorch: a dim of 1 broadcasts, so its rules branch on it.
        // An input of lower rank than the others (a bias, a broadcast operand) has no batch dim.
        const bool dynamic_in_practice =
            type.shape.size() == max_rank && (i == 0 || (max_rank == 4 && i >= 2)) && d.hint() > 1;
        if (every_dim) {
          d = Dim(d.hint(), new_symbol(d.hint()));
        } else if (dynamic_in_practice) {
          auto [at, fresh] = shared.try_emplace({i, d.hint()});
          if (fresh) at->second = new_symbol(d.hint());
          d = Dim(d.hint(), at->second);
        }
      }
    map[id] = g.add_input(v.name, type);
  }
  for (const kiln::graph::Node& node : original.nodes()) {
    if (!node.subgraphs.empty()) return {};  // control flow: its branches are graphs of their own
    for (kiln::graph::ValueId in : node.inputs)
      if (in >= 0 && map[in] < 0) map[in] = g.add_constant(original.value(in).name, *original.value(in).constant);
    std::vector<kiln::graph::ValueId> inputs;
    for (kiln::graph::ValueId in : node.inputs) inputs.push_back(in < 0 ? -1 : map[in]);
    const std::vector<kiln::graph::ValueId> outputs = g.add_node(node.op, inputs, node.attrs, node.name);
    BOOST_TEST_REQUIRE(outputs.size() == node.outputs.size());
    for (std::size_t i = 0; i < outputs.size(); ++i) map[node.outputs[i]] = outputs[i];
  }
  for (std::size_t v = 0; v < original.values().size(); ++v) {
    if (map[v] < 0) continue;
    const kiln::graph::TensorType& symbolic = g.value(map[v]).type;
    BOOST_TEST((symbolic.shape.hints() == original.values()[v].type.shape.hints()), original.values()[v].name);
    for (const Dim& d : symbolic.shape)
      if (d.symbolic()) BOOST_TEST(sym::evaluate(d.expr(), bindings) == d.hint(), sym::to_string(d.expr()));
  }
  Reinferred result;
  result.built = true;
  for (const sym::Guard& guard : guards.all()) result.fixed = result.fixed || guard.relation == sym::Relation::eq;
  return result;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_op_case_infers_the_same_dims_symbolically) {
  // Cases whose ops keep batch and image extents symbolic: none may fix one.
  const std::vector<std::string> keep = {"Conv/", "Add/same_shape", "Add/broadcast_channel", "Sub/broadcast_both",
                                         "Div/broadcast", "Concat/channels", "Concat/negative_axis", "Chain/conv_bn_relu_residual",
                                         "MaxPool", "AveragePool", "GlobalAveragePool", "Transpose", "Reshape",
                                         "Softmax", "Relu", "Sigmoid"};
  std::vector<std::string> fixing;
  int cases = 0;
  for (const kiln::testing::OpCase& c : kiln::testing::make_op_cases()) {
    const kiln::graph::Graph& original = kiln::internal::graph(c.model);
    if (original.nodes().empty()) continue;
    BOOST_TEST_CONTEXT(c.name) {
      if (!reinfer(original, true).built) continue;
      ++cases;
      if (!reinfer(original, false).fixed) continue;
      fixing.push_back(c.name);
      for (const std::string& prefix : keep) BOOST_TEST(c.name.rfind(prefix, 0) != 0, "fixes an extent");
    }
  }
  BOOST_TEST(cases > 100);
  std::string list;
  for (const std::string& name : fixing) list += " " + name;
  BOOST_TEST_MESSAGE(fixing.size() << " of " << cases << " op cases fix a batch or image extent:" << list);
}

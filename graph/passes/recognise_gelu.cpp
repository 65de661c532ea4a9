// recognise_gelu: the exact GELU that torch.onnx.export (opset < 20) spells out as
//   y = Mul(Mul(x, Add(Erf(Div(x, sqrt(2))), 1)), 0.5)
// (or with 0.5 multiplied into x first, or Mul by 1/sqrt(2) instead of the
// Div) becomes one Gelu: one kernel instead of five.
#include "graph/passes/passes.h"
#include "graph/passes/rewrite.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>

namespace kiln::graph::passes {

namespace {

struct GeluMatch {
  std::set<NodeId> nodes;
  NodeId last = kNoNode;
  ValueId x = -1;
};

// Within 1e-4 relative, or the rounding of a 16-bit constant.
bool near(double value, double expected, DType dtype) {
  return std::fabs(value - expected) <= std::max(1e-4, rounding_of(dtype)) * std::fabs(expected);
}

class Matcher {
 public:
  explicit Matcher(const Graph& graph) : graph_(graph), readers_(graph) {}

  std::optional<GeluMatch> match(const Node& erf) const {
    if (erf.op != "Erf") return std::nullopt;
    GeluMatch m;
    // x / sqrt(2), or x * (1 / sqrt(2)) in either order.
    const Node* scaled = readers_.single_use_producer(erf.inputs[0]);
    if (!scaled) return std::nullopt;
    if (scaled->op == "Div" && constant_near(scaled->inputs[1], std::sqrt(2.0))) {
      m.x = scaled->inputs[0];
    } else if (scaled->op == "Mul") {
      m.x = other_operand(*scaled, [&](ValueId v) { return constant_near(v, 1.0 / std::sqrt(2.0)); });
    }
    if (m.x < 0 || !is_float_weight(graph_.value(m.x).type.dtype)) return std::nullopt;

    const Node* plus_one = readers_.single_consumer(erf.outputs[0], "Add");
    if (!plus_one || other_operand(*plus_one, [&](ValueId v) { return v == erf.outputs[0]; }) < 0) return std::nullopt;
    const ValueId one_side = plus_one->inputs[0] == erf.outputs[0] ? plus_one->inputs[1] : plus_one->inputs[0];
    if (!constant_near(one_side, 1.0)) return std::nullopt;
    const Node* product = readers_.single_consumer(plus_one->outputs[0], "Mul");
    if (!product) return std::nullopt;
    const ValueId other = product->inputs[0] == plus_one->outputs[0] ? product->inputs[1] : product->inputs[0];
    m.nodes = {scaled->id, erf.id, plus_one->id, product->id};

    if (other == m.x) {
      // (x * (1 + erf)) * 0.5
      const Node* half = readers_.single_consumer(product->outputs[0], "Mul");
      if (!half || other_operand(*half, [&](ValueId v) { return constant_near(v, 0.5); }) != product->outputs[0])
        return std::nullopt;
      m.nodes.insert(half->id);
      m.last = half->id;
    } else {
      // (x * 0.5) * (1 + erf)
      const Node* half = readers_.single_use_producer(other);
      if (!half || half->op != "Mul" ||
          other_operand(*half, [&](ValueId v) { return constant_near(v, 0.5); }) != m.x)
        return std::nullopt;
      m.nodes.insert(half->id);
      m.last = product->id;
    }
    // Same shape in and out: no broadcasting hides in the pattern.
    if (graph_.value(graph_.node(m.last).outputs[0]).type != graph_.value(m.x).type) return std::nullopt;
    return m;
  }

 private:

  bool constant_near(ValueId value, double expected) const {
    const Value& v = graph_.value(value);
    const std::optional<double> scalar = float_scalar(v);
    return scalar && near(*scalar, expected, v.type.dtype);
  }

  // For a binary node with one operand satisfying `is_this`, the other one (-1 if neither does).
  template <class Pred> ValueId other_operand(const Node& node, Pred is_this) const {
    if (node.inputs.size() != 2) return -1;
    if (is_this(node.inputs[1])) return node.inputs[0];
    if (is_this(node.inputs[0])) return node.inputs[1];
    return -1;
  }

  const Graph& graph_;
  Readers readers_;
};

}  // namespace

PassResult recognise_gelu(const Graph& graph) {
  const Matcher matcher(graph);
  std::map<NodeId, GeluMatch> by_last;
  std::set<NodeId> replaced;
  for (const Node& node : graph.nodes()) {
    std::optional<GeluMatch> m = matcher.match(node);
    if (!m) continue;
    replaced.insert(m->nodes.begin(), m->nodes.end());
    by_last.emplace(m->last, std::move(*m));
  }

  Rewriter rw(graph, Rewriter::Constants::keep_used);
  PassReport report{"recognise_gelu", 0, {}};
  for (const Node& node : graph.nodes()) {
    auto found = by_last.find(node.id);
    if (found == by_last.end()) {
      if (replaced.count(node.id) == 0) rw.copy_node(node);
      continue;
    }
    Node gelu = node;
    gelu.op = "Gelu";
    Attributes attrs;
    attrs.set("approximate", std::string("none"));
    rw.copy_node(gelu, {rw.map(found->second.x)}, std::move(attrs));
    report.details.push_back("replaced 5 nodes ending in '" + node.name + "' with Gelu");
  }
  report.changes = static_cast<int>(report.details.size());
  return {rw.finish(), std::move(report)};
}

}  // namespace kiln::graph::passes

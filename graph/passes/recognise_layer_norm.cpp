// recognise_layer_norm: the LayerNorm that torch.onnx.export (opset < 17)
// spells out as
//   mean = ReduceMean(x, axes); d = Sub(x, mean); v = ReduceMean(Pow(d, 2), axes)
//   y = Div(d, Sqrt(Add(v, eps)))  [ y = Mul(y, scale) ] [ y = Add(y, bias) ]
// becomes one LayerNormalization: one kernel instead of up to nine, and a
// single op that later fusion can reason about.
#include "graph/passes/passes.h"
#include "graph/passes/rewrite.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>

namespace kiln::graph::passes {

namespace {

struct LayerNormMatch {
  std::set<NodeId> nodes;  // every node of the pattern, replaced together
  NodeId last = kNoNode;   // the node whose output the LayerNormalization takes over
  ValueId x = -1;
  std::int64_t axis = -1;
  double epsilon = 0;
  std::optional<Tensor> scale, bias;
};

class Matcher {
 public:
  explicit Matcher(const Graph& graph) : graph_(graph), readers_(graph) {}

  // The node producing `value` if it has op `op` and `value` has no other reader.
  const Node* single_use_producer(ValueId value, const char* op, int allowed_uses = 1) const {
    const Node* node = readers_.single_use_producer(value, allowed_uses);
    return node != nullptr && node->op == op ? node : nullptr;
  }

  // The one-element float constant's value.
  std::optional<double> scalar(ValueId value) const { return float_scalar(graph_.value(value)); }

  // A constant of `dtype` (x's: the LayerNormalization's scale and bias).
  const Tensor* float_constant(ValueId value, DType dtype) const {
    const Value& v = graph_.value(value);
    return v.constant && v.type.dtype == dtype ? &*v.constant : nullptr;
  }

  // The normalised axis of a ReduceMean over the trailing axes with keepdims.
  std::optional<std::int64_t> trailing_axis(const Node& reduce, std::int64_t rank) const {
    if (reduce.attrs.get_int("keepdims", 1) != 1 || !reduce.attrs.has("axes")) return std::nullopt;
    std::set<std::int64_t> axes;
    for (std::int64_t a : reduce.attrs.get_ints("axes", {})) axes.insert(a < 0 ? a + rank : a);
    if (axes.empty() || *axes.rbegin() != rank - 1 || *axes.begin() < 0) return std::nullopt;
    if (static_cast<std::int64_t>(axes.size()) != rank - *axes.begin()) return std::nullopt;  // not contiguous
    return *axes.begin();
  }

  std::optional<LayerNormMatch> match(const Node& div) const {
    if (div.op != "Div") return std::nullopt;
    LayerNormMatch m;
    // d = Sub(x, mean) is read by Pow and Div.
    const Node* sub = single_use_producer(div.inputs[0], "Sub", 2);
    const Node* sqrt = single_use_producer(div.inputs[1], "Sqrt");
    if (!sub || !sqrt) return std::nullopt;
    m.x = sub->inputs[0];
    const TensorType& xt = graph_.value(m.x).type;
    if (!is_float_weight(xt.dtype) || xt.shape.empty()) return std::nullopt;
    const auto rank = static_cast<std::int64_t>(xt.shape.size());
    const Node* mean = single_use_producer(sub->inputs[1], "ReduceMean");
    if (!mean || mean->inputs[0] != m.x) return std::nullopt;
    const auto axis = trailing_axis(*mean, rank);
    if (!axis) return std::nullopt;
    m.axis = *axis;

    const Node* add = single_use_producer(sqrt->inputs[0], "Add");
    if (!add) return std::nullopt;
    // Add(var, eps) in either operand order.
    for (int side = 0; side < 2 && m.epsilon == 0; ++side) {
      const auto eps = scalar(add->inputs[static_cast<std::size_t>(1 - side)]);
      const Node* var = single_use_producer(add->inputs[static_cast<std::size_t>(side)], "ReduceMean");
      if (!eps || *eps <= 0 || !var || trailing_axis(*var, rank) != axis) continue;
      const Node* pow = single_use_producer(var->inputs[0], "Pow");
      if (!pow || pow->inputs[0] != sub->outputs[0] || scalar(pow->inputs[1]) != 2.0) continue;
      m.epsilon = *eps;
      m.nodes.insert({var->id, pow->id});
    }
    if (m.epsilon == 0) return std::nullopt;
    m.nodes.insert({mean->id, sub->id, add->id, sqrt->id, div.id});
    m.last = div.id;

    // Optional affine part: Mul(y, scale) then Add(y, bias), either order each.
    const Shape normalized(xt.shape.begin() + m.axis, xt.shape.end());
    ValueId y = div.outputs[0];
    if (const Node* mul = readers_.single_consumer(y, "Mul")) {
      if (auto scale = affine_constant(*mul, y, normalized)) {
        m.scale = std::move(scale);
        m.nodes.insert(mul->id);
        m.last = mul->id;
        y = mul->outputs[0];
      }
    }
    if (const Node* add_bias = readers_.single_consumer(y, "Add"); add_bias && m.scale) {
      if (auto bias = affine_constant(*add_bias, y, normalized)) {
        m.bias = std::move(bias);
        m.nodes.insert(add_bias->id);
        m.last = add_bias->id;
      }
    }
    return m;
  }

 private:
  // The other operand of a binary node reading `y`, if it is a constant of y's type
  // with the normalised shape (leading 1s allowed), reshaped to that shape.
  std::optional<Tensor> affine_constant(const Node& node, ValueId y, const Shape& normalized) const {
    const ValueId other = node.inputs[0] == y ? node.inputs[1] : node.inputs[0];
    const Tensor* t = float_constant(other, graph_.value(y).type.dtype);
    if (!t || node.outputs.size() != 1 || graph_.value(node.outputs[0]).type.shape != graph_.value(y).type.shape)
      return std::nullopt;
    Shape trimmed = t->shape();
    while (trimmed.size() > normalized.size() && trimmed.front() == 1) trimmed.erase(trimmed.begin());
    if (trimmed != normalized) return std::nullopt;
    return t->reshaped(normalized);
  }

  const Graph& graph_;
  Readers readers_;
};

}  // namespace

PassResult recognise_layer_norm(const Graph& graph) {
  const Matcher matcher(graph);
  std::map<NodeId, LayerNormMatch> by_last;  // the node that emits each replacement
  std::set<NodeId> replaced;
  for (const Node& node : graph.nodes()) {
    std::optional<LayerNormMatch> m = matcher.match(node);
    if (!m) continue;
    replaced.insert(m->nodes.begin(), m->nodes.end());
    by_last.emplace(m->last, std::move(*m));
  }

  Rewriter rw(graph, Rewriter::Constants::keep_used);
  PassReport report{"recognise_layer_norm", 0, {}};
  for (const Node& node : graph.nodes()) {
    auto found = by_last.find(node.id);
    if (found == by_last.end()) {
      if (replaced.count(node.id) == 0) rw.copy_node(node);
      continue;
    }
    LayerNormMatch& m = found->second;
    const Shape normalized(graph.value(m.x).type.shape.begin() + m.axis, graph.value(m.x).type.shape.end());
    const DType dtype = graph.value(m.x).type.dtype;
    Tensor scale = m.scale ? *m.scale : Tensor(DType::f32, normalized);
    if (!m.scale) {
      for (float& v : scale.values<float>()) v = 1.0f;
      if (dtype != DType::f32) scale = scale.to(dtype);
    }
    std::vector<ValueId> inputs{rw.map(m.x), rw.add_constant(node.name + ".scale", std::move(scale))};
    if (m.bias) inputs.push_back(rw.add_constant(node.name + ".bias", std::move(*m.bias)));
    Attributes attrs;
    attrs.set("axis", m.axis);
    attrs.set("epsilon", m.epsilon);
    Node layer_norm = node;
    layer_norm.op = "LayerNormalization";
    rw.copy_node(layer_norm, std::move(inputs), std::move(attrs));
    report.details.push_back("replaced " + std::to_string(m.nodes.size()) + " nodes ending in '" + node.name +
                             "' with LayerNormalization (axis " + std::to_string(m.axis) + ")");
  }
  report.changes = static_cast<int>(report.details.size());
  return {rw.finish(), std::move(report)};
}

}  // namespace kiln::graph::passes

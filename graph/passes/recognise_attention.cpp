// recognise_attention: scaled dot-product attention as models spell it,
//   MatMul(Softmax(MatMul(Q, K^T) * scale [+ mask]), V)
// with the scale as a Mul or Div by a scalar constant on the scores, on Q or
// on K^T (torch's exported scaled_dot_product_attention scales both by
// sqrt(scale)), becomes one Attention (graph/ops/attention.cpp), which lowers
// to one kernel: the scores never reach memory. When K^T comes from a
// Transpose only the pattern reads, that Transpose is changed to produce K
// instead (same cost, and the kernel then reads K's rows with vector loads).
//
#include "graph/passes/passes.h"
#include "graph/passes/rewrite.h"

#include "graph/broadcast.h"

#include <map>
#include <optional>
#include <set>
#include <utility>

namespace kiln::graph::passes {

namespace {

// The largest head dimension the attention kernel takes
// (shaders::kMaxAttentionHeadDim); larger heads keep the decomposed ops.
constexpr std::int64_t kMaxHeadDim = 256;

struct AttentionMatch {
  std::set<NodeId> nodes;
  NodeId last = kNoNode;  // the MatMul with V
  ValueId q = -1, k = -1, v = -1, mask = -1;
  // Set when K^T is Transpose(k_source, perm) that only the pattern reads:
  // the Attention then reads Transpose(k_source, k_perm) as K.
  const Node* k_transpose = nullptr;
  std::vector<std::int64_t> k_perm;
  double scale = 1.0;
};

class Matcher {
 public:
  explicit Matcher(const Graph& graph) : graph_(graph), readers_(graph) {}

  std::optional<AttentionMatch> match(const Node& softmax) const {
    if (softmax.op != "Softmax") return std::nullopt;
    const Shape& scores_shape = graph_.value(softmax.inputs[0]).type.shape;
    const auto rank = static_cast<std::int64_t>(scores_shape.size());
    if (rank != 3 && rank != 4) return std::nullopt;
    const std::int64_t axis = softmax.attrs.get_int("axis", -1);
    if (axis != -1 && axis != rank - 1) return std::nullopt;

    AttentionMatch m;
    m.nodes.insert(softmax.id);
    const Node* context = readers_.single_consumer(softmax.outputs[0], "MatMul");
    if (!context || context->inputs[0] != softmax.outputs[0]) return std::nullopt;
    m.nodes.insert(context->id);
    m.last = context->id;
    m.v = context->inputs[1];

    // Backwards from the softmax: [Add mask], [Mul/Div scale], MatMul(Q, K^T).
    ValueId scores = softmax.inputs[0];
    if (const Node* add = readers_.single_use_producer(scores); add && add->op == "Add") {
      const int side = scores_side(*add);
      if (side < 0) return std::nullopt;
      m.nodes.insert(add->id);
      scores = add->inputs[static_cast<std::size_t>(side)];
      m.mask = add->inputs[static_cast<std::size_t>(1 - side)];
    }
    scores = absorb_scale(scores, m);
    const Node* product = readers_.single_use_producer(scores);
    if (!product || product->op != "MatMul") return std::nullopt;
    m.nodes.insert(product->id);
    m.q = absorb_scale(product->inputs[0], m);
    const ValueId k_transposed = absorb_scale(product->inputs[1], m);
    m.k = k_transposed;
    if (const Node* transpose = readers_.single_use_producer(k_transposed); transpose && transpose->op == "Transpose") {
      std::vector<std::int64_t> perm = transpose->attrs.get_ints("perm", {});
      if (perm.size() == static_cast<std::size_t>(rank)) {
        std::swap(perm[perm.size() - 2], perm[perm.size() - 1]);
        m.nodes.insert(transpose->id);
        m.k_transpose = transpose;
        m.k_perm = std::move(perm);
      }
    }
    if (!shapes_fit(m, scores_shape)) return std::nullopt;
    return m;
  }

 private:
  // Which input of the mask Add carries the scores (the one a MatMul, maybe
  // scaled, produces and that already has the scores' shape), or -1.
  int scores_side(const Node& add) const {
    const Shape& out = graph_.value(add.outputs[0]).type.shape;
    for (int side : {0, 1}) {
      const ValueId candidate = add.inputs[static_cast<std::size_t>(side)];
      const ValueId other = add.inputs[static_cast<std::size_t>(1 - side)];
      const Node* producer = readers_.single_use_producer(candidate);
      if (!producer || graph_.value(candidate).type.shape != out) continue;
      if (graph_.value(other).type.dtype != graph_.value(add.outputs[0]).type.dtype ||
          !is_broadcastable_to(graph_.value(other).type.shape, out))
        continue;
      if (producer->op == "MatMul" || producer->op == "Mul" || producer->op == "Div") return side;
    }
    return -1;
  }

  // If `value` is Mul(x, c), Mul(c, x) or Div(x, c) with a scalar f32
  // constant c and x of value's type, read only here: multiplies the scale
  // into `m`, records the node and returns x. Otherwise returns `value`.
  ValueId absorb_scale(ValueId value, AttentionMatch& m) const {
    const Node* node = readers_.single_use_producer(value);
    if (!node || (node->op != "Mul" && node->op != "Div") || node->inputs.size() != 2) return value;
    for (std::size_t side : {std::size_t{1}, std::size_t{0}}) {
      if (node->op == "Div" && side == 0) break;
      const std::optional<double> c = scalar_constant(node->inputs[side]);
      const ValueId x = node->inputs[1 - side];
      if (!c || graph_.value(x).type != graph_.value(value).type) continue;
      if (node->op == "Div" && *c == 0.0) return value;
      m.scale *= node->op == "Mul" ? *c : 1.0 / *c;
      m.nodes.insert(node->id);
      return x;
    }
    return value;
  }

  // Q [*b, Lq, D], K^T [*b, D, Lk], V [*b, Lk, Dv], all of one float type
  // (f32, f16 or bf16), no broadcasting between them; the scores' shape is
  // [*b, Lq, Lk].
  bool shapes_fit(const AttentionMatch& m, const Shape& scores) const {
    const DType dtype = graph_.value(m.q).type.dtype;
    if (!is_float_weight(dtype)) return false;
    for (ValueId v : {m.q, m.k, m.v})
      if (graph_.value(v).type.dtype != dtype || graph_.value(v).type.dynamic) return false;
    const Shape& q = graph_.value(m.q).type.shape;
    const Shape& kt = graph_.value(m.k).type.shape;
    const Shape& v = graph_.value(m.v).type.shape;
    const std::size_t rank = scores.size();
    if (q.size() != rank || kt.size() != rank || v.size() != rank) return false;
    const Shape batch(scores.begin(), scores.end() - 2);
    for (const Shape* s : {&q, &kt, &v})
      if (Shape(s->begin(), s->end() - 2) != batch) return false;
    const std::int64_t lq = scores[rank - 2], lk = scores[rank - 1], d = q[rank - 1];
    return q[rank - 2] == lq && kt[rank - 2] == d && kt[rank - 1] == lk && v[rank - 2] == lk && d <= kMaxHeadDim;
  }

  std::optional<double> scalar_constant(ValueId value) const { return float_scalar(graph_.value(value)); }


  const Graph& graph_;
  Readers readers_;
};

bool is_identity(const std::vector<std::int64_t>& perm) {
  for (std::size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<std::int64_t>(i)) return false;
  return true;
}

}  // namespace

PassResult recognise_attention(const Graph& graph) {
  PassReport report{"recognise_attention", 0, {}};
  // For A/B measurements of the attention kernel against the decomposed ops.
  const Matcher matcher(graph);
  std::map<NodeId, AttentionMatch> by_last;
  std::set<NodeId> replaced;
  for (const Node& node : graph.nodes()) {
    std::optional<AttentionMatch> m = matcher.match(node);
    if (!m) continue;
    replaced.insert(m->nodes.begin(), m->nodes.end());
    by_last.emplace(m->last, std::move(*m));
  }

  Rewriter rw(graph, Rewriter::Constants::keep_used);
  for (const Node& node : graph.nodes()) {
    auto found = by_last.find(node.id);
    if (found == by_last.end()) {
      if (replaced.count(node.id) == 0) rw.copy_node(node);
      continue;
    }
    const AttentionMatch& m = found->second;
    ValueId k = -1;
    bool k_transposed = true;
    if (m.k_transpose) {
      // K^T = Transpose(x, perm) becomes K = Transpose(x, perm with its last two swapped).
      const ValueId source = rw.map(m.k_transpose->inputs[0]);
      k_transposed = false;
      if (is_identity(m.k_perm)) {
        k = source;
      } else {
        Attributes perm;
        perm.set("perm", m.k_perm);
        k = rw.copy_node(*m.k_transpose, {source}, std::move(perm))[0];
      }
    } else {
      k = rw.map(m.k);
    }
    Attributes attrs;
    attrs.set("scale", m.scale);
    attrs.set("k_transposed", std::int64_t{k_transposed ? 1 : 0});
    std::vector<ValueId> inputs = {rw.map(m.q), k, rw.map(m.v)};
    if (m.mask >= 0) inputs.push_back(rw.map(m.mask));
    Node attention = node;
    attention.op = "Attention";
    rw.copy_node(attention, std::move(inputs), std::move(attrs));
    report.details.push_back("replaced " + std::to_string(m.nodes.size()) + " nodes ending in '" + node.name +
                             "' with Attention" + (m.mask >= 0 ? " (masked)" : ""));
  }
  report.changes = static_cast<int>(report.details.size());
  return {rw.finish(), std::move(report)};
}

}  // namespace kiln::graph::passes

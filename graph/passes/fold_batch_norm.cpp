// fold_batch_norm: y = (conv(x, W) + b - mean) * scale / sqrt(var + eps) + B
// is conv(x, W') + b' with W'[o] = W[o] * k[o], b' = (b - mean) * k + B,
// k = scale / sqrt(var + eps): one kernel and one pass over memory fewer.
#include "graph/passes/passes.h"
#include "graph/passes/rewrite.h"
#include "src/base/check.h"

#include <cmath>
#include <map>
#include <set>

namespace kiln::graph::passes {

namespace {

bool is_float_constant(const Graph& graph, ValueId id) {
  if (id < 0) return false;
  const Value& v = graph.value(id);
  return v.constant.has_value() && is_float_weight(v.type.dtype);
}

// A constant's values in f32 (16-bit ones widened exactly).
Tensor widened(const Graph& graph, ValueId id) {
  const Tensor& t = *graph.value(id).constant;
  return t.dtype() == DType::f32 ? t : t.to(DType::f32);
}

// The Conv feeding `bn` if the pair can be folded, else kNoNode.
NodeId foldable_conv(const Graph& graph, const Node& bn, const std::vector<int>& uses) {
  const ValueId x = bn.inputs[0];
  const NodeId producer = graph.value(x).producer;
  if (producer == kNoNode || uses[static_cast<std::size_t>(x)] != 1) return kNoNode;
  const Node& conv = graph.node(producer);
  if (conv.op != "Conv" || !conv.attrs.get_string("activation", "").empty()) return kNoNode;
  if (!is_float_constant(graph, conv.inputs[1])) return kNoNode;
  if (conv.inputs.size() > 2 && conv.inputs[2] >= 0 && !is_float_constant(graph, conv.inputs[2])) return kNoNode;
  for (std::size_t i = 1; i < 5; ++i)
    if (i >= bn.inputs.size() || !is_float_constant(graph, bn.inputs[i])) return kNoNode;
  return producer;
}

struct FoldedParameters {
  Tensor weight;
  Tensor bias;
};

FoldedParameters fold(const Graph& graph, const Node& conv, const Node& bn) {
  // 16-bit parameters fold in f32, the results rounded once to the weight's type.
  const DType dtype = graph.value(conv.inputs[1]).type.dtype;
  const Tensor weight = widened(graph, conv.inputs[1]);
  const bool has_bias = conv.inputs.size() > 2 && conv.inputs[2] >= 0;
  const Tensor conv_bias = has_bias ? widened(graph, conv.inputs[2]) : Tensor();
  const Tensor params[] = {widened(graph, bn.inputs[1]), widened(graph, bn.inputs[2]), widened(graph, bn.inputs[3]),
                           widened(graph, bn.inputs[4])};
  const auto scale = params[0].values<float>(), shift = params[1].values<float>(), mean = params[2].values<float>(),
             var = params[3].values<float>();
  const double epsilon = bn.attrs.get_float("epsilon", 1e-5);

  const std::int64_t channels = weight.shape()[0];
  KILN_ASSERT(static_cast<std::int64_t>(scale.size()) == channels && scale.size() == var.size() &&
              scale.size() == mean.size() && scale.size() == shift.size());
  const std::int64_t per_channel = weight.numel() / channels;

  FoldedParameters folded{Tensor(DType::f32, weight.shape()), Tensor(DType::f32, {channels})};
  const auto w = weight.values<float>();
  auto w_out = folded.weight.values<float>();
  auto b_out = folded.bias.values<float>();
  for (std::int64_t o = 0; o < channels; ++o) {
    const double k = static_cast<double>(scale[o]) / std::sqrt(static_cast<double>(var[o]) + epsilon);
    for (std::int64_t j = 0; j < per_channel; ++j) {
      const std::int64_t at = o * per_channel + j;
      w_out[at] = static_cast<float>(static_cast<double>(w[at]) * k);
    }
    const double b = has_bias ? static_cast<double>(conv_bias.values<float>()[o]) : 0.0;
    b_out[o] = static_cast<float>((b - static_cast<double>(mean[o])) * k + static_cast<double>(shift[o]));
  }
  if (dtype != DType::f32) folded = {folded.weight.to(dtype), folded.bias.to(dtype)};
  return folded;
}

}  // namespace

PassResult fold_batch_norm(const Graph& graph) {
  const std::vector<int> uses = graph.use_counts();
  std::map<NodeId, NodeId> bn_of_conv;
  std::set<NodeId> folded_bns;
  for (const Node& node : graph.nodes()) {
    if (node.op != "BatchNormalization") continue;
    const NodeId conv = foldable_conv(graph, node, uses);
    if (conv == kNoNode) continue;
    bn_of_conv[conv] = node.id;
    folded_bns.insert(node.id);
  }

  Rewriter rw(graph);
  PassReport report{"fold_batch_norm", 0, {}};
  for (const Node& node : graph.nodes()) {
    auto pair = bn_of_conv.find(node.id);
    if (pair != bn_of_conv.end()) {
      const Node& bn = graph.node(pair->second);
      FoldedParameters folded = fold(graph, node, bn);
      ValueId weight = rw.add_constant(node.name + ".folded_weight", std::move(folded.weight));
      ValueId bias = rw.add_constant(node.name + ".folded_bias", std::move(folded.bias));
      std::vector<ValueId> out = rw.copy_node(node, {rw.map(node.inputs[0]), weight, bias}, node.attrs);
      rw.replace(bn.outputs[0], out[0]);
      report.details.push_back("folded BatchNormalization '" + bn.name + "' into Conv '" + node.name + "'");
      continue;
    }
    if (folded_bns.count(node.id) != 0) continue;  // folded into its Conv above
    rw.copy_node(node);
  }
  report.changes = static_cast<int>(report.details.size());
  return {rw.finish(), std::move(report)};
}

}  // namespace kiln::graph::passes

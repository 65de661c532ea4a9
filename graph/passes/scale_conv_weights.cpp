// scale_conv_weights: a per-input-channel scale in front of a convolution,
//   Conv(Mul(x, s), W)  with s [1, C, 1, 1] (squeeze-and-excitation's gate),
// is the same convolution of x with the weight scaled per input channel,
//   Conv(x, Mul(W, s)),
// because every weight tap of input channel c multiplies x[c] alone. Where
// the weight has fewer elements than a large x (a 1x1 projection of a large
// feature map), the Mul then runs over far fewer elements. Batch 1 only:
// with N samples each would need its own weight. KILN_NO_SCALE_WEIGHTS=1
// turns it off.
#include "graph/passes/passes.h"
#include "graph/passes/rewrite.h"

#include <map>
#include <set>
#include <string>

namespace kiln::graph::passes {

namespace {

// Below this many activation elements the multiply costs about what a
// dispatch does, and the scheduler often inlines it into the convolution's
// loads (a prologue) anyway; moved onto the weight it would be a dispatch of
// its own.
constexpr std::int64_t kMinScaledActivation = 16384;

struct ScaledConv {
  NodeId mul = kNoNode;
  ValueId x = -1;      // the activation, [1, C, H, W]
  ValueId scale = -1;  // the per-channel scale, [1, C, 1, 1] or [C, 1, 1]
};

// True when `scale` is one value per channel of `x` ([1, C, H, W]): [1, C, 1, 1] or [C, 1, 1].
bool is_channel_scale(const Shape& scale, const Shape& x) {
  if (scale.size() != 3 && scale.size() != 4) return false;
  if (scale.size() == 4 && scale[0] != 1) return false;
  const std::size_t c = scale.size() - 3;
  return scale[c] == x[1] && scale[c + 1] == 1 && scale[c + 2] == 1;
}

}  // namespace

PassResult scale_conv_weights(const Graph& graph) {
  PassReport report{"scale_conv_weights", 0, {}};
  // For A/B measurements against the multiply on the activation.
  const std::vector<int> uses = graph.use_counts();
  const std::vector<std::vector<NodeId>> users = consumers(graph);
  std::map<NodeId, ScaledConv> by_conv;
  std::set<NodeId> moved_muls;
  for (const Node& conv : graph.nodes()) {
    if (conv.op != "Conv" || conv.attrs.get_int("group", 1) != 1) continue;
    // A pre-packed weight (pack_weights) is not laid out per input channel.
    if (conv.attrs.get_string("weight_layout", "OIhw") != "OIhw") continue;
    const Value& weight = graph.value(conv.inputs[1]);
    const auto input = static_cast<std::size_t>(conv.inputs[0]);
    const NodeId producer = graph.value(conv.inputs[0]).producer;
    if (producer == kNoNode || uses[input] != 1 || users[input].size() != 1) continue;
    const Node& mul = graph.node(producer);
    if (mul.op != "Mul" || !weight.constant || !is_float_weight(weight.type.dtype)) continue;
    for (std::size_t side = 0; side < 2; ++side) {
      const ValueId x = mul.inputs[side], scale = mul.inputs[1 - side];
      const TensorType& x_type = graph.value(x).type;
      if (x_type.dynamic || x_type != graph.value(mul.outputs[0]).type || x_type.shape.size() != 4 ||
          x_type.shape[0] != 1)
        continue;
      // A constant scale would make the weight's Mul run on constants at every call.
      if (graph.value(scale).constant || !is_channel_scale(graph.value(scale).type.shape, x_type.shape)) continue;
      // Only where the weight is the smaller operand to scale, and x is large.
      const std::int64_t activation = num_elements(x_type.shape);
      if (activation < kMinScaledActivation || num_elements(weight.type.shape) >= activation) continue;
      by_conv[conv.id] = {mul.id, x, scale};
      moved_muls.insert(mul.id);
      break;
    }
  }

  Rewriter rw(graph);
  for (const Node& node : graph.nodes()) {
    if (moved_muls.count(node.id) != 0) continue;  // re-emitted on the weight, just before its Conv
    auto found = by_conv.find(node.id);
    if (found == by_conv.end()) {
      rw.copy_node(node);
      continue;
    }
    const ScaledConv& m = found->second;
    const Node& mul = graph.node(m.mul);
    // The same multiply, so it keeps its node and value names.
    const ValueId scaled_weight = rw.copy_node(mul, {rw.map(node.inputs[1]), rw.map(m.scale)}, mul.attrs)[0];
    std::vector<ValueId> inputs = {rw.map(m.x), scaled_weight};
    for (std::size_t i = 2; i < node.inputs.size(); ++i) inputs.push_back(rw.map(node.inputs[i]));  // the bias
    rw.copy_node(node, std::move(inputs), node.attrs);
    report.details.push_back("moved the channel scale '" + mul.name + "' onto the weight of Conv '" + node.name +
                             "' (" + std::to_string(num_elements(graph.value(node.inputs[1]).type.shape)) +
                             " elements instead of " +
                             std::to_string(num_elements(graph.value(m.x).type.shape)) + ")");
  }
  report.changes = static_cast<int>(report.details.size());
  return {rw.finish(), std::move(report)};
}

}  // namespace kiln::graph::passes

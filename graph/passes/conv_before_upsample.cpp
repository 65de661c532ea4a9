// conv_before_upsample: a 1x1 convolution of channel-concatenated parts,
//   Conv(Concat(p_0, ..., p_k), W) + b,
// is the sum of the convolutions of the parts with the matching slices of W,
//   Conv(p_0, W_0) + ... + Conv(p_k, W_k) + b,
// and where a part is an upsampling Resize, Conv(Resize(v), W_i) =
// Resize(Conv(v, W_i)): a 1x1 convolution mixes channels at each pixel and a
// Resize (any mode) combines pixels of each channel alike, so the two commute.
// The convolution then runs at the part's lower resolution. Decode heads that
// upsample several feature maps, concatenate them and fuse them with a 1x1
// convolution (SegFormer's, FPN-style heads) do 3x fewer multiplies this way.
// The parts that are not resized keep one Conv over their own Concat, which
// takes the bias (else an Add after the sum); the fused activation follows
// the sum. Reassociates a sum: exact up to rounding.
#include "graph/passes/passes.h"
#include "graph/passes/rewrite.h"

#include <algorithm>
#include <map>
#include <utility>
#include <set>
#include <string>
#include <vector>

namespace kiln::graph::passes {

namespace {

struct Part {
  ValueId value = -1;              // the Concat input
  const Node* resize = nullptr;    // its producer, when moved below the convolution
  std::int64_t channels = 0;
};

// A Conv to split: its Concat's attributes and the concatenated parts.
struct Split {
  Attributes concat_attrs;
  std::vector<Part> parts;
};

bool is_pointwise_conv(const Graph& graph, const Node& conv) {
  if (conv.op != "Conv" || conv.attrs.get_int("group", 1) != 1) return false;
  if (conv.attrs.get_string("weight_layout", "OIhw") != "OIhw") return false;
  const std::string activation = conv.attrs.get_string("activation", "");
  if (!activation.empty() && activation != "Relu") return false;
  const Value& weight = graph.value(conv.inputs[1]);
  const Shape& w = weight.type.shape;
  if (!weight.constant || !is_float_weight(weight.type.dtype) || w.size() != 4 || w[2] != 1 || w[3] != 1) return false;
  const auto all_equal = [&](const char* name, std::int64_t value) {
    const std::vector<std::int64_t> values = conv.attrs.get_ints(name, {});
    return std::all_of(values.begin(), values.end(), [&](std::int64_t v) { return v == value; });
  };
  if (!all_equal("strides", 1) || !all_equal("pads", 0)) return false;
  // A computed bias would need an Add of its own; fold_batch_norm leaves constants.
  if (conv.inputs.size() > 2 && conv.inputs[2] >= 0 && !graph.value(conv.inputs[2]).constant) return false;
  return conv.attrs.get_string("auto_pad", "NOTSET") == "NOTSET";
}

// A Resize that only changes H and W, upsampling, with its output size given
// by the `sizes` attribute (so the moved copy can say its channel count).
bool is_movable_upsample(const Graph& graph, const Node& resize) {
  if (resize.op != "Resize" || resize.inputs.size() != 1 || !resize.attrs.has("sizes")) return false;
  if (resize.attrs.get_string("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize") return false;
  // `sizes` must be per axis of the whole tensor (no `axes` subset) and taken as given.
  if (resize.attrs.has("axes") || resize.attrs.get_string("keep_aspect_ratio_policy", "stretch") != "stretch")
    return false;
  const TensorType& in = graph.value(resize.inputs[0]).type;
  const TensorType& out = graph.value(resize.outputs[0]).type;
  if (in.dynamic || in.shape.size() != 4 || in.shape[0] != out.shape[0] || in.shape[1] != out.shape[1]) return false;
  return in.shape[2] * in.shape[3] < out.shape[2] * out.shape[3];
}

// The input-channel ranges (first, count) of a [Co, Ci, 1, 1] weight, in order.
Tensor weight_columns(const Tensor& weight, const std::vector<std::pair<std::int64_t, std::int64_t>>& ranges) {
  const Shape& w = weight.shape();
  const auto from = weight.values<float>();
  std::int64_t columns = 0;
  for (const auto& [first, count] : ranges) columns += count;
  std::vector<float> out;
  out.reserve(static_cast<std::size_t>(w[0] * columns));
  for (std::int64_t o = 0; o < w[0]; ++o)
    for (const auto& [first, count] : ranges)
      for (std::int64_t c = 0; c < count; ++c) out.push_back(from[static_cast<std::size_t>(o * w[1] + first + c)]);
  return Tensor::from_f32({w[0], columns, 1, 1}, std::move(out));
}

}  // namespace

PassResult conv_before_upsample(const Graph& graph) {
  PassReport report{"conv_before_upsample", 0, {}};
  const Readers readers(graph);
  std::map<NodeId, Split> splits;  // by Conv
  std::set<NodeId> absorbed;       // Concats and moved Resizes, re-emitted per part
  for (const Node& conv : graph.nodes()) {
    if (!is_pointwise_conv(graph, conv)) continue;
    const Node* concat = readers.single_use_producer(conv.inputs[0]);
    if (concat == nullptr || concat->op != "Concat" || concat->inputs.size() < 2) continue;
    const std::int64_t axis = concat->attrs.get_int("axis", 0);
    if (axis != 1 && axis != -3) continue;
    Split split{concat->attrs, {}};
    bool any_moved = false, fits = true;
    for (ValueId input : concat->inputs) {
      const TensorType& t = graph.value(input).type;
      if (t.dynamic || t.shape.size() != 4) {
        fits = false;
        break;
      }
      Part part{input, nullptr, t.shape[1]};
      // A value the Concat reads twice has no single-use producer.
      const Node* producer = readers.single_use_producer(input);
      if (producer != nullptr && is_movable_upsample(graph, *producer)) part.resize = producer;
      any_moved = any_moved || part.resize != nullptr;
      split.parts.push_back(part);
    }
    if (!fits || !any_moved) continue;
    absorbed.insert(concat->id);
    for (const Part& part : split.parts)
      if (part.resize != nullptr) absorbed.insert(part.resize->id);
    splits[conv.id] = std::move(split);
  }

  Rewriter rw(graph);
  for (const Node& node : graph.nodes()) {
    if (absorbed.count(node.id) != 0) continue;
    const auto found = splits.find(node.id);
    if (found == splits.end()) {
      rw.copy_node(node);
      continue;
    }
    const Node& conv = node;
    const Tensor& weight = *graph.value(conv.inputs[1]).constant;
    const std::int64_t out_channels = weight.shape()[0];
    const bool has_bias = conv.inputs.size() > 2 && conv.inputs[2] >= 0;
    Attributes part_attrs;
    for (const auto& [name, value] : conv.attrs.all())
      if (name != "activation") part_attrs.set(name, value);
    const std::vector<Part>& parts = found->second.parts;
    const Attributes& concat_attrs = found->second.concat_attrs;
    // The parts that stay at full resolution share one Conv (over their own
    // Concat when there are several); each upsampled part gets its own.
    std::vector<std::int64_t> first_channel;
    std::int64_t channel = 0;
    std::vector<std::size_t> kept;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      first_channel.push_back(channel);
      channel += parts[i].channels;
      if (parts[i].resize == nullptr) kept.push_back(i);
    }
    const bool bias_on_kept = has_bias && !kept.empty();
    ValueId sum = -1;
    const auto accumulate = [&](ValueId term, const std::string& name) {
      sum = sum < 0 ? term : rw.add_node("Add", {sum, term}, {}, name)[0];
    };
    if (!kept.empty()) {
      std::vector<ValueId> kept_values;
      std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
      for (std::size_t i : kept) {
        kept_values.push_back(rw.map(parts[i].value));
        ranges.push_back({first_channel[i], parts[i].channels});
      }
      const ValueId input = kept_values.size() == 1
                                ? kept_values[0]
                                : rw.add_node("Concat", kept_values, concat_attrs, conv.name + ".full_resolution")[0];
      std::vector<ValueId> inputs = {input, rw.add_constant(conv.name + ".full_resolution.weight",
                                                            rewrite_in_f32(weight, [&](const Tensor& w) { return weight_columns(w, ranges); }))};
      if (bias_on_kept) inputs.push_back(rw.map(conv.inputs[2]));
      accumulate(rw.add_node("Conv", std::move(inputs), part_attrs, conv.name + ".full_resolution")[0],
                 conv.name + ".sum");
    }
    int moved = 0;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const Part& part = parts[i];
      if (part.resize == nullptr) continue;
      const std::string name = conv.name + ".part" + std::to_string(i);
      const ValueId part_weight =
          rw.add_constant(name + ".weight", rewrite_in_f32(weight, [&](const Tensor& w) { return weight_columns(w, {{first_channel[i], part.channels}}); }));
      const ValueId term = rw.add_node("Conv", {rw.map(part.resize->inputs[0]), part_weight}, part_attrs, name)[0];
      Attributes resize_attrs = part.resize->attrs;
      std::vector<std::int64_t> sizes = resize_attrs.get_ints("sizes", {});
      sizes[1] = out_channels;
      resize_attrs.set("sizes", sizes);
      accumulate(rw.add_node("Resize", {term}, resize_attrs, part.resize->name + ".after_" + conv.name)[0],
                 conv.name + ".sum");
      ++moved;
    }
    if (has_bias && !bias_on_kept) {
      const Tensor& bias = *graph.value(conv.inputs[2]).constant;
      const ValueId shaped = rw.add_constant(conv.name + ".bias", bias.reshaped({1, out_channels, 1, 1}));
      sum = rw.add_node("Add", {sum, shaped}, {}, conv.name + ".bias")[0];
    }
    if (conv.attrs.get_string("activation", "") == "Relu") sum = rw.add_node("Relu", {sum}, {}, conv.name + ".relu")[0];
    rw.replace(conv.outputs[0], sum);
    report.details.push_back("split Conv '" + conv.name + "' over its " + std::to_string(parts.size()) +
                             " concatenated inputs, " + std::to_string(moved) + " of them convolved before upsampling");
  }
  report.changes = static_cast<int>(report.details.size());
  return {rw.finish(), std::move(report)};
}

}  // namespace kiln::graph::passes

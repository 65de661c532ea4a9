// pack_weights: lays a Conv's constant weight out once, at compile time, the
// way the direct convolution template reads it (only convolutions that still
// use that template: see suits_direct_template). OIHW keeps one output
// channel's taps together, so a kernel computing a block of 4 output channels
// issues 4 scalar loads per tap; OIhw4o (graph/ops/conv.cpp) puts those 4
// weights side by side, one aligned vector load. Eager never runs this pass,
// so its kernels keep reading OIHW.
#include "graph/passes/passes.h"
#include "graph/passes/rewrite.h"

#include <algorithm>

namespace kiln::graph::passes {

namespace {

constexpr std::int64_t kBlock = 4;  // output channels per packed block (one vec4)
constexpr const char* kPackedLayout = "OIhw4o";

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Whether the lowering sends this Conv to the direct template, the one that
// reads packed weights (as the heuristic answers through `templates`), with
// at least one full block of output channels per group, so padding wastes
// little.
bool suits_direct_template(const Graph& graph, const Node& conv, const TemplateQueries& templates) {
  if (!templates.conv_uses_direct_template) return false;
  if (conv.op != "Conv" || conv.attrs.has("weight_layout")) return false;
  if (conv.inputs.size() < 2 || conv.inputs[0] < 0 || conv.inputs[1] < 0 || conv.outputs.empty()) return false;
  const Value& weight = graph.value(conv.inputs[1]);
  if (!weight.constant || !is_float_weight(weight.type.dtype) || weight.type.shape.size() != 4) return false;
  const Shape& w = weight.type.shape;
  const Shape& x = graph.value(conv.inputs[0]).type.shape;
  const Shape& y = graph.value(conv.outputs[0]).type.shape;
  const std::int64_t groups = conv.attrs.get_int("group", 1);
  if (x.size() != 4 || y.size() != 4 || groups < 1 || w[0] % groups != 0 || w[0] / groups < kBlock) return false;
  const std::vector<std::int64_t> strides = conv.attrs.get_ints("strides", {1, 1});
  const std::vector<std::int64_t> dilations = conv.attrs.get_ints("dilations", {1, 1});
  const std::vector<std::int64_t> pads = conv.attrs.get_ints("pads", {0, 0, 0, 0});
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4) return false;
  ConvGeometry g;
  g.batch = x[0];
  g.in_channels = x[1];
  g.out_channels = w[0];
  g.groups = groups;
  g.in_h = x[2];
  g.in_w = x[3];
  g.out_h = y[2];
  g.out_w = y[3];
  g.kernel_h = w[2];
  g.kernel_w = w[3];
  g.stride_h = strides[0];
  g.stride_w = strides[1];
  g.dilation_h = dilations[0];
  g.dilation_w = dilations[1];
  g.pad_top = pads[0];
  g.pad_left = pads[1];
  const DType dtype = graph.value(conv.inputs[0]).type.dtype;
  g.matrix_inputs = dtype == DType::f16    ? "f16"
                    : dtype == DType::bf16 ? "bf16"
                                           : conv.attrs.get_string("f32_products", "");
  return templates.conv_uses_direct_template(g);
}

// OIHW [M, C/g, kH, kW] -> OIhw4o [g * ceil(M/g / 4), C/g, kH, kW, 4].
Tensor pack(const Tensor& weight, std::int64_t groups) {
  const Shape& s = weight.shape();
  const std::int64_t group_out = s[0] / groups, taps = s[1] * s[2] * s[3];
  const std::int64_t blocks = ceil_div(group_out, kBlock);
  Tensor packed(DType::f32, {groups * blocks, s[1], s[2], s[3], kBlock});
  const auto from = weight.values<float>();
  auto to = packed.values<float>();
  std::fill(to.begin(), to.end(), 0.0f);
  for (std::int64_t m = 0; m < s[0]; ++m) {
    const std::int64_t g = m / group_out, in_group = m % group_out;
    const std::int64_t block = g * blocks + in_group / kBlock, lane = in_group % kBlock;
    for (std::int64_t t = 0; t < taps; ++t) to[(block * taps + t) * kBlock + lane] = from[m * taps + t];
  }
  return packed;
}

}  // namespace

PassResult pack_weights(const Graph& graph, const TemplateQueries& templates) {
  PassReport report{"pack_weights", 0, {}};
  // For A/B measurements of the packed kernels against the plain ones.
  Rewriter rw(graph);
  for (const Node& node : graph.nodes()) {
    if (!suits_direct_template(graph, node, templates)) {
      rw.copy_node(node);
      continue;
    }
    const Tensor& weight = *graph.value(node.inputs[1]).constant;
    const std::int64_t groups = node.attrs.get_int("group", 1);
    Tensor packed = rewrite_in_f32(weight, [&](const Tensor& w) { return pack(w, groups); });
    const std::string shape_text = shape_str(packed.shape());
    std::vector<ValueId> inputs = rw.map(node.inputs);
    inputs[1] = rw.add_constant(node.name + ".packed_weight", std::move(packed));
    Attributes attrs = node.attrs;
    attrs.set("weight_layout", std::string(kPackedLayout));
    attrs.set("out_channels", weight.shape()[0]);
    rw.copy_node(node, std::move(inputs), std::move(attrs));
    report.details.push_back("packed the weight of Conv '" + node.name + "' as " + kPackedLayout + " " + shape_text);
  }
  report.changes = static_cast<int>(report.details.size());
  return {rw.finish(), std::move(report)};
}

}  // namespace kiln::graph::passes

// winograd: computes a 3x3 stride-1 convolution as Winograd F(m x m, 3x3):
// F(2x2) needs 16 multiplies per 2x2 outputs and input channel, F(4x4) 36
// per 4x4, where the direct convolution needs 36 and 144. The Conv becomes
//   WinogradInput(X) -> V [n*n, C, tiles]            (B^T d B per n x n input tile, n = m + 2)
//   MatMul(U, V)     -> M [n*n, K, tiles]            (one batched GEMM)
//   WinogradOutput(M, bias) -> Y [N, K, H_out, W_out] (A^T m A, bias, activation)
// with U [n*n, K, C] = G g G^T of every 3x3 filter g, computed here in double
// for compile(), or, for eager mode (options.runtime_weight_transform), by a
// WinogradWeight node from the weight every call, as a vendor library's
// eager Winograd transforms the filter inside the call. The ops are defined
// in graph/ops/winograd.cpp, the filter transform in graph/winograd_weights.h.
#include "graph/op_registry.h"
#include "graph/passes/passes.h"
#include "graph/passes/rewrite.h"
#include "graph/winograd_weights.h"

#include <algorithm>
#include <optional>
#include <span>
#include <utility>

namespace kiln::graph::passes {

namespace {

// Whether the Conv is one the three Winograd ops compute: 2-D, group 1, a
// constant f32 3x3 weight, stride 1, a static 4-D input and an activation
// WinogradOutput applies.
bool winograd_computes(const Graph& graph, const Node& conv) {
  if (conv.op != "Conv" || conv.attrs.has("weight_layout") || conv.inputs.size() < 2 || conv.inputs[1] < 0)
    return false;
  const Value& x = graph.value(conv.inputs[0]);
  const Value& weight = graph.value(conv.inputs[1]);
  if (!weight.constant || !is_float_weight(weight.type.dtype) || x.type.dynamic || x.type.shape.size() != 4) return false;
  const Shape& w = weight.type.shape;
  if (w.size() != 4 || w[2] != 3 || w[3] != 3) return false;
  if (graph.value(conv.outputs[0]).type.shape.size() != 4) return false;
  const std::string activation = conv.attrs.get_string("activation", "");
  return conv.attrs.get_int("group", 1) == 1 && (activation.empty() || activation == "Relu") &&
         conv.attrs.get_string("auto_pad", "NOTSET") == "NOTSET" &&
         conv.attrs.get_ints("strides", {1, 1}) == std::vector<std::int64_t>{1, 1};
}

// The rule's first test: channels and work enough to pay.
bool worth_winograd(const Graph& graph, const Node& conv, const WinogradRule& rule) {
  const Shape& w = graph.value(conv.inputs[1]).type.shape;
  const Shape& y = graph.value(conv.outputs[0]).type.shape;
  return w[0] >= rule.min_out_channels && w[1] >= rule.min_in_channels &&
         w[0] * w[1] * 9 * y[0] * y[2] * y[3] >= rule.min_multiply_adds;
}

// One candidate rewrite: F(tile x tile) and the GEMM's column count.
struct Choice {
  std::int64_t tile = 0;     // 2 or 4
  std::int64_t columns = 0;  // tiles, padded for the GEMM's register tiles
  std::int64_t tiles = 0;    // unpadded
};

// V's columns for F(tile x tile), as WinogradInput's inference gives them.
Choice plan_tiles(const Graph& graph, const Node& conv, const Attributes& input_attrs, std::int64_t tile,
                  std::int64_t column_multiple) {
  Attributes attrs = input_attrs;
  attrs.set("output_tile", tile);
  const Node probe{kNoNode, "WinogradInput", conv.name, {conv.inputs[0]}, {}, attrs, {}};
  const TensorType x_type = graph.value(conv.inputs[0]).type;
  const std::int64_t tiles = infer_node(probe, std::span<const TensorType>(&x_type, 1))[0].shape[2];
  const std::int64_t columns =
      tiles > column_multiple ? (tiles + column_multiple - 1) / column_multiple * column_multiple : tiles;
  return {tile, columns, tiles};
}

// Whether the transformed weight fits the rule's max_weight_bytes.
bool weight_fits(const Choice& choice, const Shape& weight, const WinogradRule& rule) {
  return (choice.tile + 2) * (choice.tile + 2) * weight[0] * weight[1] * std::int64_t{sizeof(float)} <=
         rule.max_weight_bytes;
}

// Whether the GEMM's multiplies, (tile + 2)^2 per column, stay within the
// rule's ratio of the direct convolution's 9 per output pixel.
bool saves_multiplies(const Choice& choice, std::int64_t output_pixels, const WinogradRule& rule) {
  const std::int64_t per_column = (choice.tile + 2) * (choice.tile + 2);
  return per_column * choice.columns * rule.max_multiply_ratio_denominator <=
         9 * output_pixels * rule.max_multiply_ratio_numerator;
}

}  // namespace

PassResult winograd(const Graph& graph, const WinogradOptions& options) {
  const WinogradRule& device_rule = options.rule;
  PassReport report{"winograd", 0, {}};
  const bool only_f2 = options.max_tile < 4;
  if (only_f2) report.details.push_back("F(4x4, 3x3) off: output tiles of 2x2 only");
  // The transformed weight U, through the model's memo where it has one.
  const auto transformed = [&](const Tensor& weight, std::int64_t tile) {
    const auto compute = [&] {
      return rewrite_in_f32(weight, [&](const Tensor& w) { return winograd_transform_weight(w, tile); });
    };
    return options.weight_memo ? options.weight_memo->get("winograd F" + std::to_string(tile), weight, compute)
                               : compute();
  };
  Rewriter rw(graph);
  for (const Node& node : graph.nodes()) {
    if (!winograd_computes(graph, node)) {
      rw.copy_node(node);
      continue;
    }
    const std::vector<std::int64_t> dilations = node.attrs.get_ints("dilations", {1, 1});
    Attributes input_attrs;
    input_attrs.set("pads", node.attrs.get_ints("pads", {0, 0, 0, 0}));
    input_attrs.set("dilations", dilations);
    // (tile + 2)^2 products per tile against 9 per output pixel: a large
    // dilation on a small map splits it into many nearly empty tiles, which
    // can cost more multiplies than the direct convolution (DeepLabV3's ASPP:
    // docs/benchmarks/pass-thresholds.md).
    const Shape& y = graph.value(node.outputs[0]).type.shape;
    const std::int64_t output_pixels = y[0] * y[2] * y[3];
    const auto sub_grid_extent = [&](int axis) {
      const std::int64_t d = dilations[static_cast<std::size_t>(axis)];
      return (y[2 + static_cast<std::size_t>(axis)] + d - 1) / d;
    };
    const Shape& weight_shape = graph.value(node.inputs[1]).type.shape;
    const Choice f2 = plan_tiles(graph, node, input_attrs, 2, device_rule.column_multiple);
    // A 16-bit graph rounds the transformed tiles and the GEMM's result
    // between kernels; F(4x4)'s transforms (coefficients from 1/24 to 4, with
    // cancellation) lose too much to that, F(2x2)'s (sums and halves) do not.
    const bool sixteen_bit = graph.value(node.inputs[1]).type.dtype != DType::f32;
    const std::optional<Choice> f4 =
        only_f2 || sixteen_bit ? std::nullopt : std::optional(plan_tiles(graph, node, input_attrs, 4, device_rule.column_multiple));

    // The rule: nullopt keeps the direct convolution (with why, when it is worth saying).
    std::optional<Choice> rule;
    std::string kept;
    if (worth_winograd(graph, node, device_rule)) {
      Choice choice = f2;
      if (f4 && sub_grid_extent(0) >= device_rule.min_f4_extent &&
          sub_grid_extent(1) >= device_rule.min_f4_extent && saves_multiplies(*f4, output_pixels, device_rule) &&
          weight_fits(*f4, weight_shape, device_rule))
        choice = *f4;
      if (!saves_multiplies(choice, output_pixels, device_rule))
        kept = "kept Conv '" + node.name + "': " + std::to_string(choice.columns) + " tiles for " +
               std::to_string(output_pixels) + " output pixels save too few multiplies";
      else if (!weight_fits(choice, weight_shape, device_rule))
        kept = "kept Conv '" + node.name + "': its transformed weight would exceed " +
               std::to_string(device_rule.max_weight_bytes) + " bytes";
      else
        rule = choice;
    }
    std::optional<Choice> chosen = rule;
    if (options.chooser) {
      const auto name = [](const std::optional<Choice>& c) { return c ? "f" + std::to_string(c->tile) : "direct"; };
      std::vector<std::string> allowed = {"direct"};
      if (weight_fits(f2, weight_shape, device_rule)) allowed.push_back("f2");
      if (f4 && weight_fits(*f4, weight_shape, device_rule)) allowed.push_back("f4");
      const std::string answer = options.chooser({"winograd", &graph, &node, allowed, name(rule)});
      if (answer != name(rule) && std::find(allowed.begin(), allowed.end(), answer) != allowed.end()) {
        chosen = answer == "direct" ? std::nullopt : answer == "f2" ? std::optional(f2) : f4;
        kept = "Conv '" + node.name + "': " + (answer == "direct" ? "direct convolution" : answer) +
               " by the chooser (the rule: " + name(rule) + ")";
        if (chosen) report.details.push_back(kept);
      }
    }
    if (!chosen) {
      rw.copy_node(node);
      if (!kept.empty()) report.details.push_back(kept);
      continue;
    }
    const Choice choice = *chosen;
    input_attrs.set("output_tile", choice.tile);
    if (choice.columns != choice.tiles) input_attrs.set("columns", choice.columns);
    const ValueId v =
        rw.add_node("WinogradInput", {rw.map(node.inputs[0])}, std::move(input_attrs), node.name + ".winograd_input")[0];

    const Tensor& weight = *graph.value(node.inputs[1]).constant;
    Attributes weight_attrs;
    weight_attrs.set("output_tile", choice.tile);
    const ValueId u = options.runtime_weight_transform
                          ? rw.add_node("WinogradWeight", {rw.map(node.inputs[1])}, std::move(weight_attrs),
                                        node.name + ".winograd_weight")[0]
                          : rw.add_constant(graph.value(node.inputs[1]).name + ".winograd", transformed(weight, choice.tile));
    Attributes product_attrs;  // the convolution's precision (choose_f32_products) is its product's
    if (node.attrs.has("f32_products")) product_attrs.set("f32_products", node.attrs.get_string("f32_products", ""));
    const ValueId m = rw.add_node("MatMul", {u, v}, std::move(product_attrs), node.name + ".winograd_matmul")[0];

    // WinogradOutput stands for the Conv: same name, same output value.
    Attributes output_attrs;
    output_attrs.set("output_shape", graph.value(node.outputs[0]).type.shape);
    output_attrs.set("dilations", dilations);
    output_attrs.set("output_tile", choice.tile);
    if (node.attrs.has("activation")) output_attrs.set("activation", node.attrs.get_string("activation", ""));
    std::vector<ValueId> output_inputs = {m};
    if (node.inputs.size() > 2 && node.inputs[2] >= 0) output_inputs.push_back(rw.map(node.inputs[2]));
    Node output = node;
    output.op = "WinogradOutput";
    rw.copy_node(output, std::move(output_inputs), std::move(output_attrs));
    ++report.changes;
    const std::string f = std::to_string(choice.tile);
    report.details.push_back("Conv '" + node.name + "' " + shape_str(weight.shape()) + " -> Winograd F(" + f + "x" +
                             f + ", 3x3), " + shape_str(rw.target().value(m).type.shape) + " GEMM" +
                             (options.runtime_weight_transform ? ", weight transformed every call" : ""));
  }

  return {rw.finish(), std::move(report)};
}

}  // namespace kiln::graph::passes

// choose_f32_products: which f32 matrix products may run on the device's
// matrix units in a narrower input type, as PyTorch's precision settings say
// (conv_allow_tf32 for convolutions, float32_matmul_precision for MatMul and
// Gemm). The choice is an attribute of the node ("f32_products"), so that it
// travels with the node through the later passes, into tuning sites and
// tuning jobs, and the kernel's tuning problem names it.
#include "graph/passes/passes.h"
#include "graph/passes/rewrite.h"

#include <algorithm>

namespace kiln::graph::passes {
namespace {

bool has(const std::vector<std::string>& inputs, std::string_view precision) {
  return std::find(inputs.begin(), inputs.end(), precision) != inputs.end();
}

// Only f32 products: a 16-bit node takes its own type's instruction.
bool f32_product(const Graph& graph, const Node& node) {
  for (std::size_t i = 0; i < std::min<std::size_t>(node.inputs.size(), 2); ++i)
    if (node.inputs[i] < 0 || graph.value(node.inputs[i]).type.dtype != DType::f32) return false;
  return true;
}

}  // namespace

bool has_f32_product_units(const F32ProductOptions& options) {
  return has(options.matrix_inputs, "tf32") || has(options.matrix_inputs, "bf16");
}

std::string allowed_f32_products(std::string_view op, const F32ProductOptions& options) {
  if (op == "Conv") return options.conv_allow_tf32 && has(options.matrix_inputs, "tf32") ? "tf32" : "";
  if (op != "MatMul" && op != "Gemm") return "";
  // medium: bf16 inputs, or TF32 where the device has no bf16 units
  // (torch.set_float32_matmul_precision allows either).
  if (options.matmul_precision == "medium" && has(options.matrix_inputs, "bf16")) return "bf16";
  if (options.matmul_precision != "highest" && has(options.matrix_inputs, "tf32")) return "tf32";
  return "";
}

PassResult choose_f32_products(const Graph& graph, const F32ProductOptions& options) {
  PassReport report{"choose_f32_products", 0, {}};
  if (!has_f32_product_units(options)) {
    report.details.push_back("not for this device: it has no matrix units with TF32 or bf16 inputs");
    return {graph, std::move(report)};
  }
  Rewriter rw(graph);
  std::size_t convs = 0, products = 0;
  std::string product_inputs;
  for (const Node& node : graph.nodes()) {
    const std::string allowed = f32_product(graph, node) ? allowed_f32_products(node.op, options) : "";
    if (allowed.empty() || node.attrs.get_string("f32_products", "") == allowed) {
      rw.copy_node(node);
      continue;
    }
    Attributes attrs = node.attrs;
    attrs.set("f32_products", allowed);
    rw.copy_node(node, rw.map(node.inputs), std::move(attrs));
    ++report.changes;
    if (node.op == "Conv") ++convs;
    else {
      ++products;
      product_inputs = allowed;
    }
  }
  if (convs != 0)
    report.details.push_back(std::to_string(convs) + " f32 convolution(s) may use TF32 (conv_allow_tf32 on)");
  if (products != 0)
    report.details.push_back(std::to_string(products) + " f32 MatMul/Gemm node(s) may use " + product_inputs +
                             " (float32_matmul_precision " + options.matmul_precision + ")");
  if (report.changes == 0) {
    report.details.push_back("f32 products stay f32 (conv_allow_tf32 " +
                             std::string(options.conv_allow_tf32 ? "on" : "off") + ", float32_matmul_precision " +
                             options.matmul_precision + ")");
    return {graph, std::move(report)};  // the model's own graph, value ids included
  }
  return {rw.finish(), std::move(report)};
}

F32ProductOptions f32_product_options(const Settings& settings, std::vector<std::string> matrix_inputs) {
  return {.matrix_inputs = std::move(matrix_inputs),
          .conv_allow_tf32 = settings.flag("conv_allow_tf32"),
          .matmul_precision = settings.choice("float32_matmul_precision")};
}

}  // namespace kiln::graph::passes

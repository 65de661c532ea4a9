// pack_matmul_weights: lays a MatMul's constant B [K, N] out once, at compile
// time, as NK16n ([N / 16, K, 16]: graph/weight_layouts.h), the layout the
// GEMM lowering then reads as a batch of 16-column products. With B row-major
// an invocation computing 16 columns reads 64 bytes of each of B's K rows,
// rows 4N bytes apart (ViT's fc2: 3072 rows, 3 KiB apart, a new page every
// row or two); packed, it streams one contiguous slab. Measured on lavapipe
// (2 threads, side by side): ViT's fc2 shape 197x768x3072 1.4x faster,
// ConvNeXt's stage-4 fc2 49x768x3072 1.5-2x. Eager never runs this pass, so
// its kernels keep reading B as the model gives it.
#include "graph/passes/passes.h"
#include "graph/ops/ops.h"
#include "graph/passes/rewrite.h"
#include "graph/weight_layouts.h"

namespace kiln::graph::passes {

namespace {

// A MatMul whose B is a constant f32 [K, N] with N a whole number of blocks,
// and whose A has rank >= 2 (its leading dims fold into the GEMM's rows).
bool packable(const Graph& graph, const Node& node) {
  if (node.op != "MatMul" || node.attrs.has("weight_layout") || node.inputs.size() != 2) return false;
  const Value& a = graph.value(node.inputs[0]);
  const Value& b = graph.value(node.inputs[1]);
  if (a.type.shape.size() < 2 || !b.constant || !is_float_weight(b.type.dtype) || b.type.shape.size() != 2) return false;
  const std::int64_t n = b.type.shape[1];
  return n >= kMatMulPackedBlock && n % kMatMulPackedBlock == 0;
}

// A Gemm that is such a MatMul, with B [K, N] or given transposed, [N, K]
// (a linear layer's weight as PyTorch stores it; GPT-2's Conv1D stores
// [K, N]): A 2-D and not transposed, no scaling, no fused activation; its
// bias becomes an Add after the MatMul.
bool packable_gemm(const Graph& graph, const Node& node) {
  if (node.op != "Gemm" || node.attrs.has("weight_layout") || node.attrs.has("activation") || node.inputs.size() < 2 ||
      node.inputs.size() > 3 || ops::get_flag(node, "transA", false) ||
      node.attrs.get_float("alpha", 1.0) != 1.0 || node.attrs.get_float("beta", 1.0) != 1.0)
    return false;
  const Value& a = graph.value(node.inputs[0]);
  const Value& b = graph.value(node.inputs[1]);
  if (a.type.shape.size() != 2 || !b.constant || !is_float_weight(b.type.dtype) || b.type.shape.size() != 2) return false;
  // A 16-bit product with a bias rounds once as Gemm, twice as MatMul + Add.
  if (node.inputs.size() == 3 && node.inputs[2] >= 0 && graph.value(node.outputs[0]).type.dtype != DType::f32) return false;
  const std::int64_t n = b.type.shape[ops::get_flag(node, "transB", false) ? 0 : 1];
  return n >= kMatMulPackedBlock && n % kMatMulPackedBlock == 0;
}

// B [K, N] (or given transposed, [N, K]) -> [N / 16, K, 16].
Tensor pack(const Tensor& b, bool transposed) {
  const std::int64_t k = b.shape()[transposed ? 1 : 0], n = b.shape()[transposed ? 0 : 1];
  const std::int64_t blocks = n / kMatMulPackedBlock;
  Tensor packed(DType::f32, {blocks, k, kMatMulPackedBlock});
  const auto from = b.values<float>();
  auto to = packed.values<float>();
  for (std::int64_t block = 0; block < blocks; ++block)
    for (std::int64_t q = 0; q < k; ++q)
      for (std::int64_t lane = 0; lane < kMatMulPackedBlock; ++lane) {
        const std::int64_t column = block * kMatMulPackedBlock + lane;
        to[(block * k + q) * kMatMulPackedBlock + lane] = from[transposed ? column * k + q : q * n + column];
      }
  return packed;
}

}  // namespace

PassResult pack_matmul_weights(const Graph& graph, const PackMatMulOptions& options) {
  PassReport report{"pack_matmul_weights", 0, {}};
  // For A/B measurements of the packed kernels against the plain ones.
  // keep_used: a weight only packed MatMuls read is not copied.
  Rewriter rw(graph, Rewriter::Constants::keep_used);
  for (const Node& node : graph.nodes()) {
    const bool gemm = packable_gemm(graph, node);
    const bool transposed = gemm && ops::get_flag(node, "transB", false);
    if (!gemm && !packable(graph, node)) {
      rw.copy_node(node);
      continue;
    }
    bool pack_it = options.pack;
    if (options.chooser) {
      const std::string rule = options.pack ? "packed" : "plain";
      const std::string chosen = options.chooser({"pack_matmul_weights", &graph, &node, {"plain", "packed"}, rule});
      if (chosen == "plain" || chosen == "packed") pack_it = chosen == "packed";
      if (pack_it != options.pack)
        report.details.push_back(node.op + " '" + node.name + "': " + (pack_it ? "packed" : "plain") +
                                 " by the chooser (the rule: " + rule + ")");
    }
    if (!pack_it) {
      rw.copy_node(node);
      continue;
    }
    Tensor packed = rewrite_in_f32(*graph.value(node.inputs[1]).constant,
                                   [&](const Tensor& b) { return pack(b, transposed); });
    const std::string shape_text = shape_str(packed.shape());
    if (gemm) {
      // MatMul(A, packed B) [+ C]: the bias's broadcast is Gemm's (to [M, N]).
      Attributes attrs;
      attrs.set("weight_layout", std::string(kMatMulPackedLayout));
      const bool bias = node.inputs.size() == 3 && node.inputs[2] >= 0;
      const std::vector<ValueId> product =
          rw.add_node("MatMul", {rw.map(node.inputs[0]), rw.add_constant(node.name + ".packed_weight", std::move(packed))},
                      std::move(attrs), bias ? node.name + "_matmul" : node.name);
      const ValueId y = bias ? rw.add_node("Add", {product[0], rw.map(node.inputs[2])}, {}, node.name)[0] : product[0];
      rw.replace(node.outputs[0], y);
      ++report.changes;
      report.details.push_back("Gemm '" + node.name + "'" + (transposed ? " (B transposed)" : "") +
                               " as a MatMul with B packed as " +
                               kMatMulPackedLayout + " " + shape_text + (bias ? ", its bias an Add" : ""));
      continue;
    }
    std::vector<ValueId> inputs = {rw.map(node.inputs[0]), rw.add_constant(node.name + ".packed_weight", std::move(packed))};
    Attributes attrs = node.attrs;
    attrs.set("weight_layout", std::string(kMatMulPackedLayout));
    rw.copy_node(node, std::move(inputs), std::move(attrs));
    ++report.changes;
    report.details.push_back("packed B of MatMul '" + node.name + "' as " + kMatMulPackedLayout + " " + shape_text);
  }
  return {rw.finish(), std::move(report)};
}

}  // namespace kiln::graph::passes

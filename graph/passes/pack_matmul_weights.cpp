// pack_matmul_weights: lays a MatMul's constant B [K, N] out once, at compile
// time, as NK16n ([N / 16, K, 16]: graph/weight_layouts.h), the layout the
// GEMM lowering then reads as a batch of 16-column products. With B row-major
// an invocation computing 16 columns reads 64 bytes of each of B's K rows,
// rows 4N bytes apart (ViT's fc2: 3072 rows, 3 KiB apart, a new page every
// row or two); packed, it streams one contiguous slab
// (docs/benchmarks/pass-thresholds.md). Eager never runs this pass, so its
// kernels keep reading B as the model gives it.
#include "graph/passes/passes.h"
#include "graph/ops/ops.h"
#include "graph/passes/rewrite.h"
#include "graph/weight_layouts.h"

#include <map>

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

// How a product's constant B is read besides by the product.
enum class Sharing : std::uint8_t {
  none,           // by nothing else
  small_table,    // also by Gathers, but small enough to hold twice
  tied_table,     // also by Gathers of its rows (a language model's tied head): they read the packed copy
  other_readers,  // by other nodes: kept as it is, once
};

// Tables below this are held twice (as they are and packed) rather than
// read through the packed copy, which adds a few dispatches to the Gather
// (a judgement, not a measured line).
constexpr std::size_t kTiedTableBytes = 4 << 20;

// A Gather of whole rows (axis 0) of constant `table`, with indices of a static shape.
bool gathers_rows(const Graph& graph, const Node& node, ValueId table) {
  if (node.op != "Gather" || node.inputs.size() != 2 || node.inputs[0] != table || node.inputs[1] < 0) return false;
  const Value& indices = graph.value(node.inputs[1]);
  return !indices.constant && !indices.type.dynamic && (indices.type.dtype == DType::i64 || indices.type.dtype == DType::i32) &&
         node.attrs.get_int("axis", 0) == 0 && graph.value(table).type.shape.size() == 2;
}

std::vector<Sharing> find_sharing(const Graph& graph) {
  const std::size_t n = graph.values().size();
  std::vector<int> readers(n, 0), row_gathers(n, 0), products(n, 0), transposed(n, 0);
  for (const Node& node : graph.nodes()) {
    for (ValueId v : node.inputs)
      if (v >= 0) ++readers[static_cast<std::size_t>(v)];
    if (!node.inputs.empty() && node.inputs[0] >= 0 && gathers_rows(graph, node, node.inputs[0]))
      ++row_gathers[static_cast<std::size_t>(node.inputs[0])];
    const bool gemm = packable_gemm(graph, node);
    if (gemm || packable(graph, node)) {
      const auto b = static_cast<std::size_t>(node.inputs[1]);
      ++products[b];
      transposed[b] += gemm && ops::get_flag(node, "transB", false) ? 1 : 0;
    }
  }
  std::vector<Sharing> sharing(n, Sharing::none);
  for (std::size_t b = 0; b < n; ++b) {
    if (products[b] == 0 || readers[b] == 1) continue;
    // Products that lay B out alike share one packed copy.
    const bool alike = transposed[b] == 0 || transposed[b] == products[b];
    if (alike && readers[b] == products[b]) continue;
    // Transposed heads and Gathers of its rows (a tied embedding table).
    if (transposed[b] == products[b] && readers[b] == products[b] + row_gathers[b])
      sharing[b] = graph.values()[b].constant->nbytes() < kTiedTableBytes ? Sharing::small_table : Sharing::tied_table;
    else
      sharing[b] = Sharing::other_readers;
  }
  return sharing;
}

// The packed constant of `node`'s B: one per B, however many products and
// Gathers read it (packed_of).
ValueId packed_constant(Rewriter& rw, const Graph& graph, const Node& node, bool transposed,
                        std::map<ValueId, ValueId>& packed_of) {
  if (auto it = packed_of.find(node.inputs[1]); it != packed_of.end()) return it->second;
  Tensor packed = rewrite_in_f32(*graph.value(node.inputs[1]).constant, [&](const Tensor& b) { return pack(b, transposed); });
  const ValueId id = rw.add_constant(node.name + ".packed_weight", std::move(packed));
  packed_of.emplace(node.inputs[1], id);
  return id;
}

// Gather(table [V, K], indices) from the table packed as [V / 16, K, 16]:
// each index's 16-row block, then its lane in the block.
ValueId gather_packed_rows(Rewriter& rw, const Graph& graph, const Node& gather, ValueId packed) {
  const Value& table = graph.value(gather.inputs[0]);
  const Value& indices = graph.value(gather.inputs[1]);
  const std::int64_t rows = table.type.shape[0], k = table.type.shape[1];
  const DType index_type = indices.type.dtype;
  const std::string& base = gather.name;
  auto constant = [&](const std::string& name, std::int64_t value) {
    return rw.add_constant(base + name, Tensor::from_i64({}, {value}).to(index_type));
  };
  auto op = [&](const std::string& op_name, std::vector<ValueId> inputs, const std::string& name, Attributes attrs = {}) {
    return rw.add_node(op_name, std::move(inputs), std::move(attrs), base + name)[0];
  };
  auto reshape = [&](ValueId v, Shape shape, const std::string& name) {
    Attributes a;
    a.set("shape", std::vector<std::int64_t>(shape.begin(), shape.end()));
    return op("Reshape", {v}, name, std::move(a));
  };
  // Negative indices count from the end, as Gather's do.
  const ValueId raw = rw.map(gather.inputs[1]);
  const ValueId index = op("Where", {op("Less", {raw, constant(".zero", 0)}, ".negative"),
                                     op("Add", {raw, constant(".rows", rows)}, ".from_end"), raw},
                           ".index");
  const ValueId block_size = constant(".block", kMatMulPackedBlock);
  Attributes axis0;
  axis0.set("axis", std::int64_t{0});
  const ValueId blocks = op("Gather", {packed, op("Div", {index, block_size}, ".block_of")}, ".blocks", std::move(axis0));
  // Each index's lane, [indices..., K, 1]: broadcast over K by adding zeros.
  Shape lane_shape = indices.type.shape;
  lane_shape.insert(lane_shape.end(), {1, 1});
  const ValueId lane = reshape(op("Mod", {index, block_size}, ".lane_of"), lane_shape, ".lane");
  const ValueId zeros = rw.add_constant(base + ".over_k", Tensor(index_type, {k, 1}));
  Attributes last;
  last.set("axis", std::int64_t{-1});
  const ValueId picked = op("GatherElements", {blocks, op("Add", {lane, zeros}, ".lanes")}, ".picked", std::move(last));
  Shape out_shape = indices.type.shape;
  out_shape.push_back(k);
  return reshape(picked, out_shape, "");
}

}  // namespace

PassResult pack_matmul_weights(const Graph& graph, const PackMatMulOptions& options) {
  PassReport report{"pack_matmul_weights", 0, {}};
  // For A/B measurements of the packed kernels against the plain ones.
  // keep_used: a weight only packed MatMuls read is not copied.
  Rewriter rw(graph, Rewriter::Constants::keep_used);
  const std::vector<Sharing> sharing = find_sharing(graph);
  // Whether each product's B is packed: the rule, or the chooser's answer.
  std::map<NodeId, bool> decided;
  auto pack_decision = [&](const Node& node) {
    if (auto it = decided.find(node.id); it != decided.end()) return it->second;
    bool pack_it = options.pack;
    if (options.chooser) {
      const std::string rule = options.pack ? "packed" : "plain";
      const std::string chosen = options.chooser({"pack_matmul_weights", &graph, &node, {"plain", "packed"}, rule});
      if (chosen == "plain" || chosen == "packed") pack_it = chosen == "packed";
      if (pack_it != options.pack)
        report.details.push_back(node.op + " '" + node.name + "': " + (pack_it ? "packed" : "plain") +
                                 " by the chooser (the rule: " + rule + ")");
    }
    decided.emplace(node.id, pack_it);
    return pack_it;
  };
  // A tied head's packed copy exists before the Gathers of its table (which
  // come first) are rewritten to read it.
  std::map<ValueId, ValueId> packed_of;  // B -> its packed constant in the new graph
  for (const Node& node : graph.nodes())
    if (packable_gemm(graph, node) && ops::get_flag(node, "transB", false) &&
        sharing[static_cast<std::size_t>(node.inputs[1])] == Sharing::tied_table && pack_decision(node))
      packed_constant(rw, graph, node, true, packed_of);
  for (const Node& node : graph.nodes()) {
    if (node.op == "Gather" && !node.inputs.empty() && node.inputs[0] >= 0 &&
        sharing[static_cast<std::size_t>(node.inputs[0])] == Sharing::tied_table && packed_of.contains(node.inputs[0])) {
      rw.replace(node.outputs[0], gather_packed_rows(rw, graph, node, packed_of.at(node.inputs[0])));
      ++report.changes;
      report.details.push_back("Gather '" + node.name + "' reads the rows of '" + graph.value(node.inputs[0]).name +
                               "' from the head's packed copy (one copy on the device)");
      continue;
    }
    const bool gemm = packable_gemm(graph, node);
    const bool transposed = gemm && ops::get_flag(node, "transB", false);
    if (!gemm && !packable(graph, node)) {
      rw.copy_node(node);
      continue;
    }
    const Sharing shared = sharing[static_cast<std::size_t>(node.inputs[1])];
    if (shared == Sharing::other_readers) {
      // Packed, the device would hold the weight twice.
      rw.copy_node(node);
      report.details.push_back(node.op + " '" + node.name + "': B '" + graph.value(node.inputs[1]).name +
                               "' left as it is, as other nodes read it too");
      continue;
    }
    if (!pack_decision(node)) {
      rw.copy_node(node);
      continue;
    }
    const ValueId packed_weight = packed_constant(rw, graph, node, transposed, packed_of);
    const std::string shape_text = shape_str(rw.constant(packed_weight)->shape());
    if (gemm) {
      // MatMul(A, packed B) [+ C]: the bias's broadcast is Gemm's (to [M, N]).
      Attributes attrs;
      attrs.set("weight_layout", std::string(kMatMulPackedLayout));
      if (node.attrs.has("f32_products")) attrs.set("f32_products", node.attrs.get_string("f32_products", ""));
      const bool bias = node.inputs.size() == 3 && node.inputs[2] >= 0;
      const std::vector<ValueId> product =
          rw.add_node("MatMul", {rw.map(node.inputs[0]), packed_weight},
                      std::move(attrs), bias ? node.name + "_matmul" : node.name);
      const ValueId y = bias ? rw.add_node("Add", {product[0], rw.map(node.inputs[2])}, {}, node.name)[0] : product[0];
      rw.replace(node.outputs[0], y);
      ++report.changes;
      report.details.push_back("Gemm '" + node.name + "'" + (transposed ? " (B transposed)" : "") +
                               " as a MatMul with B packed as " +
                               kMatMulPackedLayout + " " + shape_text + (bias ? ", its bias an Add" : ""));
      continue;
    }
    std::vector<ValueId> inputs = {rw.map(node.inputs[0]), packed_weight};
    Attributes attrs = node.attrs;
    attrs.set("weight_layout", std::string(kMatMulPackedLayout));
    rw.copy_node(node, std::move(inputs), std::move(attrs));
    ++report.changes;
    report.details.push_back("packed B of MatMul '" + node.name + "' as " + kMatMulPackedLayout + " " + shape_text);
  }
  return {rw.finish(), std::move(report)};
}

}  // namespace kiln::graph::passes

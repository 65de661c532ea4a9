// split_large_weights: a kernel binds each operand as one storage buffer, and
// a device binds at most TargetDesc::max_buffer_bytes in one (lavapipe: 128
// MiB; Gemma-2B's tied embedding is 1 GB in bf16). The weights that grow that
// large are a linear layer's (a language model's head) and an embedding
// table, so those are cut into parts that fit, computed part by part and
// joined; any other operand that large stays, and the executor refuses it
// naming the tensor and the limit.
//
// - MatMul(A, B) with B a constant [K, N], and Gemm(A, B, C) with B [K, N] or
//   transposed [N, K]: B (and a bias along N) cut along N into parts of whole
//   16-column blocks (pack_matmul_weights packs each), one product per part,
//   the products concatenated along the last axis. Each output column is
//   the same dot product as before: the result is exact.
// - Gather(data, indices) along axis 0 with data a constant [V, ...] and
//   runtime indices: each part gathers the rows it holds (its indices moved
//   into its range, others clamped to its first row) and a Where per part
//   keeps the rows that came from it. An index outside [-V, V) gets NaN, as
//   the kernel of an unsplit Gather gives it.
#include "graph/passes/passes.h"
#include "graph/ops/ops.h"
#include "graph/passes/rewrite.h"
#include "graph/weight_layouts.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <tuple>

namespace kiln::graph::passes {

namespace {

// Rows [begin, end) of `t` along `axis`.
Tensor slice_along(const Tensor& t, std::size_t axis, std::int64_t begin, std::int64_t end) {
  Shape shape = t.shape();
  std::int64_t outer = 1, inner = static_cast<std::int64_t>(dtype_size(t.dtype()));
  for (std::size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (std::size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const std::int64_t extent = shape[axis];
  shape[axis] = end - begin;
  Tensor part(t.dtype(), shape);
  const std::size_t run = static_cast<std::size_t>((end - begin) * inner);
  for (std::int64_t o = 0; o < outer; ++o)
    std::memcpy(part.bytes().data() + static_cast<std::size_t>(o) * run,
                t.bytes().data() + static_cast<std::size_t>((o * extent + begin) * inner), run);
  return part;
}

// Part boundaries of an axis of `extent`, each part `slice_bytes` per unit
// of the axis and at most `limit` bytes; parts a multiple of `granule` long
// where one fits.
std::vector<std::int64_t> part_bounds(std::int64_t extent, std::uint64_t slice_bytes, std::uint64_t limit,
                                      std::int64_t granule) {
  std::int64_t per_part = std::max<std::int64_t>(1, static_cast<std::int64_t>(limit / std::max<std::uint64_t>(slice_bytes, 1)));
  if (per_part >= granule) per_part -= per_part % granule;
  std::vector<std::int64_t> bounds = {0};
  while (bounds.back() < extent) bounds.push_back(std::min(extent, bounds.back() + per_part));
  return bounds;
}

class Splitter {
 public:
  Splitter(const Graph& graph, std::uint64_t limit) : graph_(graph), limit_(limit), rw_(graph, Rewriter::Constants::keep_used) {}

  PassResult run() {
    for (const Node& node : graph_.nodes()) {
      if (split_product(node) || split_gather(node)) continue;
      rw_.copy_node(node);
    }
    return {rw_.finish(), std::move(report_)};
  }

 private:
  bool too_large(ValueId v) const { return graph_.value(v).constant && graph_.value(v).constant->nbytes() > limit_; }

  // MatMul with B [K, N], or Gemm with B [K, N] / [N, K] (transB).
  bool split_product(const Node& node) {
    const bool gemm = node.op == "Gemm";
    if ((!gemm && node.op != "MatMul") || node.inputs.size() < 2 || node.inputs[1] < 0 || !too_large(node.inputs[1]) ||
        node.attrs.has("weight_layout"))
      return false;
    const Value& b = graph_.value(node.inputs[1]);
    if (b.type.shape.size() != 2) return false;
    const bool transposed = gemm && ops::get_flag(node, "transB", false);
    const std::size_t n_axis = transposed ? 0 : 1;
    const std::int64_t n = b.type.shape[n_axis], k = b.type.shape[1 - n_axis];
    const std::vector<std::int64_t> bounds =
        part_bounds(n, static_cast<std::uint64_t>(k) * dtype_size(b.type.dtype), limit_, kMatMulPackedBlock);
    // A Gemm's bias along N is cut with B; a broadcast one is shared.
    const bool has_bias = gemm && node.inputs.size() > 2 && node.inputs[2] >= 0;
    const bool bias_along_n = has_bias && !graph_.value(node.inputs[2]).type.shape.empty() &&
                              graph_.value(node.inputs[2]).type.shape.back() == n && n > 1;
    const Value* bias = has_bias ? &graph_.value(node.inputs[2]) : nullptr;
    std::vector<ValueId> products;
    for (std::size_t p = 0; p + 1 < bounds.size(); ++p) {
      const std::string part = node.name + ".part" + std::to_string(p);
      std::vector<ValueId> inputs = {rw_.map(node.inputs[0]), part_of(b, n_axis, bounds[p], bounds[p + 1], p)};
      if (has_bias) {
        if (!bias_along_n) inputs.push_back(rw_.map(node.inputs[2]));
        else if (bias->constant)
          inputs.push_back(rw_.add_constant(bias->name + ".part" + std::to_string(p),
                                            slice_along(*bias->constant, bias->type.shape.size() - 1, bounds[p], bounds[p + 1])));
        else
          inputs.push_back(slice_last_axis(rw_.map(node.inputs[2]), bounds[p], bounds[p + 1], part + ".bias"));
      }
      products.push_back(rw_.add_node(node.op, std::move(inputs), node.attrs, part)[0]);
    }
    Attributes concat;
    concat.set("axis", std::int64_t{-1});
    rw_.replace(node.outputs[0], rw_.add_node("Concat", std::move(products), std::move(concat), node.name)[0]);
    ++report_.changes;
    report_.details.push_back(node.op + " '" + node.name + "': its weight '" + b.name + "' " + type_str(b.type) +
                              " (" + std::to_string(b.constant->nbytes()) + " bytes) in " + std::to_string(bounds.size() - 1) +
                              " parts along N, the products concatenated");
    return true;
  }

  ValueId slice_last_axis(ValueId v, std::int64_t begin, std::int64_t end, const std::string& name) {
    Attributes a;
    a.set("starts", std::vector<std::int64_t>{begin});
    a.set("ends", std::vector<std::int64_t>{end});
    a.set("axes", std::vector<std::int64_t>{-1});
    return rw_.add_node("Slice", {v}, std::move(a), name)[0];
  }

  // Part `p` of constant `v` (its [begin, end) along `axis`), one constant
  // for every node that cuts it so: a table tied to a head is held once.
  ValueId part_of(const Value& v, std::size_t axis, std::int64_t begin, std::int64_t end, std::size_t p) {
    const auto key = std::make_tuple(v.id, axis, begin, end);
    if (auto found = parts_.find(key); found != parts_.end()) return found->second;
    const ValueId part = rw_.add_constant(v.name + ".part" + std::to_string(p), slice_along(*v.constant, axis, begin, end));
    parts_.emplace(key, part);
    return part;
  }

  ValueId index_constant(DType dtype, std::int64_t value, const std::string& name) {
    return rw_.add_constant(name, Tensor::from_i64({}, {value}).to(dtype));
  }

  ValueId op(const std::string& op_name, std::vector<ValueId> inputs, const std::string& name) {
    return rw_.add_node(op_name, std::move(inputs), {}, name)[0];
  }

  // Gather along axis 0 from a constant table, runtime indices.
  bool split_gather(const Node& node) {
    if (node.op != "Gather" || node.inputs.size() != 2 || node.inputs[1] < 0 || !too_large(node.inputs[0])) return false;
    const Value& data = graph_.value(node.inputs[0]);
    const Value& indices = graph_.value(node.inputs[1]);
    if (indices.constant || indices.type.dynamic || data.type.shape.empty() ||
        ops::normalize_axis(node.attrs.get_int("axis", 0), static_cast<std::int64_t>(data.type.shape.size()), "axis") != 0 ||
        (indices.type.dtype != DType::i64 && indices.type.dtype != DType::i32) || !is_float_weight(data.type.dtype))
      return false;
    const std::int64_t rows = data.type.shape[0];
    // Whole 16-row blocks, as a tied head's weight [V, K] is cut: the parts are shared.
    const std::vector<std::int64_t> bounds =
        part_bounds(rows, data.constant->nbytes() / static_cast<std::uint64_t>(rows), limit_, kMatMulPackedBlock);
    const DType index_type = indices.type.dtype;
    const std::string& base = node.name;
    // Negative indices count from the end, as Gather's do.
    const ValueId raw = rw_.map(node.inputs[1]);
    const ValueId zero = index_constant(index_type, 0, base + ".zero");
    const ValueId index = op("Where", {op("Less", {raw, zero}, base + ".negative"),
                                       op("Add", {raw, index_constant(index_type, rows, base + ".rows")}, base + ".from_end"),
                                       raw},
                             base + ".index");
    // Each index's row from the part that holds it; [indices..., 1] masks select along the row.
    Shape mask_shape = indices.type.shape;
    mask_shape.resize(indices.type.shape.size() + data.type.shape.size() - 1, 1);
    const auto as_mask = [&](ValueId in, const std::string& name) {
      Attributes a;
      a.set("shape", std::vector<std::int64_t>(mask_shape.begin(), mask_shape.end()));
      return rw_.add_node("Reshape", {in}, std::move(a), name)[0];
    };
    ValueId rows_so_far = -1;
    for (std::size_t p = 0; p + 1 < bounds.size(); ++p) {
      const std::string part = base + ".part" + std::to_string(p);
      const ValueId local = p == 0 ? index : op("Sub", {index, index_constant(index_type, bounds[p], part + ".first")}, part + ".local");
      const ValueId inside =
          op("And", {op("GreaterOrEqual", {local, zero}, part + ".from"),
                     op("Less", {local, index_constant(index_type, bounds[p + 1] - bounds[p], part + ".count")}, part + ".to")},
             part + ".inside");
      Attributes axis0;
      axis0.set("axis", std::int64_t{0});
      const ValueId gathered =
          rw_.add_node("Gather",
                       {part_of(data, 0, bounds[p], bounds[p + 1], p), op("Where", {inside, local, zero}, part + ".clamped")},
                       std::move(axis0), part)[0];
      rows_so_far = p == 0 ? gathered : op("Where", {as_mask(inside, part + ".mask"), gathered, rows_so_far}, part + ".kept");
    }
    // An index in no part: NaN, as an unsplit Gather's kernel gives it.
    const ValueId valid = op("And", {op("GreaterOrEqual", {index, zero}, base + ".valid_from"),
                                     op("Less", {index, index_constant(index_type, rows, base + ".valid_rows")}, base + ".valid_to")},
                             base + ".valid");
    const ValueId nan = rw_.add_constant(base + ".nan", Tensor::scalar_f32(std::numeric_limits<float>::quiet_NaN()).to(data.type.dtype));
    rw_.replace(node.outputs[0], op("Where", {as_mask(valid, base + ".valid_mask"), rows_so_far, nan}, base));
    ++report_.changes;
    report_.details.push_back("Gather '" + node.name + "': its table '" + data.name + "' " + type_str(data.type) + " (" +
                              std::to_string(data.constant->nbytes()) + " bytes) in " + std::to_string(bounds.size() - 1) +
                              " parts of rows, each index's row kept from the part that holds it");
    return true;
  }

  const Graph& graph_;
  std::uint64_t limit_;
  Rewriter rw_;
  PassReport report_{"split_large_weights", 0, {}};
  std::map<std::tuple<ValueId, std::size_t, std::int64_t, std::int64_t>, ValueId> parts_;
};

}  // namespace

PassResult split_large_weights(const Graph& graph, const SplitWeightsOptions& options) {
  if (options.max_binding_bytes == 0) return {graph, {"split_large_weights", 0, {"no binding limit given"}}};
  bool any = false;
  for (const Value& v : graph.values()) any = any || (v.constant && v.constant->nbytes() > options.max_binding_bytes);
  if (!any) return {graph, {"split_large_weights", 0, {}}};
  return Splitter(graph, options.max_binding_bytes).run();
}

}  // namespace kiln::graph::passes

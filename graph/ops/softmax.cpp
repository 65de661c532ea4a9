// Softmax and LogSoftmax over one axis (ONNX opset 13 semantics), f32. The
// importer rewrites opset < 13's flattened-2-D form into this one.
#include <cmath>

#include "graph/ops/ops.h"
#include "src/base/check.h"

namespace kiln::graph::ops {

namespace {

std::int64_t softmax_axis(const Node& node, const TensorType& x) {
  check_known_attributes(node, {"axis"});
  KILN_CHECK(!x.shape.empty(), ErrorKind::ShapeMismatch, "input must have rank >= 1, got " + describe("input", x));
  return normalize_axis(node.attrs.get_int("axis", -1), static_cast<std::int64_t>(x.shape.size()), "axis");
}

std::vector<TensorType> infer_softmax(const Node& node, std::span<const TensorType> in) {
  require_f32("input", in[0]);
  softmax_axis(node, in[0]);
  return {in[0]};
}

// Softmax (or, when `log`, its logarithm) along the node's axis.
Tensor softmax_along_axis(const Node& node, const Tensor& x, bool log) {
  const Shape& shape = x.shape();
  const auto axis = static_cast<std::size_t>(softmax_axis(node, {x.dtype(), shape}));
  // The tensor as [outer, extent, inner], softmax along the middle.
  const std::int64_t extent = shape[axis];
  const std::int64_t inner = num_elements(Shape(shape.begin() + axis + 1, shape.end()));
  const std::int64_t outer = num_elements(Shape(shape.begin(), shape.begin() + axis));
  auto xv = x.values<float>();
  Tensor y(DType::f32, shape);
  auto yv = y.values<float>();
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      auto at = [&](std::int64_t e) { return (o * extent + e) * inner + i; };
      // Subtracting the max keeps exp() finite; the result is unchanged.
      double max = -INFINITY;
      for (std::int64_t e = 0; e < extent; ++e) max = std::fmax(max, xv[at(e)]);
      double sum = 0.0;
      for (std::int64_t e = 0; e < extent; ++e) sum += std::exp(xv[at(e)] - max);
      // log(exp(x - max) / sum) = x - max - log(sum): no exp, so no underflow to log(0).
      const double log_sum = std::log(sum);
      for (std::int64_t e = 0; e < extent; ++e) {
        const double shifted = xv[at(e)] - max;
        yv[at(e)] = static_cast<float>(log ? shifted - log_sum : std::exp(shifted) / sum);
      }
    }
  return y;
}

OpSchema softmax_schema(const std::string& name, bool log, const std::string& summary) {
  auto reference = [log](const Node& node, std::span<const Tensor> in) -> std::vector<Tensor> {
    return {softmax_along_axis(node, in[0], log)};
  };
  return make_schema(name, 1, 1, infer_softmax, std::move(reference), summary);
}

}  // namespace

void register_softmax_ops(OpTable& table) {
  add_op(table, softmax_schema("Softmax", false, "exp(x) / sum(exp(x)) along `axis` (default -1)"));
  add_op(table, softmax_schema("LogSoftmax", true, "x - log(sum(exp(x))) along `axis` (default -1)"));
}

}  // namespace kiln::graph::ops

// NegativeLogLikelihoodLoss (ONNX opset 13): the loss of log-probabilities
// against integer class targets. The importer builds SoftmaxCrossEntropyLoss
// from LogSoftmax and this op.
#include "graph/ops/ops.h"
#include "src/base/check.h"

#include <kiln/error.h>

#include <string>
#include <vector>

namespace kiln::graph::ops {
namespace {

enum class Reduction { none, sum, mean };

Reduction read_reduction(const Node& node) {
  const std::string reduction = node.attrs.get_string("reduction", "mean");
  if (reduction == "none") return Reduction::none;
  if (reduction == "sum") return Reduction::sum;
  KILN_CHECK(reduction == "mean", ErrorKind::InvalidArgument,
             "attribute 'reduction' = '" + reduction + "' is not one of 'none', 'sum', 'mean'");
  return Reduction::mean;
}

// input [N, C, d1..dk], target [N, d1..dk] (i32 or i64), weight [C].
std::vector<TensorType> infer_nll(const Node& node, std::span<const TensorType> in) {
  check_known_attributes(node, {"reduction", "ignore_index"});
  const Reduction reduction = read_reduction(node);
  const TensorType& input = in[0];
  const TensorType& target = in[1];
  require_f32("input", input);
  KILN_CHECK(input.shape.size() >= 2, ErrorKind::ShapeMismatch,
             describe("input", input) + " must be [N, C, d1, ...] (rank >= 2)");
  KILN_CHECK(target.dtype == DType::i64 || target.dtype == DType::i32, ErrorKind::Unsupported,
             describe("target", target) + ": targets are i32 or i64 class indices");
  Shape expected = input.shape;
  expected.erase(expected.begin() + 1);
  KILN_CHECK(target.shape == expected, ErrorKind::ShapeMismatch,
             describe("target", target) + " must be " + shape_str(expected) + " for " + describe("input", input));
  if (has_input(node, 2)) {
    require_f32("weight", in[2]);
    KILN_CHECK(in[2].shape == Shape{input.shape[1]}, ErrorKind::ShapeMismatch,
               describe("weight", in[2]) + " must be [" + std::to_string(input.shape[1]) + "] (one per class)");
  }
  return {{DType::f32, reduction == Reduction::none ? expected : Shape{}}};
}

std::vector<Tensor> reference_nll(const Node& node, std::span<const Tensor> in) {
  const Reduction reduction = read_reduction(node);
  const std::int64_t ignore_index = node.attrs.get_int("ignore_index", std::numeric_limits<std::int64_t>::min());
  const bool ignores = node.attrs.has("ignore_index");
  const Shape& shape = in[0].shape();
  const std::int64_t batch = shape[0], classes = shape[1];
  const std::int64_t inner = batch * classes == 0 ? 0 : in[0].numel() / (batch * classes);
  auto x = in[0].values<float>();
  auto class_of = [&](std::int64_t i) -> std::int64_t {
    return in[1].dtype() == DType::i64 ? in[1].values<std::int64_t>()[static_cast<std::size_t>(i)]
                                       : in[1].values<std::int32_t>()[static_cast<std::size_t>(i)];
  };
  const bool weighted = has_input(node, 2);
  Shape loss_shape = shape;
  loss_shape.erase(loss_shape.begin() + 1);
  Tensor losses(DType::f32, loss_shape);
  auto loss = losses.values<float>();
  double total = 0.0, weight_total = 0.0;
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t d = 0; d < inner; ++d) {
      const std::int64_t i = n * inner + d;
      const std::int64_t c = class_of(i);
      if (ignores && c == ignore_index) {
        loss[static_cast<std::size_t>(i)] = 0.0f;
        continue;
      }
      KILN_CHECK(c >= 0 && c < classes, ErrorKind::InvalidArgument,
                 "target " + std::to_string(c) + " at element " + std::to_string(i) + " is not a class in [0, " +
                     std::to_string(classes) + ") nor the ignore_index");
      const double w = weighted ? in[2].values<float>()[static_cast<std::size_t>(c)] : 1.0;
      const double value = -static_cast<double>(x[static_cast<std::size_t>((n * classes + c) * inner + d)]) * w;
      loss[static_cast<std::size_t>(i)] = static_cast<float>(value);
      total += value;
      weight_total += w;
    }
  if (reduction == Reduction::none) return {losses};
  Tensor out(DType::f32, {});
  // A mean over no counted element is 0/0, as in ONNX's reference.
  out.values<float>()[0] = static_cast<float>(reduction == Reduction::sum ? total : total / weight_total);
  return {out};
}

}  // namespace

void register_loss_ops(OpTable& table) {
  add_op(table, make_schema("NegativeLogLikelihoodLoss", 2, 3, infer_nll, reference_nll,
                            "-input[n, target[n, d], d] * weight[target], reduced by `reduction` (none, sum, mean "
                            "over the weights); targets equal to ignore_index count 0"));
}

}  // namespace kiln::graph::ops

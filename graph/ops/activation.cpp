// Elementwise activations on f32: Relu, Sigmoid, Tanh, Gelu, Clip.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>

#include "graph/ops/ops.h"

namespace kiln::graph::ops {

namespace {

double gelu_exact(double x) { return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2)); }

double gelu_tanh(double x) {
  const double k = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

ElementFn make_gelu(const Node& node) {
  const std::string approximate = node.attrs.get_string("approximate", "none");
  if (approximate == "none") return gelu_exact;
  if (approximate == "tanh") return gelu_tanh;
  throw_error(ErrorKind::InvalidArgument,
              "attribute 'approximate' is '" + approximate + "'; expected \"none\" or \"tanh\"");
}

ElementFn make_clip(const Node& node) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const double lo = node.attrs.get_float("min", -inf);
  const double hi = node.attrs.get_float("max", inf);
  KILN_CHECK(!std::isnan(lo) && !std::isnan(hi), ErrorKind::InvalidArgument,
             "attributes 'min' and 'max' must not be NaN");
  KILN_CHECK(lo <= hi, ErrorKind::InvalidArgument,
             "attribute 'min' (" + std::to_string(lo) + ") is greater than 'max' (" + std::to_string(hi) + ")");
  // NaN inputs stay NaN, as in ONNX.
  return [lo, hi](double x) { return std::isnan(x) ? x : std::min(std::max(x, lo), hi); };
}

}  // namespace

void register_activation_ops(OpTable& table) {
  add_op(table,
         f32_unary_schema(
             "Relu", {},
             [](const Node&) -> ElementFn { return [](double x) { return std::isnan(x) ? x : std::max(x, 0.0); }; },
             "max(x, 0)"));
  add_op(table, f32_unary_schema(
                    "Sigmoid", {},
                    [](const Node&) -> ElementFn { return [](double x) { return 1.0 / (1.0 + std::exp(-x)); }; },
                    "1 / (1 + exp(-x))"));
  add_op(table,
         f32_unary_schema(
             "Tanh", {}, [](const Node&) -> ElementFn { return [](double x) { return std::tanh(x); }; }, "tanh(x)"));
  add_op(table,
         f32_unary_schema("Gelu", {"approximate"}, make_gelu, "x * Phi(x); approximate=\"tanh\" uses the tanh formula"));
  add_op(table, f32_unary_schema("Clip", {"min", "max"}, make_clip, "min(max(x, min), max)"));
}

}  // namespace kiln::graph::ops

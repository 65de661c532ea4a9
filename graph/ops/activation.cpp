// Elementwise activations on f32: Relu, Sigmoid, Tanh, Gelu, Clip, and the
// exporters' others (LeakyRelu, Elu, Selu, Celu, ThresholdedRelu, Softplus,
// Softsign, Mish).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>

#include "graph/ops/ops.h"
#include "src/base/check.h"

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

// log(1 + e^x) without overflow for large x.
double softplus(double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); }

// An ElementFn from a formula of x and the node's float attribute `name`
// (default `fallback`).
template <class F>
std::function<ElementFn(const Node&)> with_alpha(double fallback, F formula) {
  return [fallback, formula](const Node& node) -> ElementFn {
    const double alpha = node.attrs.get_float("alpha", fallback);
    return [alpha, formula](double x) { return formula(x, alpha); };
  };
}

ElementFn make_selu(const Node& node) {
  const double alpha = node.attrs.get_float("alpha", 1.67326319217681884765625);
  const double gamma = node.attrs.get_float("gamma", 1.05070102214813232421875);
  return [alpha, gamma](double x) { return x > 0 ? gamma * x : std::isnan(x) ? x : gamma * alpha * std::expm1(x); };
}

ElementFn make_shrink(const Node& node) {
  const double lambd = node.attrs.get_float("lambd", 0.5);
  const double bias = node.attrs.get_float("bias", 0.0);
  return [lambd, bias](double x) { return x < -lambd ? x + bias : x > lambd ? x - bias : std::isnan(x) ? x : 0.0; };
}

ElementFn make_celu(const Node& node) {
  const double alpha = node.attrs.get_float("alpha", 1.0);
  KILN_CHECK(alpha != 0.0, ErrorKind::InvalidArgument, "Celu's attribute 'alpha' must not be 0");
  return [alpha](double x) { return x >= 0 || std::isnan(x) ? x : alpha * std::expm1(x / alpha); };
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
  add_op(table, f32_unary_schema("LeakyRelu", {"alpha"},
                                   with_alpha(0.01, [](double x, double a) { return x < 0 ? a * x : x; }),
                                   "x, or alpha * x below 0; alpha 0.01"));
  add_op(table, f32_unary_schema("Elu", {"alpha"},
                                   with_alpha(1.0, [](double x, double a) { return x < 0 ? a * std::expm1(x) : x; }),
                                   "x, or alpha * (e^x - 1) below 0; alpha 1"));
  add_op(table, f32_unary_schema("Selu", {"alpha", "gamma"}, make_selu,
                                   "gamma * x, or gamma * alpha * (e^x - 1) at or below 0; alpha 1.6733, gamma 1.0507"));
  add_op(table, f32_unary_schema("Celu", {"alpha"}, make_celu,
                                   "x, or alpha * (e^(x / alpha) - 1) below 0; alpha 1"));
  add_op(table, f32_unary_schema("ThresholdedRelu", {"alpha"},
                                   with_alpha(1.0, [](double x, double a) { return x > a || std::isnan(x) ? x : 0.0; }),
                                   "x above alpha, else 0; alpha 1"));
  add_op(table, f32_unary_schema("Shrink", {"lambd", "bias"}, make_shrink,
                                   "x + bias below -lambd, x - bias above lambd, else 0; lambd 0.5, bias 0"));
  add_op(table, f32_unary_schema(
                    "Softplus", {}, [](const Node&) -> ElementFn { return softplus; }, "log(1 + e^x)"));
  add_op(table, f32_unary_schema(
                    "Softsign", {}, [](const Node&) -> ElementFn { return [](double x) { return x / (1 + std::fabs(x)); }; },
                    "x / (1 + |x|)"));
  add_op(table, f32_unary_schema(
                    "Mish", {}, [](const Node&) -> ElementFn { return [](double x) { return x * std::tanh(softplus(x)); }; },
                    "x * tanh(log(1 + e^x))"));
}

}  // namespace kiln::graph::ops

// Elementwise ops: numpy-broadcast binary arithmetic, activations (kiln's Silu too), Clip, and
// inference BatchNormalization as a per-channel affine map.
#include "graph/broadcast.h"
#include "src/base/check.h"
#include "src/lower/index.h"
#include "src/lower/lowerings.h"

#include <kiln/error.h>

#include <cctype>
#include <cmath>
#include <numbers>

namespace kiln::lower {

using kir::Access;
using kir::Expr;
using kir::ScalarType;

namespace {

bool is_binary_op(const std::string& op) { return op == "Add" || op == "Sub" || op == "Mul" || op == "Div"; }

Expr apply_binary(const std::string& op, Expr a, Expr b) {
  if (op == "Add") return a + b;
  if (op == "Sub") return a - b;
  if (op == "Mul") return a * b;
  KILN_ASSERT(op == "Div");
  return a / b;
}

// Gelu with the exact erf form or the tanh approximation.
Expr gelu(Expr x, const std::string& approximate) {
  const Expr half_x = kir::f32(0.5) * x;
  if (approximate == "tanh") {
    const double sqrt_2_over_pi = std::sqrt(2.0 / std::numbers::pi);
    const Expr inner = kir::f32(sqrt_2_over_pi) * (x + kir::f32(0.044715) * x * x * x);
    return half_x * (kir::f32(1.0) + kir::tanh(inner));
  }
  return half_x * (kir::f32(1.0) + kir::erf(x * kir::f32(1.0 / std::numbers::sqrt2)));
}

// Clip bounds; an infinite (or absent) bound is left out rather than spelled
// as an infinity literal, which not every target language has.
Expr clip(Expr x, const graph::Attributes& attrs) {
  const double lo = attrs.get_float("min", -INFINITY);
  const double hi = attrs.get_float("max", INFINITY);
  if (std::isfinite(lo)) x = kir::max(x, kir::f32(lo));
  if (std::isfinite(hi)) x = kir::min(x, kir::f32(hi));
  return x;
}

// log(1 + e^x) without overflow: max(x, 0) + log(1 + e^-|x|).
Expr softplus(Expr x) {
  return kir::max(x, kir::f32(0.0)) + kir::log(kir::f32(1.0) + kir::exp(-kir::abs(x)));
}

Expr apply_unary(const graph::Node& node, Expr x) {
  const std::string& op = node.op;
  if (op == "Relu") return kir::max(x, kir::f32(0.0));
  if (op == "Sigmoid") return kir::f32(1.0) / (kir::f32(1.0) + kir::exp(-x));
  if (op == "Silu") return x / (kir::f32(1.0) + kir::exp(-x));
  if (op == "Tanh") return kir::tanh(x);
  if (op == "Gelu") return gelu(x, node.attrs.get_string("approximate", "none"));
  if (op == "Clip") return clip(x, node.attrs);
  // select(x < 0, ..., x) rather than min/max: NaN stays NaN on every target.
  const auto alpha = [&](double fallback) { return kir::f32(node.attrs.get_float("alpha", fallback)); };
  if (op == "LeakyRelu") return kir::select(x < kir::f32(0.0), alpha(0.01) * x, x);
  if (op == "Elu") return kir::select(x < kir::f32(0.0), alpha(1.0) * (kir::exp(x) - kir::f32(1.0)), x);
  if (op == "Selu") {
    const double a = node.attrs.get_float("alpha", 1.67326319217681884765625);
    const double g = node.attrs.get_float("gamma", 1.05070102214813232421875);
    return kir::select(x > kir::f32(0.0), kir::f32(g) * x, kir::f32(g * a) * (kir::exp(x) - kir::f32(1.0)));
  }
  if (op == "Celu") {
    const double a = node.attrs.get_float("alpha", 1.0);
    return kir::select(x < kir::f32(0.0), kir::f32(a) * (kir::exp(x * kir::f32(1.0 / a)) - kir::f32(1.0)), x);
  }
  if (op == "ThresholdedRelu") return kir::select(x <= alpha(1.0), kir::f32(0.0), x);
  if (op == "Softsign") return x / (kir::f32(1.0) + kir::abs(x));
  if (op == "Shrink") {
    const double lambd = node.attrs.get_float("lambd", 0.5);
    const double bias = node.attrs.get_float("bias", 0.0);
    return kir::select(x < kir::f32(-lambd), x + kir::f32(bias),
                       kir::select(x > kir::f32(lambd), x - kir::f32(bias), x * kir::f32(0.0)));
  }
  if (op == "Softplus") return softplus(x);
  KILN_ASSERT(op == "Mish");
  return x * kir::tanh(softplus(x));
}

// "elementwise_add", "elementwise_tanh": the prefix keeps names such as tanh
// and div from colliding with C math and stdlib functions in CUDA/HIP.
std::string kernel_name(const std::string& op) {
  std::string name = "elementwise_";
  for (char c : op) name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

}  // namespace

std::optional<std::string> elementwise_unsupported(const OpContext& ctx) {
  const std::string& op = ctx.node.op;
  const DType dtype = ctx.outputs[0].dtype;
  if (dtype == DType::boolean || (!is_binary_op(op) && dtype != DType::f32))
    return "dtype " + std::string(dtype_name(dtype)) + " is not supported by " + op + "'s kernel (" +
           (is_binary_op(op) ? "f32, i32 and i64" : "f32 only") + ")";
  if (is_binary_op(op)) {
    for (std::size_t slot = 0; slot < 2; ++slot)
      if (!graph::is_broadcastable_to(ctx.input_shape(slot), ctx.output_shape()))
        return "input " + std::to_string(slot) + " " + shape_str(ctx.input_shape(slot)) +
               " does not broadcast to output " + shape_str(ctx.output_shape());
    return std::nullopt;
  }
  if (ctx.input_shape(0) != ctx.output_shape())
    return "output shape " + shape_str(ctx.output_shape()) + " differs from input shape " + shape_str(ctx.input_shape(0));
  if (op == "Gelu") {
    const std::string approximate = ctx.node.attrs.get_string("approximate", "none");
    if (approximate != "none" && approximate != "tanh")
      return "approximate='" + approximate + "' is not one of 'none', 'tanh'";
  }
  if (op == "Celu" && ctx.node.attrs.get_float("alpha", 1.0) == 0.0) return "Celu's alpha must not be 0";
  if (op == "Clip") {
    const double lo = ctx.node.attrs.get_float("min", -INFINITY);
    const double hi = ctx.node.attrs.get_float("max", INFINITY);
    if (std::isnan(lo) || std::isnan(hi)) return "Clip bounds must not be NaN";
  }
  return std::nullopt;
}

kir::Kernel lower_elementwise(const OpContext& ctx) {
  const std::string& op = ctx.node.op;
  const Shape& out_shape = ctx.output_shape();
  kir::Kernel kernel = make_kernel(kernel_name(op), num_elements(out_shape));
  const Expr index = kir::global_index();

  if (is_binary_op(op)) {
    // Integer Div truncates toward zero, as the reference does.
    const ScalarType type = element_type(ctx.outputs[0].dtype);
    const kir::Buf a = kernel.add_buffer("a", type, Access::read);
    const kir::Buf b = kernel.add_buffer("b", type, Access::read);
    const kir::Buf y = kernel.add_buffer("y", type, Access::write);
    const Shape inputs[] = {ctx.input_shape(0), ctx.input_shape(1)};
    const std::vector<Expr> offsets = broadcast_offsets(kernel.body, index, out_shape, inputs, "bc");
    const Expr value = apply_binary(op, kir::load(a, offsets[0], type), kir::load(b, offsets[1], type));
    kernel.body.push_back(kir::store(y, index, value));
    return kernel;
  }

  const kir::Buf x = kernel.add_buffer("x", ScalarType::f32, Access::read);
  const kir::Buf y = kernel.add_buffer("y", ScalarType::f32, Access::write);
  // Read once: the activations use x several times.
  kernel.body.push_back(kir::declare("xv", ScalarType::f32, kir::load(x, index, ScalarType::f32)));
  kernel.body.push_back(kir::store(y, index, apply_unary(ctx.node, kir::var("xv", ScalarType::f32))));
  return kernel;
}

std::optional<std::string> batch_norm_unsupported(const OpContext& ctx) {
  const Shape& shape = ctx.input_shape(0);
  if (shape.size() < 2) return "input rank " + std::to_string(shape.size()) + " has no channel dimension";
  if (ctx.output_shape() != shape)
    return "output shape " + shape_str(ctx.output_shape()) + " differs from input shape " + shape_str(shape);
  if (ctx.node.attrs.get_int("training_mode", 0) != 0) return "training_mode=1 is not supported (inference only)";
  for (std::size_t slot = 1; slot < 5; ++slot)
    if (ctx.input_shape(slot) != Shape{shape[1]})
      return "input " + std::to_string(slot) + " has shape " + shape_str(ctx.input_shape(slot)) + ", expected [" +
             std::to_string(shape[1]) + "]";
  return std::nullopt;
}

kir::Kernel lower_batch_norm(const OpContext& ctx) {
  const Shape& shape = ctx.input_shape(0);
  const double epsilon = ctx.node.attrs.get_float("epsilon", 1e-5);
  kir::Kernel kernel = make_kernel("batch_norm", num_elements(shape));
  const kir::Buf x = kernel.add_buffer("x", ScalarType::f32, Access::read);
  const kir::Buf scale = kernel.add_buffer("scale", ScalarType::f32, Access::read);
  const kir::Buf bias = kernel.add_buffer("bias", ScalarType::f32, Access::read);
  const kir::Buf mean = kernel.add_buffer("mean", ScalarType::f32, Access::read);
  const kir::Buf variance = kernel.add_buffer("variance", ScalarType::f32, Access::read);
  const kir::Buf y = kernel.add_buffer("y", ScalarType::f32, Access::write);

  const Expr index = kir::global_index();
  // The channel operands broadcast as [C, 1, ..., 1] against [N, C, ...].
  Shape channel_shape(shape.size() - 1, 1);
  channel_shape[0] = shape[1];
  const Shape operand_shapes[] = {channel_shape};
  const Expr channel = broadcast_offsets(kernel.body, index, shape, operand_shapes, "ch")[0];
  auto load_f32 = [](kir::Buf buffer, Expr at) { return kir::load(buffer, at, ScalarType::f32); };

  const Expr inv_std = kir::rsqrt(load_f32(variance, channel) + kir::f32(epsilon));
  const Expr normalized = (load_f32(x, index) - load_f32(mean, channel)) * inv_std;
  kernel.body.push_back(kir::store(y, index, normalized * load_f32(scale, channel) + load_f32(bias, channel)));
  return kernel;
}

}  // namespace kiln::lower

// Lowerings of the math op family: f32 unary math, HardSigmoid/HardSwish,
// Pow, variadic Min/Max/Sum, the Reduce* ops, CumSum, one
// kernel each; and the ops of any element type (f32, i32, i64, bool): Cast,
// comparisons, logic, Where, ArgMax/ArgMin, and Min/Max/Sum of integers.
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

Expr load_f32(kir::Buf buffer, Expr at) { return kir::load(buffer, std::move(at), ScalarType::f32); }

// "elementwise_hardswish", "reduce_reducemean": prefixed so that no kernel is
// named like a C math function in CUDA/HIP.
std::string kernel_name(const std::string& prefix, const std::string& op) {
  std::string name = prefix;
  for (char c : op) name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

// ---- unary ops ----------------------------------------------------------------------

// sin(s) for s in [-pi/2, pi/2] by its Taylor polynomial to s^11 (truncation
// error below 6e-8, under f32 rounding): kir has no sin/cos.
Expr sin_polynomial(std::vector<kir::Stmt>& body, Expr s, const std::string& prefix) {
  body.push_back(kir::declare(prefix + "s2", ScalarType::f32, s * s));
  const Expr s2 = kir::var(prefix + "s2", ScalarType::f32);
  Expr p = kir::f32(-1.0 / 39916800.0);
  for (double c : {1.0 / 362880.0, -1.0 / 5040.0, 1.0 / 120.0, -1.0 / 6.0}) p = kir::f32(c) + s2 * p;
  return s + s * s2 * p;
}

// `value` rounded toward zero to `bits` significant bits, so that its product
// with an integer below 2^(24 - bits) is exact in f32.
double leading_bits(double value, int bits) {
  int exponent = 0;
  const double mantissa = std::frexp(value, &exponent);
  return std::ldexp(std::trunc(std::ldexp(mantissa, bits)), exponent - bits);
}

// Sin or Cos of x: reduce x to r = x - turns * 2pi in [-pi, pi], with 2pi split
// in three parts (Cody-Waite) so that the reduction stays accurate for |x| up
// to about 2^12 turns; then fold r into [-pi/2, pi/2]. Helpers are named
// with `prefix` (one kernel may take both).
Expr sin_or_cos(std::vector<kir::Stmt>& body, Expr x, bool cosine, const std::string& prefix = "") {
  constexpr double two_pi = 2.0 * std::numbers::pi;
  const double two_pi_1 = leading_bits(two_pi, 12);
  const double two_pi_2 = leading_bits(two_pi - two_pi_1, 12);
  const double two_pi_3 = two_pi - two_pi_1 - two_pi_2;
  constexpr double half_pi = std::numbers::pi / 2.0;
  body.push_back(kir::declare(prefix + "turns", ScalarType::f32, kir::floor(x * kir::f32(1.0 / two_pi) + kir::f32(0.5))));
  const Expr turns = kir::var(prefix + "turns", ScalarType::f32);
  body.push_back(kir::declare(
      prefix + "r", ScalarType::f32,
      ((x - turns * kir::f32(two_pi_1)) - turns * kir::f32(two_pi_2)) - turns * kir::f32(two_pi_3)));
  const Expr r = kir::var(prefix + "r", ScalarType::f32);
  Expr folded;
  if (cosine) {
    folded = kir::f32(half_pi) - kir::abs(r);  // cos(r) = sin(pi/2 - |r|)
  } else {
    // sin(r) = sin(pi - r) = sin(-pi - r)
    folded = kir::select(r > kir::f32(half_pi), kir::f32(std::numbers::pi) - r,
                         kir::select(r < kir::f32(-half_pi), kir::f32(-std::numbers::pi) - r, r));
  }
  body.push_back(kir::declare(prefix + "folded", ScalarType::f32, folded));
  return sin_polynomial(body, kir::var(prefix + "folded", ScalarType::f32), prefix);
}

// atan(x): |x| > 1 folds to pi/2 - atan(1/|x|) (atan(inf) = pi/2), then
// t > tan(pi/12) shifts by pi/6 through atan(t) = pi/6 + atan((t - 1/sqrt3) /
// (1 + t/sqrt3)), leaving |u| <= tan(pi/12) for the Taylor series to u^13
// (truncation below 3e-9); the sign comes back last. NaN stays NaN.
Expr arctangent(std::vector<kir::Stmt>& body, Expr x) {
  constexpr double pi = std::numbers::pi;
  const double tan_pi_12 = 2.0 - std::sqrt(3.0);
  const double inv_sqrt3 = 1.0 / std::sqrt(3.0);
  body.push_back(kir::declare("at_a", ScalarType::f32, kir::abs(x)));
  const Expr a = kir::var("at_a", ScalarType::f32);
  const Expr inverted = a > kir::f32(1.0);
  body.push_back(kir::declare("at_t", ScalarType::f32, kir::select(inverted, kir::f32(1.0) / a, a)));
  const Expr t = kir::var("at_t", ScalarType::f32);
  const Expr shifted = t > kir::f32(tan_pi_12);
  body.push_back(kir::declare(
      "at_u", ScalarType::f32,
      kir::select(shifted, (t - kir::f32(inv_sqrt3)) / (kir::f32(1.0) + t * kir::f32(inv_sqrt3)), t)));
  const Expr u = kir::var("at_u", ScalarType::f32);
  body.push_back(kir::declare("at_u2", ScalarType::f32, u * u));
  const Expr u2 = kir::var("at_u2", ScalarType::f32);
  Expr p = kir::f32(1.0 / 13.0);
  for (double c : {-1.0 / 11.0, 1.0 / 9.0, -1.0 / 7.0, 1.0 / 5.0, -1.0 / 3.0}) p = kir::f32(c) + u2 * p;
  body.push_back(kir::declare("at_r", ScalarType::f32, u + u * u2 * p + kir::select(shifted, kir::f32(pi / 6.0), kir::f32(0.0))));
  const Expr r = kir::var("at_r", ScalarType::f32);
  body.push_back(kir::declare("at_m", ScalarType::f32, kir::select(inverted, kir::f32(pi / 2.0) - r, r)));
  const Expr m = kir::var("at_m", ScalarType::f32);
  return kir::select(x < kir::f32(0.0), -m, m);
}

// The value of a unary op at x (a variable, read once); may declare helpers in body.
Expr apply_unary(const graph::Node& node, std::vector<kir::Stmt>& body, Expr x) {
  const std::string& op = node.op;
  if (op == "Sqrt") return kir::sqrt(x);
  if (op == "Exp") return kir::exp(x);
  if (op == "Log") return kir::log(x);
  if (op == "Erf") return kir::erf(x);
  if (op == "Neg") return -x;
  if (op == "Abs") return kir::abs(x);
  if (op == "Reciprocal") return kir::f32(1.0) / x;
  if (op == "Floor") return kir::floor(x);
  if (op == "Ceil") return kir::ceil(x);
  if (op == "Round") {
    // Ties to even: floor(x + 0.5), less one where x sat halfway below an odd result.
    body.push_back(kir::declare("up", ScalarType::f32, kir::floor(x + kir::f32(0.5))));
    const Expr up = kir::var("up", ScalarType::f32);
    const Expr tie = kir::eq(up - x, kir::f32(0.5));
    const Expr odd = kir::eq(up - kir::f32(2.0) * kir::floor(up * kir::f32(0.5)), kir::f32(1.0));
    return kir::select(tie, kir::select(odd, up - kir::f32(1.0), up), up);
  }
  if (op == "Sinh") return (kir::exp(x) - kir::exp(-x)) * kir::f32(0.5);
  if (op == "Cosh") return (kir::exp(x) + kir::exp(-x)) * kir::f32(0.5);
  // asinh(-x) = -asinh(x): the formula on |x| keeps negative inputs accurate.
  if (op == "Asinh") {
    const Expr magnitude = kir::log(kir::abs(x) + kir::sqrt(x * x + kir::f32(1.0)));
    return kir::select(x < kir::f32(0.0), -magnitude, magnitude);
  }
  if (op == "Acosh") return kir::log(x + kir::sqrt(x * x - kir::f32(1.0)));
  if (op == "Atanh") return kir::f32(0.5) * kir::log((kir::f32(1.0) + x) / (kir::f32(1.0) - x));
  // Zero and NaN are their own sign.
  if (op == "Sign") return kir::select(x > kir::f32(0.0), kir::f32(1.0), kir::select(x < kir::f32(0.0), kir::f32(-1.0), x));
  if (op == "Sin" || op == "Cos") return sin_or_cos(body, x, op == "Cos");
  if (op == "Tan") return sin_or_cos(body, x, false, "sin_") / sin_or_cos(body, x, true, "cos_");
  if (op == "Atan") return arctangent(body, x);
  // asin(x) = atan(x / sqrt((1 - x)(1 + x))): the product keeps precision
  // near |x| = 1, where the quotient goes to +-inf and atan to +-pi/2;
  // |x| > 1 gives NaN. acos(x) = 2 atan(sqrt((1 - x) / (1 + x))), accurate
  // near x = 1 where pi/2 - asin(x) would cancel.
  if (op == "Asin") return arctangent(body, x / kir::sqrt((kir::f32(1.0) - x) * (kir::f32(1.0) + x)));
  if (op == "Acos") return kir::f32(2.0) * arctangent(body, kir::sqrt((kir::f32(1.0) - x) / (kir::f32(1.0) + x)));
  if (op == "HardSigmoid") {
    const double alpha = node.attrs.get_float("alpha", 0.2);
    const double beta = node.attrs.get_float("beta", 0.5);
    return kir::max(kir::f32(0.0), kir::min(kir::f32(1.0), kir::f32(alpha) * x + kir::f32(beta)));
  }
  KILN_ASSERT(op == "HardSwish");
  return x * kir::max(kir::f32(0.0), kir::min(kir::f32(1.0), x * kir::f32(1.0 / 6.0) + kir::f32(0.5)));
}

std::optional<std::string> unary_unsupported(const OpContext& ctx) {
  if (ctx.input_shape(0) != ctx.output_shape())
    return "output shape " + shape_str(ctx.output_shape()) + " differs from input shape " + shape_str(ctx.input_shape(0));
  return std::nullopt;
}

kir::Kernel lower_unary(const OpContext& ctx) {
  kir::Kernel kernel = make_kernel(kernel_name("elementwise_", ctx.node.op), num_elements(ctx.output_shape()));
  const kir::Buf x = kernel.add_buffer("x", ScalarType::f32, Access::read);
  const kir::Buf y = kernel.add_buffer("y", ScalarType::f32, Access::write);
  const Expr index = kir::global_index();
  kernel.body.push_back(kir::declare("xv", ScalarType::f32, load_f32(x, index)));
  const Expr value = apply_unary(ctx.node, kernel.body, kir::var("xv", ScalarType::f32));
  kernel.body.push_back(kir::store(y, index, value));
  return kernel;
}

// ---- Pow, Min, Max: numpy broadcasting over every input --------------------------

std::optional<std::string> broadcast_unsupported(const OpContext& ctx) {
  const std::string& op = ctx.node.op;
  const DType dtype = ctx.outputs[0].dtype;
  if (dtype == DType::boolean && (op == "Max" || op == "Min" || op == "Sum" || op == "Mean" || op == "Pow" || op == "Mod"))
    return op + " of bool tensors";
  if ((op == "Mean" || op == "Pow") && dtype != DType::f32)
    return op + " of " + std::string(dtype_name(dtype)) + " tensors (f32 only)";
  for (std::size_t slot = 0; slot < ctx.inputs.size(); ++slot)
    if (!graph::is_broadcastable_to(ctx.input_shape(slot), ctx.output_shape()))
      return "input " + std::to_string(slot) + " " + shape_str(ctx.input_shape(slot)) +
             " does not broadcast to output " + shape_str(ctx.output_shape());
  return std::nullopt;
}

// x ^ y as ONNX (C's pow) defines it: GLSL's pow is undefined for a negative
// base, so that case takes |x| ^ y and restores the sign for integer y
// (odd y: negative). A negative base with a fractional y stays with the
// target's pow (NaN on every target kiln has).
Expr signed_pow(std::vector<kir::Stmt>& body, Expr x, Expr y) {
  body.push_back(kir::declare("magnitude", ScalarType::f32, kir::pow(kir::abs(x), y)));
  const Expr magnitude = kir::var("magnitude", ScalarType::f32);
  const Expr integer_exponent = kir::eq(kir::floor(y), y);
  const Expr odd_exponent = kir::eq(y - kir::f32(2.0) * kir::floor(y * kir::f32(0.5)), kir::f32(1.0));
  const Expr negative_base = kir::select(odd_exponent, -magnitude, magnitude);
  return kir::select(x < kir::f32(0.0),
                     kir::select(integer_exponent, negative_base, kir::pow(x, y)), magnitude);
}

// Mod as the reference's remainder_of: integers from truncating division
// (b = -1 gives 0: the lowest value / -1 is undefined on GPUs), moved to b's
// sign unless fmod; f32 (always fmod) as a - b * trunc(a / b), corrected into
// C fmod's range (|r| < |b|, a's sign) where a / b rounded to an integer.
// Integer division by zero is undefined on GPUs, as Div's is.
Expr remainder(std::vector<kir::Stmt>& body, Expr a, Expr b, bool fmod) {
  const ScalarType type = a.type();
  if (type == ScalarType::f32) {
    body.push_back(kir::declare("q", ScalarType::f32, a / b));
    const Expr q = kir::var("q", ScalarType::f32);
    const Expr truncated = kir::select(q < kir::f32(0.0), kir::ceil(q), kir::floor(q));
    body.push_back(kir::declare("r", ScalarType::f32, a - b * truncated));
    const Expr r = kir::var("r", ScalarType::f32);
    const Expr magnitude = kir::abs(b);
    return kir::select(a >= kir::f32(0.0) && r < kir::f32(0.0), r + magnitude,
                       kir::select(a < kir::f32(0.0) && r > kir::f32(0.0), r - magnitude, r));
  }
  const Expr zero = constant_of(type, 0.0);
  body.push_back(kir::declare("r", type, kir::select(kir::eq(b, constant_of(type, -1.0)), zero, a - (a / b) * b)));
  const Expr r = kir::var("r", type);
  if (fmod) return r;
  return kir::select(kir::ne(r, zero) && kir::ne(r < zero, b < zero), r + b, r);
}

// A kernel over the output elements reading every input at its numpy
// broadcast offset: buffers x0.. (each of its input's element type), then y.
struct BroadcastKernel {
  kir::Kernel kernel;
  kir::Buf y;
  Expr index;
  std::vector<Expr> loads;  // input slot -> its element for this invocation
};

BroadcastKernel make_broadcast_kernel(const OpContext& ctx, const std::string& prefix) {
  const Shape& out_shape = ctx.output_shape();
  BroadcastKernel k{make_kernel(kernel_name(prefix, ctx.node.op), num_elements(out_shape)), {}, kir::global_index(), {}};
  std::vector<kir::Buf> inputs;
  std::vector<Shape> shapes;
  for (std::size_t slot = 0; slot < ctx.inputs.size(); ++slot) {
    inputs.push_back(k.kernel.add_buffer("x" + std::to_string(slot), element_type(ctx.inputs[slot]->dtype), Access::read));
    shapes.push_back(ctx.input_shape(slot));
  }
  k.y = k.kernel.add_buffer("y", element_type(ctx.outputs[0].dtype), Access::write);
  const std::vector<Expr> offsets = broadcast_offsets(k.kernel.body, k.index, out_shape, shapes, "bc");
  for (std::size_t slot = 0; slot < inputs.size(); ++slot)
    k.loads.push_back(kir::load(inputs[slot], offsets[slot], element_type(ctx.inputs[slot]->dtype)));
  return k;
}

kir::Kernel lower_broadcast(const OpContext& ctx) {
  const std::string& op = ctx.node.op;
  BroadcastKernel k = make_broadcast_kernel(ctx, "elementwise_");
  kir::Kernel& kernel = k.kernel;
  const ScalarType type = element_type(ctx.outputs[0].dtype);
  // Values in the output's type: Pow's exponent may be an integer tensor.
  std::vector<Expr> values;
  for (std::size_t slot = 0; slot < k.loads.size(); ++slot) {
    const std::string name = "v" + std::to_string(slot);
    const Expr& loaded = k.loads[slot];
    kernel.body.push_back(kir::declare(name, type, loaded.type() == type ? loaded : kir::cast(type, loaded)));
    values.push_back(kir::var(name, type));
  }
  Expr result;
  if (op == "Pow") {
    result = signed_pow(kernel.body, values[0], values[1]);
  } else if (op == "Mod") {
    result = remainder(kernel.body, values[0], values[1], ctx.node.attrs.get_int("fmod", 0) != 0);
  } else if (op == "Sum" || op == "Mean") {
    result = values[0];
    for (std::size_t slot = 1; slot < values.size(); ++slot) result = result + values[slot];
    if (op == "Mean") result = result * kir::f32(1.0 / static_cast<double>(values.size()));
  } else {
    KILN_ASSERT(op == "Max" || op == "Min");
    result = values[0];
    for (std::size_t slot = 1; slot < values.size(); ++slot)
      result = op == "Max" ? kir::max(result, values[slot]) : kir::min(result, values[slot]);
  }
  kernel.body.push_back(kir::store(k.y, k.index, result));
  return kernel;
}

// ---- reductions ---------------------------------------------------------------------

// The reduced axes of a Reduce* node (see graph/ops/reduce.cpp): absent or
// empty `axes` reduce everything unless noop_with_empty_axes=1.
std::vector<bool> reduced_axes(const OpContext& ctx) {
  const std::size_t rank = ctx.input_shape(0).size();
  const std::vector<std::int64_t> axes = ctx.node.attrs.get_ints("axes", {});
  if (axes.empty()) return std::vector<bool>(rank, ctx.node.attrs.get_int("noop_with_empty_axes", 0) == 0);
  std::vector<bool> reduced(rank, false);
  const auto signed_rank = static_cast<std::int64_t>(rank);
  for (std::int64_t axis : axes) {
    KILN_CHECK(axis >= -signed_rank && axis < signed_rank, ErrorKind::InvalidArgument,
               "attribute 'axes' " + shape_str(axes) + " is out of range for rank " + std::to_string(rank));
    reduced[static_cast<std::size_t>(axis < 0 ? axis + signed_rank : axis)] = true;
  }
  return reduced;
}

std::optional<std::string> reduce_unsupported(const OpContext& ctx) {
  reduced_axes(ctx);  // validates the axes
  return std::nullopt;
}

// What a reduction over no elements gives (an empty axis), as the reference
// and ONNX define it: the sum's 0, the product's 1, max -inf, min +inf, the
// mean 0 / 0 (NaN), the log of an empty sum -inf.
double empty_reduction(const std::string& op) {
  if (op == "ReduceProd") return 1.0;
  if (op == "ReduceMax" || op == "ReduceLogSum" || op == "ReduceLogSumExp") return -INFINITY;
  if (op == "ReduceMin") return INFINITY;
  if (op == "ReduceMean") return NAN;
  return 0.0;
}

// One invocation per output element: the kept coordinates give a base offset
// into the input and one loop per run of adjacent reduced axes walks the rest.
kir::Kernel lower_reduce(const OpContext& ctx) {
  const std::string& op = ctx.node.op;
  const Shape& shape = ctx.input_shape(0);
  const std::vector<bool> reduced = reduced_axes(ctx);
  Shape kept_shape = shape;
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (reduced[d]) kept_shape[d] = 1;
  KILN_ASSERT(num_elements(kept_shape) == num_elements(ctx.output_shape()));

  kir::Kernel kernel = make_kernel(kernel_name("reduce_", op.substr(6)), num_elements(kept_shape));
  const kir::Buf x = kernel.add_buffer("x", ScalarType::f32, Access::read);
  const kir::Buf y = kernel.add_buffer("y", ScalarType::f32, Access::write);
  const Expr index = kir::global_index();
  if (num_elements(shape) == 0) {
    // An empty reduced axis: every output element is the empty reduction.
    kernel.body.push_back(kir::store(y, index, kir::f32(empty_reduction(op))));
    return kernel;
  }
  const std::vector<Expr> coords = unravel(kernel.body, index, kept_shape, "o");
  const graph::Strides strides = graph::row_major_strides(shape);
  IndexSum base_sum;
  for (std::size_t d = 0; d < shape.size(); ++d) base_sum.add(coords[d], strides[d]);
  const Expr base = declare_index(kernel.body, "base", base_sum.expr());

  // Runs of adjacent reduced axes are contiguous in a row-major input: one loop each.
  struct ReducedRun {
    std::int64_t extent;
    std::int64_t stride;
  };
  std::vector<ReducedRun> runs;
  std::int64_t count = 1;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d] || shape[d] == 1) continue;
    count *= shape[d];
    if (!runs.empty() && d > 0 && reduced[d - 1] && runs.back().stride == strides[d - 1])
      runs.back() = {runs.back().extent * shape[d], strides[d]};
    else
      runs.push_back({shape[d], strides[d]});
  }

  IndexSum offset;
  offset.add(base);
  for (std::size_t k = 0; k < runs.size(); ++k) offset.add(kir::var("r" + std::to_string(k), ScalarType::i32), runs[k].stride);
  const Expr value = load_f32(x, offset.expr());
  // One walk over the reduced elements: `name` starts at `initial` and takes `step`.
  auto reduce_into = [&](const std::string& name, Expr initial, Expr step) {
    kernel.body.push_back(kir::declare(name, ScalarType::f32, std::move(initial)));
    std::vector<kir::Stmt> loop_body = {kir::assign(name, std::move(step))};
    for (std::size_t k = runs.size(); k-- > 0;)
      loop_body = {kir::loop("r" + std::to_string(k), kir::i32(0), kir::i32(runs[k].extent), std::move(loop_body))};
    for (kir::Stmt& stmt : loop_body) kernel.body.push_back(std::move(stmt));
    return kir::var(name, ScalarType::f32);
  };
  const Expr acc = kir::var("acc", ScalarType::f32);
  Expr result;
  if (op == "ReduceMax" || op == "ReduceMin") {
    result = reduce_into("acc", load_f32(x, base), op == "ReduceMax" ? kir::max(acc, value) : kir::min(acc, value));
  } else if (op == "ReduceProd") {
    result = reduce_into("acc", kir::f32(1.0), acc * value);
  } else if (op == "ReduceLogSumExp") {
    // max + log(sum e^(x - max)): no overflow where e^x would.
    const Expr m = kir::var("m", ScalarType::f32);
    reduce_into("m", load_f32(x, base), kir::max(m, value));
    result = m + kir::log(reduce_into("acc", kir::f32(0.0), acc + kir::exp(value - m)));
  } else {
    const Expr mapped = op == "ReduceL1"                                 ? kir::abs(value)
                        : op == "ReduceL2" || op == "ReduceSumSquare" ? value * value
                                                                        : value;
    const Expr sum = reduce_into("acc", kir::f32(0.0), acc + mapped);
    result = op == "ReduceMean"     ? sum / kir::cast(ScalarType::f32, kir::i32(count))
             : op == "ReduceL2"     ? kir::sqrt(sum)
             : op == "ReduceLogSum" ? kir::log(sum)
                                    : sum;
  }
  kernel.body.push_back(kir::store(y, index, result));
  return kernel;
}

// ---- CumSum ---------------------------------------------------------------------------

std::optional<std::string> cumsum_unsupported(const OpContext& ctx) {
  if (!ctx.node.attrs.has("axis")) return "attribute 'axis' is missing";
  get_axis(ctx, "axis", 0, ctx.input_shape(0).size());
  return std::nullopt;
}

// One invocation per output element, summing the elements of its line that
// precede it (or follow it, when reverse).
kir::Kernel lower_cumsum(const OpContext& ctx) {
  const Shape& shape = ctx.input_shape(0);
  const std::size_t axis = get_axis(ctx, "axis", 0, shape.size());
  const bool exclusive = ctx.node.attrs.get_int("exclusive", 0) != 0;
  const bool reverse = ctx.node.attrs.get_int("reverse", 0) != 0;
  const std::int64_t length = shape[axis];
  const std::int64_t inner = extent_product(shape, axis + 1, shape.size());
  const Shape lines = {extent_product(shape, 0, axis), length, inner};

  kir::Kernel kernel = make_kernel("cumsum", num_elements(shape));
  const kir::Buf x = kernel.add_buffer("x", ScalarType::f32, Access::read);
  const kir::Buf y = kernel.add_buffer("y", ScalarType::f32, Access::write);
  const Expr index = kir::global_index();
  const Expr position = unravel(kernel.body, index, lines, "c")[1];
  const Expr line_start = declare_index(kernel.body, "line_start", IndexSum().add(index).add(position, -inner).expr());

  Expr begin = kir::i32(0), end = kir::i32(length);
  if (reverse) begin = exclusive ? IndexSum().add(position).add(1).expr() : position;
  else end = exclusive ? position : IndexSum().add(position).add(1).expr();

  kernel.body.push_back(kir::declare("sum", ScalarType::f32, kir::f32(0.0)));
  const Expr sum = kir::var("sum", ScalarType::f32);
  const Expr at = IndexSum().add(line_start).add(kir::var("k", ScalarType::i32), inner).expr();
  kernel.body.push_back(kir::loop("k", begin, end, {kir::assign("sum", sum + load_f32(x, at))}));
  kernel.body.push_back(kir::store(y, index, sum));
  return kernel;
}

// ---- Cast ----------------------------------------------------------------------------

// Between the dtypes kernels hold, as C converts: to bool is "!= 0", from bool
// 0 or 1, f32 to an integer truncates (NaN and out-of-range values are
// undefined, as ONNX leaves them). A Cast to the input's own dtype is a
// view (lower.cpp), never lowered here.
kir::Kernel lower_cast(const OpContext& ctx) {
  const ScalarType from = element_type(ctx.inputs[0]->dtype), to = element_type(ctx.outputs[0].dtype);
  kir::Kernel kernel = make_kernel("cast", num_elements(ctx.output_shape()));
  const kir::Buf x = kernel.add_buffer("x", from, Access::read);
  const kir::Buf y = kernel.add_buffer("y", to, Access::write);
  const Expr index = kir::global_index();
  kernel.body.push_back(kir::store(y, index, kir::cast(to, kir::load(x, index, from))));
  return kernel;
}

// ---- comparisons, logic and Where: numpy broadcasting, any element type --------------

bool is_comparison(const std::string& op) {
  return op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" || op == "GreaterOrEqual";
}

std::optional<std::string> logic_unsupported(const OpContext& ctx) {
  const std::string& op = ctx.node.op;
  if (op == "Where" && ctx.inputs[0]->dtype != DType::boolean) return "the condition is not a bool tensor";
  if (op == "IsNaN" || op == "IsInf") {
    if (ctx.inputs[0]->dtype != DType::f32) return "the input is not an f32 tensor";
    return broadcast_unsupported(ctx);
  }
  if (!is_comparison(op) && op != "Where")
    for (std::size_t slot = 0; slot < ctx.inputs.size(); ++slot)
      if (ctx.inputs[slot]->dtype != DType::boolean) return "input " + std::to_string(slot) + " is not a bool tensor";
  return broadcast_unsupported(ctx);
}

kir::Kernel lower_logic(const OpContext& ctx) {
  const std::string& op = ctx.node.op;
  BroadcastKernel k = make_broadcast_kernel(ctx, "logic_");
  kir::Kernel& kernel = k.kernel;
  auto value = [&](std::size_t slot) { return k.loads[slot]; };
  Expr result;
  if (op == "Equal") result = kir::eq(value(0), value(1));
  else if (op == "Less") result = value(0) < value(1);
  else if (op == "Greater") result = value(0) > value(1);
  else if (op == "LessOrEqual") result = value(0) <= value(1);
  else if (op == "GreaterOrEqual") result = value(0) >= value(1);
  else if (op == "And") result = value(0) && value(1);
  else if (op == "Or") result = value(0) || value(1);
  else if (op == "Xor") result = kir::ne(value(0), value(1));
  else if (op == "Not") result = kir::unary(kir::UnaryOp::logical_not, value(0));
  else if (op == "IsNaN") result = kir::ne(value(0), value(0));
  else if (op == "IsInf") {
    const bool positive = ctx.node.attrs.get_int("detect_positive", 1) != 0;
    const bool negative = ctx.node.attrs.get_int("detect_negative", 1) != 0;
    kernel.body.push_back(kir::declare("x", ScalarType::f32, value(0)));
    const Expr x = kir::var("x", ScalarType::f32);
    result = kir::boolean(false);
    if (positive) result = kir::eq(x, kir::f32(INFINITY));
    if (negative) result = positive ? (result || kir::eq(x, kir::f32(-INFINITY))) : kir::eq(x, kir::f32(-INFINITY));
  }
  else {
    KILN_ASSERT(op == "Where");
    // select loads only the chosen side.
    result = kir::select(value(0), value(1), value(2));
  }
  kernel.body.push_back(kir::store(k.y, k.index, result));
  return kernel;
}

// ---- ArgMax, ArgMin ------------------------------------------------------------------

std::optional<std::string> arg_reduce_unsupported(const OpContext& ctx) {
  const Shape& shape = ctx.input_shape(0);
  if (ctx.inputs[0]->dtype == DType::boolean) return "the input is a bool tensor";
  if (ctx.outputs[0].dtype != DType::i64) return "the output is not an i64 tensor";
  if (shape.empty()) return "a scalar input has no axis to reduce";
  const std::size_t axis = get_axis(ctx, "axis", 0, shape.size());
  if (shape[axis] == 0) return "reduces axis " + std::to_string(axis) + " of extent 0";
  return std::nullopt;
}

// A line along an axis: `length` elements `inner` apart from `base`.
struct Line {
  Expr base;
  std::int64_t length, inner;
  Expr at(Expr j) const { return IndexSum().add(base).add(std::move(j), inner).expr(); }
};

// The line of the invocation's output element: one per (outer, inner) pair.
Line declare_line(std::vector<kir::Stmt>& body, const Shape& shape, std::size_t axis) {
  const std::int64_t length = shape[axis];
  const std::int64_t inner = extent_product(shape, axis + 1, shape.size());
  const std::int64_t outer = extent_product(shape, 0, axis);
  const std::vector<Expr> row = unravel(body, kir::global_index(), {outer, inner}, "row");
  return {declare_index(body, "base", IndexSum().add(row[0], length * inner).add(row[1]).expr()), length, inner};
}

// Declares `best_at` (i32): the position of the line's maximum (or minimum).
// Ties go to the first position (the last with `last`); NaN counts as the
// extreme value, the first NaN winning (the last with `last`), as the
// reference's replaces_best does.
Expr declare_best_position(std::vector<kir::Stmt>& body, kir::Buf x, ScalarType type, const Line& line, bool is_max,
                           bool last) {
  body.push_back(kir::declare("best", type, kir::load(x, line.base, type)));
  body.push_back(kir::declare("best_at", ScalarType::i32, kir::i32(0)));
  const Expr best = kir::var("best", type);
  const Expr j = kir::var("j", ScalarType::i32);
  std::vector<kir::Stmt> step;
  step.push_back(kir::declare("v", type, kir::load(x, line.at(j), type)));
  const Expr v = kir::var("v", type);
  Expr better = is_max ? v > best : v < best;
  if (last) better = better || kir::eq(v, best);
  if (type == ScalarType::f32) {
    const Expr v_nan = kir::ne(v, v);
    better = kir::select(kir::ne(best, best), last ? v_nan : kir::boolean(false), better || v_nan);
  }
  step.push_back(kir::branch(better, {kir::assign("best", v), kir::assign("best_at", j)}));
  body.push_back(kir::loop("j", kir::i32(1), kir::i32(line.length), std::move(step)));
  return kir::var("best_at", ScalarType::i32);
}

kir::Kernel lower_arg_reduce(const OpContext& ctx) {
  const Shape& shape = ctx.input_shape(0);
  const std::size_t axis = get_axis(ctx, "axis", 0, shape.size());
  const ScalarType type = element_type(ctx.inputs[0]->dtype);
  kir::Kernel kernel = make_kernel(kernel_name("arg_reduce_", ctx.node.op), num_elements(shape) / shape[axis]);
  const kir::Buf x = kernel.add_buffer("x", type, Access::read);
  const kir::Buf y = kernel.add_buffer("y", ScalarType::i64, Access::write);
  const Line line = declare_line(kernel.body, shape, axis);
  const Expr best_at = declare_best_position(kernel.body, x, type, line, ctx.node.op == "ArgMax",
                                             ctx.node.attrs.get_int("select_last_index", 0) != 0);
  kernel.body.push_back(kir::store(y, kir::global_index(), kir::cast(ScalarType::i64, best_at)));
  return kernel;
}

// ---- Hardmax: 1 at the first maximum of each line, 0 elsewhere ----------------------

std::optional<std::string> hardmax_unsupported(const OpContext& ctx) {
  const Shape& shape = ctx.input_shape(0);
  if (shape.empty()) return "a scalar input has no axis";
  const std::size_t axis = get_axis(ctx, "axis", -1, shape.size());
  if (shape[axis] == 0) return "axis " + std::to_string(axis) + " has extent 0";
  return std::nullopt;
}

kir::Kernel lower_hardmax(const OpContext& ctx) {
  const Shape& shape = ctx.input_shape(0);
  const std::size_t axis = get_axis(ctx, "axis", -1, shape.size());
  kir::Kernel kernel = make_kernel("hardmax", num_elements(shape) / shape[axis]);
  const kir::Buf x = kernel.add_buffer("x", ScalarType::f32, Access::read);
  const kir::Buf y = kernel.add_buffer("y", ScalarType::f32, Access::write);
  const Line line = declare_line(kernel.body, shape, axis);
  const Expr best_at = declare_best_position(kernel.body, x, ScalarType::f32, line, true, false);
  const Expr k = kir::var("k", ScalarType::i32);
  kernel.body.push_back(kir::loop(
      "k", kir::i32(0), kir::i32(line.length),
      {kir::store(y, line.at(k), kir::select(kir::eq(k, best_at), kir::f32(1.0), kir::f32(0.0)))}));
  return kernel;
}

constexpr OpLowering kMathLowerings[] = {
    {"Sqrt", 1, 1, unary_unsupported, lower_unary},
    {"Exp", 1, 1, unary_unsupported, lower_unary},
    {"Log", 1, 1, unary_unsupported, lower_unary},
    {"Erf", 1, 1, unary_unsupported, lower_unary},
    {"Sin", 1, 1, unary_unsupported, lower_unary},
    {"Cos", 1, 1, unary_unsupported, lower_unary},
    {"Neg", 1, 1, unary_unsupported, lower_unary},
    {"Abs", 1, 1, unary_unsupported, lower_unary},
    {"Reciprocal", 1, 1, unary_unsupported, lower_unary},
    {"Floor", 1, 1, unary_unsupported, lower_unary},
    {"Ceil", 1, 1, unary_unsupported, lower_unary},
    {"Round", 1, 1, unary_unsupported, lower_unary},
    {"Sinh", 1, 1, unary_unsupported, lower_unary},
    {"Cosh", 1, 1, unary_unsupported, lower_unary},
    {"Asinh", 1, 1, unary_unsupported, lower_unary},
    {"Acosh", 1, 1, unary_unsupported, lower_unary},
    {"Atanh", 1, 1, unary_unsupported, lower_unary},
    {"Tan", 1, 1, unary_unsupported, lower_unary},
    {"Atan", 1, 1, unary_unsupported, lower_unary},
    {"Asin", 1, 1, unary_unsupported, lower_unary},
    {"Acos", 1, 1, unary_unsupported, lower_unary},
    {"Sign", 1, 1, unary_unsupported, lower_unary},
    {"HardSigmoid", 1, 1, unary_unsupported, lower_unary},
    {"HardSwish", 1, 1, unary_unsupported, lower_unary},
    {"Pow", 2, 2, broadcast_unsupported, lower_broadcast, 1, KernelDTypes::any},
    {"Max", 1, kAnyCount, broadcast_unsupported, lower_broadcast, 1, KernelDTypes::any},
    {"Min", 1, kAnyCount, broadcast_unsupported, lower_broadcast, 1, KernelDTypes::any},
    {"Sum", 1, kAnyCount, broadcast_unsupported, lower_broadcast, 1, KernelDTypes::any},
    {"Mean", 1, kAnyCount, broadcast_unsupported, lower_broadcast, 1, KernelDTypes::any},
    {"Mod", 2, 2, broadcast_unsupported, lower_broadcast, 1, KernelDTypes::any},
    {"Hardmax", 1, 1, hardmax_unsupported, lower_hardmax},
    {"IsNaN", 1, 1, logic_unsupported, lower_logic, 1, KernelDTypes::any},
    {"IsInf", 1, 1, logic_unsupported, lower_logic, 1, KernelDTypes::any},
    {"ReduceMean", 1, 1, reduce_unsupported, lower_reduce},
    {"ReduceSum", 1, 1, reduce_unsupported, lower_reduce},
    {"ReduceMax", 1, 1, reduce_unsupported, lower_reduce},
    {"ReduceMin", 1, 1, reduce_unsupported, lower_reduce},
    {"ReduceProd", 1, 1, reduce_unsupported, lower_reduce},
    {"ReduceL1", 1, 1, reduce_unsupported, lower_reduce},
    {"ReduceL2", 1, 1, reduce_unsupported, lower_reduce},
    {"ReduceSumSquare", 1, 1, reduce_unsupported, lower_reduce},
    {"ReduceLogSum", 1, 1, reduce_unsupported, lower_reduce},
    {"ReduceLogSumExp", 1, 1, reduce_unsupported, lower_reduce},
    {"CumSum", 1, 1, cumsum_unsupported, lower_cumsum},
    {"ArgMax", 1, 1, arg_reduce_unsupported, lower_arg_reduce, 1, KernelDTypes::any},
    {"ArgMin", 1, 1, arg_reduce_unsupported, lower_arg_reduce, 1, KernelDTypes::any},
    {"Cast", 1, 1, nullptr, lower_cast, 1, KernelDTypes::any},
    {"Equal", 2, 2, logic_unsupported, lower_logic, 1, KernelDTypes::any},
    {"Less", 2, 2, logic_unsupported, lower_logic, 1, KernelDTypes::any},
    {"Greater", 2, 2, logic_unsupported, lower_logic, 1, KernelDTypes::any},
    {"LessOrEqual", 2, 2, logic_unsupported, lower_logic, 1, KernelDTypes::any},
    {"GreaterOrEqual", 2, 2, logic_unsupported, lower_logic, 1, KernelDTypes::any},
    {"Not", 1, 1, logic_unsupported, lower_logic, 1, KernelDTypes::any},
    {"And", 2, 2, logic_unsupported, lower_logic, 1, KernelDTypes::any},
    {"Or", 2, 2, logic_unsupported, lower_logic, 1, KernelDTypes::any},
    {"Xor", 2, 2, logic_unsupported, lower_logic, 1, KernelDTypes::any},
    {"Where", 3, 3, logic_unsupported, lower_logic, 1, KernelDTypes::any},
};

}  // namespace

std::span<const OpLowering> math_lowerings() { return kMathLowerings; }

}  // namespace kiln::lower

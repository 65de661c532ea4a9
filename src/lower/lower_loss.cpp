// Lowering of NegativeLogLikelihoodLoss: one invocation per loss element
// (reduction none), or one invocation summing every element (sum, mean) —
// losses are small outputs, evaluated once per call.
#include "src/lower/index.h"
#include "src/lower/lowerings.h"

#include <kiln/error.h>

#include <cmath>
#include <limits>

namespace kiln::lower {

using kir::Access;
using kir::Expr;
using kir::ScalarType;

namespace {

std::optional<std::string> nll_unsupported(const OpContext& ctx) {
  const DType target = ctx.inputs[1]->dtype;
  if (ctx.inputs[0]->dtype != DType::f32) return "the input is not an f32 tensor";
  if (target != DType::i64 && target != DType::i32) return "the targets are not i32 or i64";
  const std::string reduction = ctx.node.attrs.get_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return "reduction '" + reduction + "' is not one of none, sum, mean";
  if (ctx.input_shape(0).size() < 2 || ctx.input_shape(0)[1] == 0) return "the input has no classes";
  return std::nullopt;
}

// The loss of element i (an i32 expression over [0, N * d1 * ... * dk)) and
// the weight it counts with (0 where ignored), declared into `body`. A target outside [0, C) that is not the
// ignore_index gives NaN: a kernel cannot raise as the reference does, and
// NaN cannot pass for a loss.
struct ElementLoss {
  Expr loss, weight;
};

ElementLoss element_loss(const OpContext& ctx, std::vector<kir::Stmt>& body, Expr i,
                         kir::Buf x, kir::Buf target, std::optional<kir::Buf> weight) {
  const Shape& shape = ctx.input_shape(0);
  const std::int64_t classes = shape[1];
  const std::int64_t inner = extent_product(shape, 2, shape.size());
  const ScalarType target_type = element_type(ctx.inputs[1]->dtype);
  body.push_back(kir::declare("t", target_type, kir::load(target, i, target_type)));
  const Expr t = kir::var("t", target_type);
  const Expr valid = t >= constant_of(target_type, 0.0) && t < constant_of(target_type, static_cast<double>(classes));
  Expr ignored = kir::boolean(false);
  if (ctx.node.attrs.has("ignore_index")) {
    const std::int64_t ii = ctx.node.attrs.get_int("ignore_index", 0);
    const bool representable = target_type == ScalarType::i64 || (ii >= std::numeric_limits<std::int32_t>::min() &&
                                                                  ii <= std::numeric_limits<std::int32_t>::max());
    if (representable) ignored = kir::eq(t, target_type == ScalarType::i64 ? kir::i64(ii) : kir::i32(ii));
  }
  body.push_back(kir::declare("n", ScalarType::i32, i / kir::i32(inner)));
  const Expr n = kir::var("n", ScalarType::i32);
  // c is only read where the target is valid, so the narrowing is exact there.
  const Expr c = target_type == ScalarType::i32 ? t : kir::cast(ScalarType::i32, t);
  const Expr at = IndexSum().add(n, classes * inner - inner).add(c, inner).add(i).expr();  // (n*C + c)*inner + d
  const Expr w = weight ? kir::load(*weight, c, ScalarType::f32) : kir::f32(1.0);
  body.push_back(kir::declare("w", ScalarType::f32,
                              kir::select(ignored, kir::f32(0.0), kir::select(valid, w, kir::f32(NAN)))));
  const Expr weight_value = kir::var("w", ScalarType::f32);
  const Expr loss = kir::select(ignored, kir::f32(0.0),
                                kir::select(valid, -kir::load(x, at, ScalarType::f32) * weight_value, kir::f32(NAN)));
  return {loss, weight_value};
}

kir::Kernel lower_nll(const OpContext& ctx) {
  const Shape& shape = ctx.input_shape(0);
  const std::int64_t elements = shape[0] * extent_product(shape, 2, shape.size());
  const std::string reduction = ctx.node.attrs.get_string("reduction", "mean");
  const bool reduce = reduction != "none";
  kir::Kernel kernel = make_kernel("nll_loss", reduce ? 1 : elements);
  const kir::Buf x = kernel.add_buffer("x", ScalarType::f32, Access::read);
  const kir::Buf target = kernel.add_buffer("target", element_type(ctx.inputs[1]->dtype), Access::read);
  std::optional<kir::Buf> weight;
  if (ctx.has_input(2)) weight = kernel.add_buffer("weight", ScalarType::f32, Access::read);
  const kir::Buf y = kernel.add_buffer("y", ScalarType::f32, Access::write);
  if (!reduce) {
    const ElementLoss e = element_loss(ctx, kernel.body, kir::global_index(), x, target, weight);
    kernel.body.push_back(kir::store(y, kir::global_index(), e.loss));
    return kernel;
  }
  kernel.body.push_back(kir::declare("total", ScalarType::f32, kir::f32(0.0)));
  kernel.body.push_back(kir::declare("weight_total", ScalarType::f32, kir::f32(0.0)));
  std::vector<kir::Stmt> step;
  const ElementLoss e = element_loss(ctx, step, kir::var("i", ScalarType::i32), x, target, weight);
  step.push_back(kir::assign("total", kir::var("total", ScalarType::f32) + e.loss));
  step.push_back(kir::assign("weight_total", kir::var("weight_total", ScalarType::f32) + e.weight));
  kernel.body.push_back(kir::loop("i", kir::i32(0), kir::i32(elements), std::move(step)));
  const Expr total = kir::var("total", ScalarType::f32);
  kernel.body.push_back(
      kir::store(y, kir::i32(0), reduction == "sum" ? total : total / kir::var("weight_total", ScalarType::f32)));
  return kernel;
}

constexpr OpLowering kLossLowerings[] = {
    {"NegativeLogLikelihoodLoss", 2, 3, nll_unsupported, lower_nll, 1, KernelDTypes::any},
};

}  // namespace

std::span<const OpLowering> loss_lowerings() { return kLossLowerings; }

}  // namespace kiln::lower

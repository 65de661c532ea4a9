// Row reductions: Softmax, LogSoftmax and LayerNormalization run one invocation per row
// and loop over it, in the standard two-pass forms (max then sum of exp;
// mean then variance) so that large inputs neither overflow nor cancel.
#include "graph/broadcast.h"
#include "src/lower/index.h"
#include "src/lower/lowerings.h"

namespace kiln::lower {

using kir::Access;
using kir::Expr;
using kir::ScalarType;
using kir::Stmt;

std::optional<std::string> softmax_unsupported(const OpContext& ctx) {
  const Shape& shape = ctx.input_shape(0);
  if (shape.empty()) return "a scalar input has no axis to normalise";
  get_axis(ctx, "axis", -1, shape.size());
  if (ctx.output_shape() != shape)
    return "output shape " + shape_str(ctx.output_shape()) + " differs from input shape " + shape_str(shape);
  return std::nullopt;
}

namespace {

// Softmax or LogSoftmax along the axis, one invocation per row: the row's
// max, the sum of exp(x - max), then exp(x - max) / sum, or x - max -
// log(sum) (no exp of the output, so a tiny probability keeps its
// logarithm instead of underflowing to -inf).
kir::Kernel lower_softmax_rows(const OpContext& ctx, bool log) {
  const Shape& shape = ctx.input_shape(0);
  const std::size_t axis = get_axis(ctx, "axis", -1, shape.size());
  const std::int64_t outer = extent_product(shape, 0, axis);
  const std::int64_t length = shape[axis];
  const std::int64_t inner = extent_product(shape, axis + 1, shape.size());

  kir::Kernel kernel = make_kernel(log ? "log_softmax" : "softmax", outer * inner);
  const kir::Buf x = kernel.add_buffer("x", ScalarType::f32, Access::read);
  const kir::Buf y = kernel.add_buffer("y", ScalarType::f32, Access::write);
  std::vector<Stmt>& body = kernel.body;

  // Row r = (o, i) holds elements o * length * inner + i + j * inner.
  const std::vector<Expr> row = unravel(body, kir::global_index(), {outer, inner}, "row");
  const Expr base = declare_index(body, "base", IndexSum().add(row[0], length * inner).add(row[1]).expr());
  auto element = [&](const std::string& j) { return IndexSum().add(base).add(i32_var(j), inner).expr(); };
  auto x_at = [&](const std::string& j) { return kir::load(x, element(j), ScalarType::f32); };

  body.push_back(kir::declare("row_max", ScalarType::f32, kir::load(x, base, ScalarType::f32)));
  body.push_back(kir::loop("j_max", kir::i32(1), kir::i32(length),
                           {kir::assign("row_max", kir::max(f32_var("row_max"), x_at("j_max")))}));
  body.push_back(kir::declare("row_sum", ScalarType::f32, kir::f32(0.0)));
  body.push_back(kir::loop("j_sum", kir::i32(0), kir::i32(length),
                           {kir::assign("row_sum", f32_var("row_sum") + kir::exp(x_at("j_sum") - f32_var("row_max")))}));
  if (log) {
    body.push_back(kir::declare("shift", ScalarType::f32, f32_var("row_max") + kir::log(f32_var("row_sum"))));
    body.push_back(kir::loop("j_out", kir::i32(0), kir::i32(length),
                             {kir::store(y, element("j_out"), x_at("j_out") - f32_var("shift"))}));
    return kernel;
  }
  body.push_back(kir::declare("inv_sum", ScalarType::f32, kir::f32(1.0) / f32_var("row_sum")));
  body.push_back(kir::loop(
      "j_out", kir::i32(0), kir::i32(length),
      {kir::store(y, element("j_out"), kir::exp(x_at("j_out") - f32_var("row_max")) * f32_var("inv_sum"))}));
  return kernel;
}

}  // namespace

kir::Kernel lower_softmax(const OpContext& ctx) { return lower_softmax_rows(ctx, false); }
kir::Kernel lower_log_softmax(const OpContext& ctx) { return lower_softmax_rows(ctx, true); }

std::optional<std::string> layer_norm_unsupported(const OpContext& ctx) {
  const Shape& shape = ctx.input_shape(0);
  if (shape.empty()) return "a scalar input has no axis to normalise";
  const std::size_t axis = get_axis(ctx, "axis", -1, shape.size());
  const Shape normalized(shape.begin() + static_cast<std::ptrdiff_t>(axis), shape.end());
  for (std::size_t slot = 1; slot < 3; ++slot)
    if (ctx.has_input(slot) && !graph::is_broadcastable_to(ctx.input_shape(slot), normalized))
      return std::string(slot == 1 ? "Scale " : "B ") + shape_str(ctx.input_shape(slot)) +
             " does not broadcast to the normalised shape " + shape_str(normalized);
  if (ctx.output_shape() != shape)
    return "output shape " + shape_str(ctx.output_shape()) + " differs from input shape " + shape_str(shape);
  return std::nullopt;
}

std::optional<std::string> lrn_unsupported(const OpContext& ctx) {
  if (ctx.input_shape(0).size() < 2) return "the input has no channel axis";
  if (ctx.node.attrs.get_int("size", 0) <= 0) return "attribute 'size' must be positive";
  return std::nullopt;
}

// One invocation per element sums the squares of its channel window (the
// window's bounds clamped to the channels), then x * (bias + alpha / size *
// sum)^-beta, the power as exp(-beta * log(.)) (its base is positive).
kir::Kernel lower_lrn(const OpContext& ctx) {
  const Shape& shape = ctx.input_shape(0);
  const std::int64_t channels = shape[1];
  const std::int64_t spatial = extent_product(shape, 2, shape.size());
  const std::int64_t size = ctx.node.attrs.get_int("size", 1);
  const std::int64_t below = (size - 1) / 2, above = size - 1 - below;
  const double alpha = ctx.node.attrs.get_float("alpha", 1e-4);
  const double beta = ctx.node.attrs.get_float("beta", 0.75);
  const double bias = ctx.node.attrs.get_float("bias", 1.0);

  kir::Kernel kernel = make_kernel("lrn", num_elements(shape));
  const kir::Buf x = kernel.add_buffer("x", ScalarType::f32, Access::read);
  const kir::Buf y = kernel.add_buffer("y", ScalarType::f32, Access::write);
  std::vector<Stmt>& body = kernel.body;
  const Expr index = kir::global_index();
  const std::vector<Expr> c = unravel(body, index, {shape[0], channels, spatial}, "at");
  const Expr first = declare_index(body, "first", kir::max(IndexSum(-below).add(c[1]).expr(), kir::i32(0)));
  const Expr last = declare_index(body, "last", kir::min(IndexSum(above).add(c[1]).expr(), kir::i32(channels - 1)));
  body.push_back(kir::declare("sum", ScalarType::f32, kir::f32(0.0)));
  const Expr k = i32_var("k");
  const Expr at = IndexSum().add(c[0], channels * spatial).add(k, spatial).add(c[2]).expr();
  body.push_back(kir::loop("k", first, IndexSum(1).add(last).expr(),
                           {kir::declare("v", ScalarType::f32, kir::load(x, at, ScalarType::f32)),
                            kir::assign("sum", f32_var("sum") + f32_var("v") * f32_var("v"))}));
  const Expr base = kir::f32(bias) + kir::f32(alpha / static_cast<double>(size)) * f32_var("sum");
  body.push_back(kir::store(y, index, kir::load(x, index, ScalarType::f32) * kir::exp(kir::f32(-beta) * kir::log(base))));
  return kernel;
}

kir::Kernel lower_layer_norm(const OpContext& ctx) {
  const Shape& shape = ctx.input_shape(0);
  const std::size_t axis = get_axis(ctx, "axis", -1, shape.size());
  const double epsilon = ctx.node.attrs.get_float("epsilon", 1e-5);
  const Shape normalized(shape.begin() + static_cast<std::ptrdiff_t>(axis), shape.end());
  const std::int64_t rows = extent_product(shape, 0, axis);
  const std::int64_t length = num_elements(normalized);

  kir::Kernel kernel = make_kernel("layer_norm", rows);
  const kir::Buf x = kernel.add_buffer("x", ScalarType::f32, Access::read);
  const kir::Buf scale = kernel.add_buffer("scale", ScalarType::f32, Access::read);
  const bool has_bias = ctx.has_input(2);
  const kir::Buf bias = has_bias ? kernel.add_buffer("bias", ScalarType::f32, Access::read) : kir::Buf{};
  const kir::Buf y = kernel.add_buffer("y", ScalarType::f32, Access::write);
  const bool statistics = ctx.outputs.size() == 3;  // Mean and InvStdDev, one per row
  const kir::Buf mean_out = statistics ? kernel.add_buffer("mean_out", ScalarType::f32, Access::write) : kir::Buf{};
  const kir::Buf inv_std_out = statistics ? kernel.add_buffer("inv_std_out", ScalarType::f32, Access::write) : kir::Buf{};
  std::vector<Stmt>& body = kernel.body;

  const Expr base = declare_index(body, "base", IndexSum().add(kir::global_index(), length).expr());
  auto x_at = [&](const std::string& j) {
    return kir::load(x, IndexSum().add(base).add(i32_var(j)).expr(), ScalarType::f32);
  };
  const Expr mean = f32_var("mean");
  // From an integer literal, so that a kernel serving several row lengths
  // (dynamic dims) takes the length as a parameter; a driver folds it.
  body.push_back(kir::declare("inv_length", ScalarType::f32,
                              kir::f32(1.0) / kir::cast(ScalarType::f32, kir::i32(length))));
  const Expr inv_length = f32_var("inv_length");

  // The mean is accumulated relative to the row's first element: a row far
  // from zero then sums small, nearly exact differences.
  body.push_back(kir::declare("pivot", ScalarType::f32, kir::load(x, base, ScalarType::f32)));
  body.push_back(kir::declare("shift_sum", ScalarType::f32, kir::f32(0.0)));
  body.push_back(kir::loop("j_mean", kir::i32(0), kir::i32(length),
                           {kir::assign("shift_sum", f32_var("shift_sum") + (x_at("j_mean") - f32_var("pivot")))}));
  body.push_back(kir::declare("mean", ScalarType::f32, f32_var("pivot") + f32_var("shift_sum") * inv_length));
  body.push_back(kir::declare("sq_sum", ScalarType::f32, kir::f32(0.0)));
  body.push_back(kir::loop("j_var", kir::i32(0), kir::i32(length),
                           {kir::declare("dev", ScalarType::f32, x_at("j_var") - mean),
                            kir::assign("sq_sum", f32_var("sq_sum") + f32_var("dev") * f32_var("dev"))}));
  body.push_back(kir::declare("inv_std", ScalarType::f32,
                              kir::rsqrt(f32_var("sq_sum") * inv_length + kir::f32(epsilon))));
  if (statistics) {
    body.push_back(kir::store(mean_out, kir::global_index(), mean));
    body.push_back(kir::store(inv_std_out, kir::global_index(), f32_var("inv_std")));
  }

  // Scale and B broadcast over the normalised shape; a full-shape operand is
  // indexed by j directly (broadcast_offsets computes no coordinates then).
  std::vector<Stmt> out_body;
  std::vector<Shape> operand_shapes = {ctx.input_shape(1)};
  if (has_bias) operand_shapes.push_back(ctx.input_shape(2));
  const std::vector<Expr> offsets =
      broadcast_offsets(out_body, i32_var("j_out"), normalized, operand_shapes, "nb");
  Expr value = (x_at("j_out") - mean) * f32_var("inv_std") * kir::load(scale, offsets[0], ScalarType::f32);
  if (has_bias) value = value + kir::load(bias, offsets[1], ScalarType::f32);
  out_body.push_back(kir::store(y, IndexSum().add(base).add(i32_var("j_out")).expr(), value));
  body.push_back(kir::loop("j_out", kir::i32(0), kir::i32(length), std::move(out_body)));
  return kernel;
}

}  // namespace kiln::lower

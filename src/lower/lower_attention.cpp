// Attention (graph/ops/attention.cpp): the shapes checked and handed to the
// one-kernel attention template (shaders/attention_template.h), with the
// mask's broadcasting turned into strides.
#include "graph/broadcast.h"
#include "shaders/attention_template.h"
#include "src/lower/index.h"
#include "src/lower/lowerings.h"
#include "src/lower/tuning_site.h"

#include <kiln/error.h>

#include <cmath>

namespace kiln::lower {

using kir::Access;
using kir::Expr;
using kir::ScalarType;

namespace {

struct AttentionDims {
  Shape batch;  // [B, H] or [B*H]
  std::int64_t lq = 0, lk = 0, d = 0, dv = 0;
  bool k_transposed = false;
};

// nullopt with `dims` filled, or why the inputs do not form an attention.
std::optional<std::string> attention_dims(const OpContext& ctx, AttentionDims& dims) {
  const Shape& q = ctx.input_shape(0);
  const Shape& k = ctx.input_shape(1);
  const Shape& v = ctx.input_shape(2);
  const std::size_t rank = q.size();
  if ((rank != 3 && rank != 4) || k.size() != rank || v.size() != rank)
    return "Q " + shape_str(q) + ", K " + shape_str(k) + " and V " + shape_str(v) + " must all be rank 3 or all rank 4";
  dims.k_transposed = ctx.node.attrs.get_int("k_transposed", 0) != 0;
  dims.batch.assign(q.begin(), q.end() - 2);
  dims.lq = q[rank - 2];
  dims.d = q[rank - 1];
  dims.lk = dims.k_transposed ? k[rank - 1] : k[rank - 2];
  dims.dv = v[rank - 1];
  const std::int64_t k_depth = dims.k_transposed ? k[rank - 2] : k[rank - 1];
  if (Shape(k.begin(), k.end() - 2) != dims.batch || Shape(v.begin(), v.end() - 2) != dims.batch ||
      k_depth != dims.d || v[rank - 2] != dims.lk)
    return "Q " + shape_str(q) + ", K " + shape_str(k) + " and V " + shape_str(v) + " do not form an attention";
  return std::nullopt;
}

Shape scores_shape(const AttentionDims& dims) {
  Shape scores = dims.batch;
  scores.push_back(dims.lq);
  scores.push_back(dims.lk);
  return scores;
}

}  // namespace

std::optional<std::string> attention_unsupported(const OpContext& ctx) {
  AttentionDims dims;
  if (auto reason = attention_dims(ctx, dims)) return reason;
  if (dims.d > shaders::kMaxAttentionHeadDim)
    return "head dimension " + std::to_string(dims.d) + " exceeds the " +
           std::to_string(shaders::kMaxAttentionHeadDim) + " the attention kernel holds in registers";
  if (ctx.has_input(3) && !graph::is_broadcastable_to(ctx.input_shape(3), scores_shape(dims)))
    return "mask " + shape_str(ctx.input_shape(3)) + " does not broadcast to the scores " +
           shape_str(scores_shape(dims));
  Shape expected = dims.batch;
  expected.push_back(dims.lq);
  expected.push_back(dims.dv);
  if (ctx.output_shape() != expected)
    return "output " + shape_str(ctx.output_shape()) + " is not the expected " + shape_str(expected);
  return std::nullopt;
}

kir::Kernel lower_attention(const OpContext& ctx) {
  AttentionDims dims;
  if (auto reason = attention_dims(ctx, dims)) throw_error(ErrorKind::Internal, "lower_attention: " + *reason);
  kir::Kernel kernel("attention");
  shaders::AttentionProblem p;
  p.heads = num_elements(dims.batch);
  p.lq = dims.lq;
  p.lk = dims.lk;
  p.d = dims.d;
  p.dv = dims.dv;
  p.k_transposed = dims.k_transposed;
  p.scale = ctx.node.attrs.get_float("scale", 1.0 / std::sqrt(static_cast<double>(dims.d)));
  p.q = kernel.add_buffer("q", ScalarType::f32, Access::read);
  p.k = kernel.add_buffer("k", ScalarType::f32, Access::read);
  p.v = kernel.add_buffer("v", ScalarType::f32, Access::read);
  graph::Strides mask_strides;
  if (ctx.has_input(3)) {
    p.mask = kernel.add_buffer("mask", ScalarType::f32, Access::read);
    mask_strides = graph::broadcast_strides(ctx.input_shape(3), scores_shape(dims));
    const std::size_t rank = mask_strides.size();
    p.mask_row_stride = mask_strides[rank - 2];
    p.mask_key_stride = mask_strides[rank - 1];
    // The head index unravelled over the batch dimensions the mask does not broadcast.
    p.mask_base = [&dims, &mask_strides](std::vector<kir::Stmt>& body, Expr head) {
      const std::vector<Expr> coords = unravel(body, head, dims.batch, "mask_bt");
      IndexSum base;
      for (std::size_t i = 0; i < coords.size(); ++i) base.add(coords[i], mask_strides[i]);
      return base.expr();
    };
  }
  p.y = kernel.add_buffer("y", ScalarType::f32, Access::write);
  build_tuned_attention(kernel, p, ctx.target);
  return kernel;
}

}  // namespace kiln::lower

// Gemm and MatMul: one invocation per output element, looping over K.
#include "graph/broadcast.h"
#include "src/lower/index.h"
#include "src/lower/lowerings.h"

#include <kiln/error.h>

namespace kiln::lower {

using kir::Access;
using kir::Expr;
using kir::ScalarType;
using kir::Stmt;

namespace {

// The loop acc += a[a_base + k * a_step] * b[b_base + k * b_step], k in [0, K).
Stmt dot_loop(kir::Buf a, Expr a_base, std::int64_t a_step, kir::Buf b, Expr b_base, std::int64_t b_step,
              std::int64_t depth) {
  const Expr k = kir::var("k", ScalarType::i32);
  const Expr acc = kir::var("acc", ScalarType::f32);
  const Expr a_at = IndexSum().add(a_base).add(k, a_step).expr();
  const Expr b_at = IndexSum().add(b_base).add(k, b_step).expr();
  return kir::loop("k", kir::i32(0), kir::i32(depth),
                   {kir::assign("acc", acc + kir::load(a, a_at, ScalarType::f32) * kir::load(b, b_at, ScalarType::f32))});
}

struct GemmShape {
  std::int64_t m, k, n;
  bool trans_a, trans_b;
};

GemmShape gemm_shape(const OpContext& ctx) {
  const Shape& a = ctx.input_shape(0);
  const Shape& b = ctx.input_shape(1);
  GemmShape s{};
  s.trans_a = ctx.node.attrs.get_int("transA", 0) != 0;
  s.trans_b = ctx.node.attrs.get_int("transB", 0) != 0;
  s.m = s.trans_a ? a[1] : a[0];
  s.k = s.trans_a ? a[0] : a[1];
  s.n = s.trans_b ? b[0] : b[1];
  return s;
}

// MatMul operands as numpy sees them: a 1-D A is [1, K], a 1-D B is [K, 1].
struct MatMulShape {
  Shape batch_a, batch_b, batch;
  std::int64_t m, k, n;
  Shape output;  // the expected output shape (1-D operands drop their unit dim)
};

// Throws ShapeMismatch when A and B do not fit numpy matmul.
MatMulShape matmul_shape(const Shape& a, const Shape& b) {
  KILN_CHECK(!a.empty() && !b.empty(), ErrorKind::ShapeMismatch,
             "MatMul operands must not be scalars (A " + shape_str(a) + ", B " + shape_str(b) + ")");
  MatMulShape s;
  const bool vector_a = a.size() == 1, vector_b = b.size() == 1;
  s.m = vector_a ? 1 : a[a.size() - 2];
  s.k = a.back();
  s.n = vector_b ? 1 : b.back();
  const std::int64_t k_of_b = vector_b ? b[0] : b[b.size() - 2];
  KILN_CHECK(k_of_b == s.k, ErrorKind::ShapeMismatch,
             "inner dimensions of A " + shape_str(a) + " and B " + shape_str(b) + " differ");
  s.batch_a = vector_a ? Shape{} : Shape(a.begin(), a.end() - 2);
  s.batch_b = vector_b ? Shape{} : Shape(b.begin(), b.end() - 2);
  s.batch = graph::broadcast_shapes(s.batch_a, s.batch_b);
  s.output = s.batch;
  if (!vector_a) s.output.push_back(s.m);
  if (!vector_b) s.output.push_back(s.n);
  return s;
}

}  // namespace

std::optional<std::string> gemm_unsupported(const OpContext& ctx) {
  const Shape& a = ctx.input_shape(0);
  const Shape& b = ctx.input_shape(1);
  if (a.size() != 2 || b.size() != 2) return "A " + shape_str(a) + " and B " + shape_str(b) + " must be 2-D";
  if (auto reason = activation_unsupported(ctx)) return reason;
  const GemmShape s = gemm_shape(ctx);
  const std::int64_t k_of_b = s.trans_b ? b[1] : b[0];
  if (k_of_b != s.k) return "inner dimensions of A " + shape_str(a) + " and B " + shape_str(b) + " differ";
  const Shape expected = {s.m, s.n};
  if (ctx.has_input(2) && !graph::is_broadcastable_to(ctx.input_shape(2), expected))
    return "C " + shape_str(ctx.input_shape(2)) + " does not broadcast to " + shape_str(expected);
  if (ctx.output_shape() != expected)
    return "output " + shape_str(ctx.output_shape()) + " is not the expected " + shape_str(expected);
  return std::nullopt;
}

kir::Kernel lower_gemm(const OpContext& ctx) {
  const GemmShape s = gemm_shape(ctx);
  const double alpha = ctx.node.attrs.get_float("alpha", 1.0);
  const double beta = ctx.node.attrs.get_float("beta", 1.0);
  kir::Kernel kernel = make_kernel("gemm", s.m * s.n);
  const kir::Buf a = kernel.add_buffer("a", ScalarType::f32, Access::read);
  const kir::Buf b = kernel.add_buffer("b", ScalarType::f32, Access::read);
  const bool has_c = ctx.has_input(2);
  const kir::Buf c = has_c ? kernel.add_buffer("c", ScalarType::f32, Access::read) : kir::Buf{};
  const kir::Buf y = kernel.add_buffer("y", ScalarType::f32, Access::write);

  const Expr index = kir::global_index();
  const Shape out_shape = {s.m, s.n};
  const std::vector<Expr> coords = unravel(kernel.body, index, out_shape, "out");
  const Expr row = coords[0], col = coords[1];
  // Element (row, k) of op(A) and (k, col) of op(B).
  const Expr a_base = IndexSum().add(row, s.trans_a ? 1 : s.k).expr();
  const Expr b_base = IndexSum().add(col, s.trans_b ? s.k : 1).expr();
  kernel.body.push_back(kir::declare("acc", ScalarType::f32, kir::f32(0.0)));
  kernel.body.push_back(dot_loop(a, a_base, s.trans_a ? s.m : 1, b, b_base, s.trans_b ? 1 : s.n, s.k));

  Expr result = kir::var("acc", ScalarType::f32);
  if (alpha != 1.0) result = kir::f32(alpha) * result;
  // beta == 0 drops C, as the ONNX spec's "beta * C" term then vanishes.
  if (has_c && beta != 0.0) {
    const Expr c_value = kir::load(c, broadcast_offset(coords, out_shape, ctx.input_shape(2)), ScalarType::f32);
    result = result + (beta == 1.0 ? c_value : kir::f32(beta) * c_value);
  }
  kernel.body.push_back(kir::store(y, index, apply_activation(ctx, result)));
  return kernel;
}

std::optional<std::string> matmul_unsupported(const OpContext& ctx) {
  const Shape& a = ctx.input_shape(0);
  const Shape& b = ctx.input_shape(1);
  const MatMulShape s = matmul_shape(a, b);
  if (ctx.output_shape() != s.output)
    return "output " + shape_str(ctx.output_shape()) + " is not the expected " + shape_str(s.output);
  return std::nullopt;
}

kir::Kernel lower_matmul(const OpContext& ctx) {
  const MatMulShape s = matmul_shape(ctx.input_shape(0), ctx.input_shape(1));
  const std::int64_t batch = num_elements(s.batch);
  kir::Kernel kernel = make_kernel("matmul", batch * s.m * s.n);
  const kir::Buf a = kernel.add_buffer("a", ScalarType::f32, Access::read);
  const kir::Buf b = kernel.add_buffer("b", ScalarType::f32, Access::read);
  const kir::Buf y = kernel.add_buffer("y", ScalarType::f32, Access::write);

  // The output as [batch, M, N]; the batch index is then broadcast into A's
  // and B's own batch shapes.
  const Expr index = kir::global_index();
  const std::vector<Expr> coords = unravel(kernel.body, index, {batch, s.m, s.n}, "out");
  const Shape batch_shapes[] = {s.batch_a, s.batch_b};
  const std::vector<Expr> batch_offsets = broadcast_offsets(kernel.body, coords[0], s.batch, batch_shapes, "bc");
  const Expr a_base = declare_index(
      kernel.body, "a_base", IndexSum().add(batch_offsets[0], s.m * s.k).add(coords[1], s.k).expr());
  const Expr b_base = declare_index(
      kernel.body, "b_base", IndexSum().add(batch_offsets[1], s.k * s.n).add(coords[2]).expr());
  kernel.body.push_back(kir::declare("acc", ScalarType::f32, kir::f32(0.0)));
  kernel.body.push_back(dot_loop(a, a_base, 1, b, b_base, s.n, s.k));
  kernel.body.push_back(kir::store(y, index, kir::var("acc", ScalarType::f32)));
  return kernel;
}

}  // namespace kiln::lower

// Gemm and MatMul: the shapes checked and handed to the register-blocked
// GEMM template (shaders/gemm_template.h) with the knobs the heuristic picks
// for the target, or the target's override (tuning_site.h).
#include "graph/broadcast.h"
#include "graph/weight_layouts.h"
#include "shaders/gemm_template.h"
#include "src/base/check.h"
#include "src/lower/index.h"
#include "src/lower/lowerings.h"
#include "src/lower/tuning_site.h"

#include <kiln/error.h>

namespace kiln::lower {

using kir::Access;
using kir::Expr;
using kir::ScalarType;
using kir::Stmt;

namespace {

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
  kir::Kernel kernel("gemm");
  shaders::GemmProblem problem;
  problem.m = s.m;
  problem.n = s.n;
  problem.k = s.k;
  // Element (row, k) of op(A) and (k, col) of op(B).
  problem.a_row_stride = s.trans_a ? 1 : s.k;
  problem.a_k_stride = s.trans_a ? s.m : 1;
  problem.b_k_stride = s.trans_b ? 1 : s.n;
  problem.b_col_stride = s.trans_b ? s.k : 1;
  problem.y_row_stride = s.n;
  problem.a = kernel.add_buffer("a", ScalarType::f32, Access::read);
  problem.b = kernel.add_buffer("b", ScalarType::f32, Access::read);
  // beta == 0 drops C, as the ONNX spec's "beta * C" term then vanishes.
  const bool has_c = ctx.has_input(2);
  const kir::Buf c = has_c ? kernel.add_buffer("c", ScalarType::f32, Access::read) : kir::Buf{};
  problem.y = kernel.add_buffer("y", ScalarType::f32, Access::write);
  const Shape out_shape = {s.m, s.n};
  const Shape c_shape = has_c ? Shape(ctx.input_shape(2)) : Shape{};
  problem.epilogue = [&](Expr acc, Expr row, Expr col, Expr) {
    Expr result = alpha != 1.0 ? kir::f32(alpha) * acc : acc;
    if (has_c && beta != 0.0) {
      const Expr coords[] = {row, col};
      const Expr c_value = kir::load(c, broadcast_offset(coords, out_shape, c_shape), ScalarType::f32);
      result = result + (beta == 1.0 ? c_value : kir::f32(beta) * c_value);
    }
    return apply_activation(ctx, result);
  };
  build_tuned_gemm(kernel, problem, ctx.target, "gemm");
  return kernel;
}

namespace {

bool packed_b(const OpContext& ctx) {
  return ctx.node.attrs.get_string("weight_layout", "KN") == graph::kMatMulPackedLayout;
}

// B's logical [K, N] shape: packed, B is [N / 16, K, 16].
Shape logical_b_shape(const OpContext& ctx) {
  const Shape& b = ctx.input_shape(1);
  if (!packed_b(ctx)) return b;
  KILN_CHECK(b.size() == 3 && b[2] == graph::kMatMulPackedBlock, ErrorKind::ShapeMismatch,
             "MatMul '" + ctx.node.name + "': B with weight_layout \"" + graph::kMatMulPackedLayout +
                 "\" must be [N / 16, K, 16], got " + shape_str(b));
  return {b[1], b[0] * graph::kMatMulPackedBlock};
}

// A [..., M, K] times B packed as [N / 16, K, 16]: a batch of N / 16 products
// of 16 columns each, batch entry j reading B's contiguous slab j and writing
// columns [16 j, 16 j + 16) of Y [rows, N]. A's leading dims fold into M.
kir::Kernel lower_matmul_packed_b(const OpContext& ctx, const MatMulShape& s) {
  KILN_CHECK(ctx.input_shape(0).size() >= 2 && s.batch_b.empty(), ErrorKind::Unsupported,
             "MatMul '" + ctx.node.name + "': a packed B needs A of rank >= 2");
  constexpr std::int64_t block = graph::kMatMulPackedBlock;
  kir::Kernel kernel("matmul_packed");
  shaders::GemmProblem problem;
  problem.batch = s.n / block;
  problem.m = num_elements(s.batch) * s.m;
  problem.n = block;
  problem.k = s.k;
  problem.a_row_stride = s.k;
  problem.a_k_stride = 1;
  problem.b_k_stride = block;
  problem.b_col_stride = 1;
  problem.y_row_stride = s.n;
  problem.a = kernel.add_buffer("a", ScalarType::f32, Access::read);
  problem.b = kernel.add_buffer("b", ScalarType::f32, Access::read);
  problem.y = kernel.add_buffer("y", ScalarType::f32, Access::write);
  problem.a_base_multiple = 4;  // every A base is 0
  problem.b_base_multiple = s.k * block;
  problem.y_base_multiple = block;
  problem.bases = [&s](std::vector<Stmt>& body, Expr slab) {
    shaders::GemmBases bases;
    bases.a = kir::i32(0);
    bases.b = declare_index(body, "b_base", IndexSum().add(slab, s.k * block).expr());
    bases.y = declare_index(body, "y_base", IndexSum().add(slab, block).expr());
    return bases;
  };
  build_tuned_gemm(kernel, problem, ctx.target, "matmul_packed");
  return kernel;
}

}  // namespace

std::optional<std::string> matmul_unsupported(const OpContext& ctx) {
  const Shape& a = ctx.input_shape(0);
  const Shape b = logical_b_shape(ctx);
  const MatMulShape s = matmul_shape(a, b);
  if (ctx.output_shape() != s.output)
    return "output " + shape_str(ctx.output_shape()) + " is not the expected " + shape_str(s.output);
  return std::nullopt;
}

kir::Kernel lower_matmul(const OpContext& ctx) {
  const MatMulShape s = matmul_shape(ctx.input_shape(0), logical_b_shape(ctx));
  if (packed_b(ctx)) return lower_matmul_packed_b(ctx, s);
  kir::Kernel kernel("matmul");
  shaders::GemmProblem problem;
  problem.batch = num_elements(s.batch);
  problem.m = s.m;
  // A batched A times one B ([..., M, K] x [K, N], as in every Linear on a
  // token or channels-last tensor) is a single GEMM of batch * M rows: the
  // heuristic then sees M = 196 rather than 14 batches of 14 rows and can pick
  // full register tiles.
  if (problem.batch > 1 && num_elements(s.batch_b) == 1 && s.batch_a == s.batch && ctx.input_shape(0).size() >= 2) {
    problem.m = problem.batch * s.m;
    problem.batch = 1;
  }
  problem.n = s.n;
  problem.k = s.k;
  problem.a_row_stride = s.k;
  problem.a_k_stride = 1;
  problem.b_k_stride = s.n;
  problem.b_col_stride = 1;
  problem.y_row_stride = s.n;
  problem.a = kernel.add_buffer("a", ScalarType::f32, Access::read);
  problem.b = kernel.add_buffer("b", ScalarType::f32, Access::read);
  problem.y = kernel.add_buffer("y", ScalarType::f32, Access::write);
  // The output as [batch, M, N]; the batch index is broadcast into A's and
  // B's own batch shapes.
  if (problem.batch > 1) {
    problem.a_base_multiple = s.m * s.k;
    problem.b_base_multiple = s.k * s.n;
    problem.y_base_multiple = s.m * s.n;
    problem.bases = [&s](std::vector<Stmt>& body, Expr batch) {
      const Shape batch_shapes[] = {s.batch_a, s.batch_b};
      const std::vector<Expr> offsets = broadcast_offsets(body, batch, s.batch, batch_shapes, "bc");
      shaders::GemmBases bases;
      bases.a = declare_index(body, "a_base", IndexSum().add(offsets[0], s.m * s.k).expr());
      bases.b = declare_index(body, "b_base", IndexSum().add(offsets[1], s.k * s.n).expr());
      bases.y = declare_index(body, "y_base", IndexSum().add(batch, s.m * s.n).expr());
      return bases;
    };
  }
  build_tuned_gemm(kernel, problem, ctx.target, "matmul");
  return kernel;
}

}  // namespace kiln::lower

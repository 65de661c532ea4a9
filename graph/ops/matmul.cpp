// MatMul (numpy matmul: batched, broadcast) and Gemm (2-D, transposes, alpha,
// beta, bias C broadcast to [M, N], kiln's fused `activation` extension).
//
// MatMul's kiln extension (only the pack_matmul_weights compile pass
// produces it): weight_layout="NK16n" means B is the 2-D [K, N] operand
// stored as [N / 16, K, 16], each block of 16 columns contiguous along K.
#include <algorithm>
#include <cmath>

#include "graph/broadcast.h"
#include "graph/ops/ops.h"
#include "graph/weight_layouts.h"
#include "src/base/check.h"

namespace kiln::graph::ops {

namespace {

// ---- MatMul ---------------------------------------------------------------------

// A MatMul's operands as batches of matrices: 1-D operands are promoted as
// numpy does (A [K] -> [1, K], B [K] -> [K, 1]) and the unit dim is dropped
// from the result. Dims that may be symbolic: comparisons the expressions
// do not decide are guarded.
struct MatMulShape {
  SymShape batch_a, batch_b, batch;  // leading dims; batch is their broadcast
  sym::Dim m, k, n;
  SymShape out;
};

MatMulShape matmul_shape(const TensorType& a, const TensorType& b) {
  KILN_CHECK(!a.shape.empty() && !b.shape.empty(), ErrorKind::ShapeMismatch,
             "operands must have rank >= 1: " + describe("A", a) + ", " + describe("B", b));
  const SymShape& sa = a.shape;
  const SymShape& sb = b.shape;
  MatMulShape s;
  s.m = sa.size() >= 2 ? sa[sa.size() - 2] : sym::Dim(1);
  s.k = sa.back();
  const sym::Dim kb = sb.size() >= 2 ? sb[sb.size() - 2] : sb[0];
  s.n = sb.size() >= 2 ? sb.back() : sym::Dim(1);
  KILN_CHECK(s.k == kb, ErrorKind::ShapeMismatch,
             "inner dimensions differ (" + std::to_string(s.k.hint()) + " vs " + std::to_string(kb.hint()) +
                 "): " + describe("A", a) + ", " + describe("B", b));
  if (sa.size() > 2) s.batch_a.assign(sa.begin(), sa.end() - 2);
  if (sb.size() > 2) s.batch_b.assign(sb.begin(), sb.end() - 2);
  try {
    s.batch = broadcast_dims(s.batch_a, s.batch_b);
  } catch (const Error&) {
    throw_error(ErrorKind::ShapeMismatch, "batch dimensions " + shape_str(s.batch_a.hints()) + " and " +
                                              shape_str(s.batch_b.hints()) + " do not broadcast: " + describe("A", a) +
                                              ", " + describe("B", b));
  }
  s.out = s.batch;
  if (sa.size() >= 2) s.out.push_back(s.m);
  if (sb.size() >= 2) s.out.push_back(s.n);
  return s;
}

// B's logical [K, N] type: B itself unless weight_layout says it is packed.
TensorType logical_b(const Node& node, const TensorType& b) {
  check_known_attributes(node, {"weight_layout", "f32_products"});
  check_f32_products(node);
  const std::string layout = node.attrs.get_string("weight_layout", "KN");
  KILN_CHECK(layout == "KN" || layout == kMatMulPackedLayout, ErrorKind::InvalidArgument,
             "attribute 'weight_layout' must be \"KN\" or \"" + std::string(kMatMulPackedLayout) + "\", got \"" +
                 layout + "\"");
  if (layout == "KN") return b;
  KILN_CHECK(b.shape.size() == 3 && b.shape[2] == kMatMulPackedBlock, ErrorKind::ShapeMismatch,
             "B with weight_layout \"" + std::string(kMatMulPackedLayout) + "\" must be [N / 16, K, 16], got " +
                 describe("B", b));
  return {b.dtype, {b.shape[1], b.shape[0] * kMatMulPackedBlock}};
}

// [N / 16, K, 16] -> [K, N].
Tensor unpack_b(const Tensor& packed) {
  const std::int64_t blocks = packed.shape()[0], k = packed.shape()[1], n = blocks * kMatMulPackedBlock;
  Tensor plain(DType::f32, {k, n});
  const auto from = packed.values<float>();
  auto to = plain.values<float>();
  for (std::int64_t block = 0; block < blocks; ++block)
    for (std::int64_t q = 0; q < k; ++q)
      for (std::int64_t lane = 0; lane < kMatMulPackedBlock; ++lane)
        to[q * n + block * kMatMulPackedBlock + lane] = from[(block * k + q) * kMatMulPackedBlock + lane];
  return plain;
}

std::vector<TensorType> infer_matmul(const Node& node, std::span<const TensorType> in) {
  require_f32("A", in[0]);
  require_f32("B", in[1]);
  return {{DType::f32, matmul_shape(in[0], logical_b(node, in[1])).out}};
}

std::vector<Tensor> reference_matmul(const Node& node, std::span<const Tensor> in) {
  const Tensor& a = in[0];
  logical_b(node, {in[1].dtype(), in[1].shape()});  // checks the layout and B's shape
  const bool packed = node.attrs.get_string("weight_layout", "KN") == kMatMulPackedLayout;
  const Tensor unpacked = packed ? unpack_b(in[1]) : Tensor();
  const Tensor& b = packed ? unpacked : in[1];
  const MatMulShape s = matmul_shape({a.dtype(), a.shape()}, {b.dtype(), b.shape()});
  // Plain extents (a reference's tensors have no symbols).
  const Shape batch_shape = s.batch;
  const std::int64_t m = s.m, k = s.k, n = s.n;
  const Strides stride_a = broadcast_strides(s.batch_a, batch_shape);
  const Strides stride_b = broadcast_strides(s.batch_b, batch_shape);
  const std::int64_t matrix_a = m * k, matrix_b = k * n, matrix_y = m * n;
  Tensor y(DType::f32, s.out);
  auto av = a.values<float>();
  auto bv = b.values<float>();
  auto yv = y.values<float>();
  const std::int64_t batches = num_elements(batch_shape);
  std::vector<double> row(static_cast<std::size_t>(n));
  for (std::int64_t batch = 0; batch < batches; ++batch) {
    const std::vector<std::int64_t> coords = unravel_index(batch, batch_shape);
    std::int64_t base_a = 0, base_b = 0;
    for (std::size_t d = 0; d < coords.size(); ++d) {
      base_a += coords[d] * stride_a[d] * matrix_a;
      base_b += coords[d] * stride_b[d] * matrix_b;
    }
    // A row of Y at a time, B read along its rows: each element's sum still
    // adds its k products in order, in double.
    for (std::int64_t i = 0; i < m; ++i) {
      std::fill(row.begin(), row.end(), 0.0);
      for (std::int64_t p = 0; p < k; ++p) {
        const double a_ip = av[base_a + i * k + p];
        const float* b_row = bv.data() + base_b + p * n;
        for (std::int64_t j = 0; j < n; ++j) row[j] += a_ip * static_cast<double>(b_row[j]);
      }
      for (std::int64_t j = 0; j < n; ++j) yv[batch * matrix_y + i * n + j] = static_cast<float>(row[j]);
    }
  }
  return {y};
}

// ---- Gemm -----------------------------------------------------------------------

struct GemmParams {
  bool trans_a = false, trans_b = false;
  double alpha = 1.0, beta = 1.0;
  Activation activation = Activation::none;
};

GemmParams read_gemm_params(const Node& node) {
  check_known_attributes(node, {"alpha", "beta", "transA", "transB", "activation", "f32_products"});
  check_f32_products(node);
  GemmParams p;
  p.trans_a = get_flag(node, "transA", false);
  p.trans_b = get_flag(node, "transB", false);
  p.alpha = node.attrs.get_float("alpha", 1.0);
  p.beta = node.attrs.get_float("beta", 1.0);
  KILN_CHECK(std::isfinite(p.alpha) && std::isfinite(p.beta), ErrorKind::InvalidArgument,
             "attributes 'alpha' and 'beta' must be finite");
  p.activation = get_activation(node);
  return p;
}

std::vector<TensorType> infer_gemm(const Node& node, std::span<const TensorType> in) {
  const GemmParams p = read_gemm_params(node);
  const TensorType& a = in[0];
  const TensorType& b = in[1];
  require_f32("A", a);
  require_f32("B", b);
  require_rank("A", a, 2);
  require_rank("B", b, 2);
  const sym::Dim m = p.trans_a ? a.shape[1] : a.shape[0];
  const sym::Dim k = p.trans_a ? a.shape[0] : a.shape[1];
  const sym::Dim kb = p.trans_b ? b.shape[1] : b.shape[0];
  const sym::Dim n = p.trans_b ? b.shape[0] : b.shape[1];
  KILN_CHECK(k == kb, ErrorKind::ShapeMismatch,
             "inner dimensions differ (" + std::to_string(k.hint()) + " vs " + std::to_string(kb.hint()) + "): " + describe("A", a) +
                 " (transA " + std::to_string(p.trans_a) + "), " + describe("B", b) + " (transB " +
                 std::to_string(p.trans_b) + ")");
  const SymShape out{m, n};
  if (has_input(node, 2)) {
    require_f32("C", in[2]);
    KILN_CHECK(dims_broadcast_to(in[2].shape, out), ErrorKind::ShapeMismatch,
               describe("C", in[2]) + " does not broadcast to the result " + shape_str(out.hints()));
  }
  return {{DType::f32, out}};
}

std::vector<Tensor> reference_gemm(const Node& node, std::span<const Tensor> in) {
  const GemmParams p = read_gemm_params(node);
  const Shape out_shape = infer_gemm(node, types_of(in))[0].shape;
  const std::int64_t m = out_shape[0], n = out_shape[1];
  const std::int64_t k = p.trans_a ? in[0].shape()[0] : in[0].shape()[1];
  auto av = in[0].values<float>();
  auto bv = in[1].values<float>();
  const bool has_c = has_input(node, 2);
  const Strides stride_c = has_c ? broadcast_strides(in[2].shape(), out_shape) : Strides{0, 0};
  Tensor y(DType::f32, out_shape);
  auto yv = y.values<float>();
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (std::int64_t q = 0; q < k; ++q) {
        const float a_iq = p.trans_a ? av[q * m + i] : av[i * k + q];
        const float b_qj = p.trans_b ? bv[j * k + q] : bv[q * n + j];
        acc += static_cast<double>(a_iq) * static_cast<double>(b_qj);
      }
      double value = p.alpha * acc;
      if (has_c) value += p.beta * static_cast<double>(in[2].values<float>()[i * stride_c[0] + j * stride_c[1]]);
      yv[i * n + j] = static_cast<float>(apply_activation(p.activation, value));
    }
  return {y};
}

}  // namespace

void register_matmul_ops(OpTable& table) {
  OpSchema matmul;
  matmul.name = "MatMul";
  matmul.min_inputs = 2;
  matmul.max_inputs = 2;
  matmul.infer = infer_matmul;
  matmul.reference = reference_matmul;
  matmul.summary = "numpy matmul: batched, batch dims broadcast, 1-D operands promoted";
  add_op(table, matmul);

  OpSchema gemm;
  gemm.name = "Gemm";
  gemm.min_inputs = 2;
  gemm.max_inputs = 3;
  gemm.infer = infer_gemm;
  gemm.reference = reference_gemm;
  gemm.summary = "alpha * A' B' + beta * C (C broadcast to [M, N]); activation=\"Relu\" fuses a Relu";
  add_op(table, gemm);
}

}  // namespace kiln::graph::ops

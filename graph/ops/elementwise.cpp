// Add, Sub, Mul, Div: numpy multidirectional broadcasting, f32, i64 or i32
// (integers wrap on overflow, as ONNX Runtime's and every kernel's do).
#include "graph/broadcast.h"
#include "graph/ops/ops.h"
#include "src/base/check.h"

#include <type_traits>

namespace kiln::graph::ops {

namespace {

enum class Arith { add, sub, mul, div };

std::vector<TensorType> infer_binary(const Node& node, std::span<const TensorType> in) {
  check_known_attributes(node, {});
  require_same_dtype("A", in[0], "B", in[1]);
  KILN_CHECK(in[0].dtype == DType::f32 || in[0].dtype == DType::i64 || in[0].dtype == DType::i32,
             ErrorKind::Unsupported,
             "dtype " + std::string(dtype_name(in[0].dtype)) + " is not supported (f32, i64 or i32)");
  return {{in[0].dtype, broadcast_dims(in[0].shape, in[1].shape)}};
}

template <class T>
T apply(Arith op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    // Two's complement wrapping, computed unsigned (signed overflow is undefined in C++).
    using U = std::make_unsigned_t<T>;
    const U ua = static_cast<U>(a), ub = static_cast<U>(b);
    switch (op) {
      case Arith::add: return static_cast<T>(static_cast<U>(ua + ub));
      case Arith::sub: return static_cast<T>(static_cast<U>(ua - ub));
      case Arith::mul: return static_cast<T>(static_cast<U>(ua * ub));
      case Arith::div:
        KILN_CHECK(b != 0, ErrorKind::InvalidArgument, "integer division by zero");
        if (b == -1) return static_cast<T>(static_cast<U>(U{0} - ua));  // the minimum / -1 wraps to itself
        return a / b;
    }
  } else {
    switch (op) {
      case Arith::add: return a + b;
      case Arith::sub: return a - b;
      case Arith::mul: return a * b;
      case Arith::div: return a / b;
    }
  }
  return T{};
}

// Every output element reads the input elements its coordinates broadcast to.
template <class T>
Tensor broadcast_binary(Arith op, const Tensor& a, const Tensor& b) {
  const Shape out_shape = broadcast_shapes(a.shape(), b.shape());
  const Strides stride_a = broadcast_strides(a.shape(), out_shape);
  const Strides stride_b = broadcast_strides(b.shape(), out_shape);
  Tensor out(a.dtype(), out_shape);
  auto x = a.values<T>();
  auto y = b.values<T>();
  auto z = out.values<T>();
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    const std::vector<std::int64_t> coords = unravel_index(i, out_shape);
    std::int64_t offset_a = 0, offset_b = 0;
    for (std::size_t d = 0; d < coords.size(); ++d) {
      offset_a += coords[d] * stride_a[d];
      offset_b += coords[d] * stride_b[d];
    }
    z[i] = apply<T>(op, x[offset_a], y[offset_b]);
  }
  return out;
}

OpSchema binary_schema(const std::string& name, Arith op, const std::string& summary) {
  OpSchema s;
  s.name = name;
  s.min_inputs = 2;
  s.max_inputs = 2;
  s.infer = infer_binary;
  s.reference = [op](const Node&, std::span<const Tensor> in) -> std::vector<Tensor> {
    if (in[0].dtype() == DType::i64) return {broadcast_binary<std::int64_t>(op, in[0], in[1])};
    if (in[0].dtype() == DType::i32) return {broadcast_binary<std::int32_t>(op, in[0], in[1])};
    return {broadcast_binary<float>(op, in[0], in[1])};
  };
  s.summary = summary;
  return s;
}

}  // namespace

void register_elementwise_ops(OpTable& table) {
  add_op(table, binary_schema("Add", Arith::add, "A + B, numpy broadcasting"));
  add_op(table, binary_schema("Sub", Arith::sub, "A - B, numpy broadcasting"));
  add_op(table, binary_schema("Mul", Arith::mul, "A * B, numpy broadcasting"));
  add_op(table, binary_schema("Div", Arith::div, "A / B, numpy broadcasting (integers truncate toward zero)"));
}

}  // namespace kiln::graph::ops

// The math op family: unary math (Sqrt ... Sign), HardSigmoid, HardSwish,
// Pow, variadic Min/Max/Sum/Mean, comparisons, boolean logic, Where and Cast.
//
// f32 is the dtype every op supports; integer and bool variants exist where
// real exports and ONNX's node tests use them (shape arithmetic, masks).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <optional>
#include <type_traits>

#include "graph/broadcast.h"
#include "graph/ops/ops.h"
#include "src/base/check.h"

#include <kiln/float16.h>

namespace kiln::graph::ops {

namespace {

// ---- dtype helpers ------------------------------------------------------------

// Throws Unsupported unless `type` has one of the `allowed` dtypes.
void require_dtype_in(std::string_view what, const TensorType& type, std::initializer_list<DType> allowed) {
  for (DType d : allowed)
    if (type.dtype == d) return;
  std::string list;
  for (DType d : allowed) list += (list.empty() ? "" : ", ") + std::string(dtype_name(d));
  throw_error(ErrorKind::Unsupported, describe(what, type) + " has an unsupported dtype (expected " + list + ")");
}

// Calls f(T{}) with the C++ element type of a numeric dtype (f32, i32, i64, u8).
template <class F>
decltype(auto) visit_numeric(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32:
      return f(float{});
    case DType::i32:
      return f(std::int32_t{});
    case DType::i64:
      return f(std::int64_t{});
    case DType::u8:
    case DType::boolean:
      return f(std::uint8_t{});
    case DType::f16:
    case DType::bf16:
      break;  // computed in f32 (op_registry.cpp widens 16-bit inputs)
  }
  throw_error(ErrorKind::Internal, "internal error: no arithmetic element type for dtype " +
                                       std::string(dtype_name(dtype)));
}

// ---- numpy broadcasting over any number of inputs ---------------------------------

// The broadcast shape of all `shapes`; the error names every shape.
SymShape broadcast_all(std::span<const TensorType> types) {
  SymShape out = types[0].shape;
  for (std::size_t i = 1; i < types.size(); ++i) out = broadcast_dims(out, types[i].shape);
  return out;
}

// Calls f(output_index, offsets) for every element of `out_shape` in
// row-major order, with one offset per input into its (broadcast) data.
template <class F>
void for_each_broadcast(const Shape& out_shape, std::span<const Tensor> inputs, F f) {
  std::vector<Strides> strides;
  for (const Tensor& t : inputs) strides.push_back(broadcast_strides(t.shape(), out_shape));
  std::vector<std::int64_t> coords(out_shape.size(), 0);
  std::vector<std::int64_t> offsets(inputs.size(), 0);
  const std::int64_t count = num_elements(out_shape);
  for (std::int64_t i = 0; i < count; ++i) {
    f(i, std::span<const std::int64_t>(offsets));
    // Advance the coordinates like an odometer, keeping the offsets in step.
    for (std::size_t d = out_shape.size(); d-- > 0;) {
      ++coords[d];
      for (std::size_t j = 0; j < inputs.size(); ++j) offsets[j] += strides[j][d];
      if (coords[d] < out_shape[d]) break;
      for (std::size_t j = 0; j < inputs.size(); ++j) offsets[j] -= strides[j][d] * out_shape[d];
      coords[d] = 0;
    }
  }
}

// ---- unary ops ----------------------------------------------------------------------


OpSchema simple_float_unary(const std::string& name, double (*fn)(double), const std::string& summary) {
  return f32_unary_schema(
      name, {}, [fn](const Node&) -> ElementFn { return fn; }, summary);
}

ElementFn make_hard_sigmoid(const Node& node) {
  const double alpha = node.attrs.get_float("alpha", 0.2);
  const double beta = node.attrs.get_float("beta", 0.5);
  return [alpha, beta](double x) { return std::isnan(x) ? x : std::clamp(alpha * x + beta, 0.0, 1.0); };
}

double hard_swish(double x) { return std::isnan(x) ? x : x * std::clamp(x / 6.0 + 0.5, 0.0, 1.0); }

enum class SignedUnary { neg, abs, sign };

template <class T>
T apply_signed_unary(SignedUnary op, T x) {
  if constexpr (std::is_floating_point_v<T>) {
    if (op == SignedUnary::neg) return -x;
    if (op == SignedUnary::abs) return std::fabs(x);
    return std::isnan(x) ? x : static_cast<T>((x > 0) - (x < 0));
  } else {
    // Negate through the unsigned type so that the minimum wraps instead of overflowing.
    using U = std::make_unsigned_t<T>;
    const T negated = static_cast<T>(U{0} - static_cast<U>(x));
    if (op == SignedUnary::neg) return negated;
    if (op == SignedUnary::abs) return x < 0 ? negated : x;
    return static_cast<T>((x > 0) - (x < 0));
  }
}

// Neg, Abs, Sign: f32, i32 or i64 (integer Neg and Abs wrap as in two's complement).
OpSchema signed_unary_schema(const std::string& name, SignedUnary op, const std::string& summary) {
  OpSchema s;
  s.name = name;
  s.infer = [](const Node& node, std::span<const TensorType> in) -> std::vector<TensorType> {
    check_known_attributes(node, {});
    require_dtype_in("input X", in[0], {DType::f32, DType::i32, DType::i64});
    return {in[0]};
  };
  s.reference = [op](const Node&, std::span<const Tensor> in) -> std::vector<Tensor> {
    Tensor out(in[0].dtype(), in[0].shape());
    visit_numeric(in[0].dtype(), [&]<class T>(T) {
      auto x = in[0].values<T>();
      auto y = out.values<T>();
      for (std::size_t i = 0; i < x.size(); ++i) y[i] = apply_signed_unary(op, x[i]);
    });
    return {out};
  };
  s.summary = summary;
  return s;
}

// ---- Pow ------------------------------------------------------------------------------

template <class T>
double as_double(std::span<const T> values, std::int64_t offset) {
  return static_cast<double>(values[static_cast<std::size_t>(offset)]);
}

// A double converted to an integer type, truncated toward zero and saturated
// (C++ leaves out-of-range conversions undefined); NaN becomes 0.
template <class T>
T saturate_to(double value) {
  if (std::isnan(value)) return T{0};
  if (value <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (value >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(value);
}

// Pow: X and Y may have different numeric dtypes (ONNX allows it); the result
// has X's dtype. Integer results truncate toward zero as numpy's astype does.
OpSchema pow_schema() {
  OpSchema s;
  s.name = "Pow";
  s.min_inputs = 2;
  s.max_inputs = 2;
  s.infer = [](const Node& node, std::span<const TensorType> in) -> std::vector<TensorType> {
    check_known_attributes(node, {});
    require_dtype_in("base X", in[0], {DType::f32, DType::i32, DType::i64});
    require_dtype_in("exponent Y", in[1], {DType::f32, DType::i32, DType::i64});
    return {{in[0].dtype, broadcast_dims(in[0].shape, in[1].shape)}};
  };
  s.reference = [](const Node&, std::span<const Tensor> in) -> std::vector<Tensor> {
    const Shape shape = broadcast_shapes(in[0].shape(), in[1].shape());
    Tensor out(in[0].dtype(), shape);
    visit_numeric(in[0].dtype(), [&]<class T>(T) {
      auto x = in[0].values<T>();
      auto z = out.values<T>();
      visit_numeric(in[1].dtype(), [&]<class E>(E) {
        auto y = in[1].values<E>();
        for_each_broadcast(shape, in, [&](std::int64_t i, std::span<const std::int64_t> at) {
          const double value = std::pow(as_double(x, at[0]), as_double(y, at[1]));
          if constexpr (std::is_floating_point_v<T>) {
            z[static_cast<std::size_t>(i)] = static_cast<T>(value);
          } else {
            z[static_cast<std::size_t>(i)] = saturate_to<T>(value);
          }
        });
      });
    });
    return {out};
  };
  s.summary = "X ^ Y, numpy broadcasting; the result has X's dtype";
  return s;
}

// ---- Min, Max -----------------------------------------------------------------------

// Min and Max of 1..N inputs of one numeric dtype, numpy broadcasting; NaN propagates.
OpSchema extremum_schema(const std::string& name, bool is_max) {
  OpSchema s;
  s.name = name;
  s.min_inputs = 1;
  s.max_inputs = kUnboundedInputs;
  s.infer = [](const Node& node, std::span<const TensorType> in) -> std::vector<TensorType> {
    check_known_attributes(node, {});
    require_dtype_in("input 0", in[0], {DType::f32, DType::i32, DType::i64, DType::u8});
    for (std::size_t i = 1; i < in.size(); ++i) require_same_dtype("input 0", in[0], "input " + std::to_string(i), in[i]);
    return {{in[0].dtype, broadcast_all(in)}};
  };
  s.reference = [is_max](const Node&, std::span<const Tensor> in) -> std::vector<Tensor> {
    const std::vector<TensorType> types = types_of(in);
    const Shape shape = broadcast_all(types);
    Tensor out(in[0].dtype(), shape);
    visit_numeric(in[0].dtype(), [&]<class T>(T) {
      auto z = out.values<T>();
      std::vector<std::span<const T>> x;
      for (const Tensor& t : in) x.push_back(t.values<T>());
      for_each_broadcast(shape, in, [&](std::int64_t i, std::span<const std::int64_t> at) {
        T best = x[0][static_cast<std::size_t>(at[0])];
        for (std::size_t j = 1; j < in.size(); ++j) {
          const T v = x[j][static_cast<std::size_t>(at[j])];
          if constexpr (std::is_floating_point_v<T>) {
            if (std::isnan(v) || std::isnan(best)) {
              best = std::numeric_limits<T>::quiet_NaN();
              continue;
            }
          }
          best = is_max ? std::max(best, v) : std::min(best, v);
        }
        z[static_cast<std::size_t>(i)] = best;
      });
    });
    return {out};
  };
  s.summary = is_max ? "elementwise maximum of all inputs, numpy broadcasting"
                     : "elementwise minimum of all inputs, numpy broadcasting";
  return s;
}

// ---- Mod ----------------------------------------------------------------------------

// The remainder of a / b: with fmod=1 C's fmod (the sign of a); with fmod=0
// (integers only, as ONNX requires) the sign of b, as Python's %.
template <class T>
T remainder_of(T a, T b, bool fmod) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fmod(a, b);
  } else {
    KILN_CHECK(b != 0, ErrorKind::InvalidArgument, "Mod by an integer zero");
    if constexpr (std::is_signed_v<T>) {
      if (b == -1) return 0;  // the lowest value % -1 would overflow
      const T r = static_cast<T>(a % b);
      return !fmod && r != 0 && ((r < 0) != (b < 0)) ? static_cast<T>(r + b) : r;
    } else {
      return static_cast<T>(a % b);
    }
  }
}

OpSchema mod_schema() {
  OpSchema s;
  s.name = "Mod";
  s.min_inputs = 2;
  s.max_inputs = 2;
  s.infer = [](const Node& node, std::span<const TensorType> in) -> std::vector<TensorType> {
    check_known_attributes(node, {"fmod"});
    require_dtype_in("input A", in[0], {DType::f32, DType::i32, DType::i64, DType::u8});
    require_same_dtype("A", in[0], "B", in[1]);
    const bool fmod = get_flag(node, "fmod", false);
    KILN_CHECK(fmod || in[0].dtype != DType::f32, ErrorKind::InvalidArgument,
               "Mod of floating-point inputs needs fmod=1 (the ONNX definition)");
    return {{in[0].dtype, broadcast_dims(in[0].shape, in[1].shape)}};
  };
  s.reference = [](const Node& node, std::span<const Tensor> in) -> std::vector<Tensor> {
    const bool fmod = get_flag(node, "fmod", false);
    const Shape shape = broadcast_shapes(in[0].shape(), in[1].shape());
    Tensor out(in[0].dtype(), shape);
    visit_numeric(in[0].dtype(), [&]<class T>(T) {
      auto a = in[0].values<T>();
      auto b = in[1].values<T>();
      auto z = out.values<T>();
      for_each_broadcast(shape, in, [&](std::int64_t i, std::span<const std::int64_t> at) {
        z[static_cast<std::size_t>(i)] =
            remainder_of<T>(a[static_cast<std::size_t>(at[0])], b[static_cast<std::size_t>(at[1])], fmod);
      });
    });
    return {out};
  };
  s.summary = "remainder of A / B, numpy broadcasting: fmod=1 takes A's sign (C's fmod), fmod=0 B's (integers)";
  return s;
}

// ---- Sum, Mean ----------------------------------------------------------------------

// Sum and Mean of 1..N f32 inputs, numpy broadcasting (accumulated in double).
OpSchema variadic_sum_schema(const std::string& name, bool mean) {
  OpSchema s;
  s.name = name;
  s.min_inputs = 1;
  s.max_inputs = kUnboundedInputs;
  s.infer = [](const Node& node, std::span<const TensorType> in) -> std::vector<TensorType> {
    check_known_attributes(node, {});
    require_dtype_in("input 0", in[0], {DType::f32});
    for (std::size_t i = 1; i < in.size(); ++i) require_same_dtype("input 0", in[0], "input " + std::to_string(i), in[i]);
    return {{in[0].dtype, broadcast_all(in)}};
  };
  s.reference = [mean](const Node&, std::span<const Tensor> in) -> std::vector<Tensor> {
    const Shape shape = broadcast_all(types_of(in));
    Tensor out(DType::f32, shape);
    auto z = out.values<float>();
    std::vector<std::span<const float>> x;
    for (const Tensor& t : in) x.push_back(t.values<float>());
    for_each_broadcast(shape, in, [&](std::int64_t i, std::span<const std::int64_t> at) {
      double sum = 0;
      for (std::size_t j = 0; j < in.size(); ++j) sum += x[j][static_cast<std::size_t>(at[j])];
      z[static_cast<std::size_t>(i)] = static_cast<float>(mean ? sum / static_cast<double>(in.size()) : sum);
    });
    return {out};
  };
  s.summary = mean ? "elementwise mean of all inputs (f32), numpy broadcasting"
                   : "elementwise sum of all inputs (f32), numpy broadcasting";
  return s;
}

// ---- comparisons and logic ------------------------------------------------------

enum class Compare { equal, less, greater, less_equal, greater_equal };

template <class T>
bool compare(Compare op, T a, T b) {
  switch (op) {
    case Compare::equal:
      return a == b;
    case Compare::less:
      return a < b;
    case Compare::greater:
      return a > b;
    case Compare::less_equal:
      return a <= b;
    case Compare::greater_equal:
      return a >= b;
  }
  return false;
}

// A comparison of two same-dtype inputs, numpy broadcasting, giving bool.
OpSchema compare_schema(const std::string& name, Compare op, const std::string& summary) {
  OpSchema s;
  s.name = name;
  s.min_inputs = 2;
  s.max_inputs = 2;
  s.infer = [op](const Node& node, std::span<const TensorType> in) -> std::vector<TensorType> {
    check_known_attributes(node, {});
    if (op == Compare::equal)
      require_dtype_in("input A", in[0], {DType::f32, DType::i32, DType::i64, DType::u8, DType::boolean});
    else
      require_dtype_in("input A", in[0], {DType::f32, DType::i32, DType::i64, DType::u8});
    require_same_dtype("A", in[0], "B", in[1]);
    return {{DType::boolean, broadcast_dims(in[0].shape, in[1].shape)}};
  };
  s.reference = [op](const Node&, std::span<const Tensor> in) -> std::vector<Tensor> {
    const Shape shape = broadcast_shapes(in[0].shape(), in[1].shape());
    Tensor out(DType::boolean, shape);
    auto z = out.values<std::uint8_t>();
    visit_numeric(in[0].dtype(), [&]<class T>(T) {
      auto a = in[0].values<T>();
      auto b = in[1].values<T>();
      for_each_broadcast(shape, in, [&](std::int64_t i, std::span<const std::int64_t> at) {
        z[static_cast<std::size_t>(i)] =
            compare(op, a[static_cast<std::size_t>(at[0])], b[static_cast<std::size_t>(at[1])]) ? 1 : 0;
      });
    });
    return {out};
  };
  s.summary = summary;
  return s;
}

// IsNaN and IsInf (detect_negative, detect_positive) of an f32 tensor, giving bool.
OpSchema float_class_schema(const std::string& name) {
  OpSchema s;
  s.name = name;
  s.infer = [name](const Node& node, std::span<const TensorType> in) -> std::vector<TensorType> {
    if (name == "IsInf") check_known_attributes(node, {"detect_negative", "detect_positive"});
    else check_known_attributes(node, {});
    require_dtype_in("input X", in[0], {DType::f32});
    return {{DType::boolean, in[0].shape}};
  };
  s.reference = [name](const Node& node, std::span<const Tensor> in) -> std::vector<Tensor> {
    const bool negative = get_flag(node, "detect_negative", true);
    const bool positive = get_flag(node, "detect_positive", true);
    Tensor out(DType::boolean, in[0].shape());
    auto z = out.values<std::uint8_t>();
    auto x = in[0].values<float>();
    for (std::size_t i = 0; i < x.size(); ++i) {
      const bool hit = name == "IsNaN" ? std::isnan(x[i])
                                       : std::isinf(x[i]) && (x[i] < 0 ? negative : positive);
      z[i] = hit ? 1 : 0;
    }
    return {out};
  };
  s.summary = name == "IsNaN" ? "x is NaN -> bool" : "x is an infinity (of the signs asked for) -> bool";
  return s;
}

OpSchema not_schema() {
  OpSchema s;
  s.name = "Not";
  s.infer = [](const Node& node, std::span<const TensorType> in) -> std::vector<TensorType> {
    check_known_attributes(node, {});
    require_dtype_in("input X", in[0], {DType::boolean});
    return {in[0]};
  };
  s.reference = [](const Node&, std::span<const Tensor> in) -> std::vector<Tensor> {
    Tensor out(DType::boolean, in[0].shape());
    auto x = in[0].values<std::uint8_t>();
    auto y = out.values<std::uint8_t>();
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] ? 0 : 1;
    return {out};
  };
  s.summary = "logical not of a bool tensor";
  return s;
}

// And, Or, Xor of two bool tensors, numpy broadcasting.
OpSchema logic_schema(const std::string& name, bool (*fn)(bool, bool), const std::string& summary) {
  OpSchema s;
  s.name = name;
  s.min_inputs = 2;
  s.max_inputs = 2;
  s.infer = [](const Node& node, std::span<const TensorType> in) -> std::vector<TensorType> {
    check_known_attributes(node, {});
    require_dtype_in("input A", in[0], {DType::boolean});
    require_dtype_in("input B", in[1], {DType::boolean});
    return {{DType::boolean, broadcast_dims(in[0].shape, in[1].shape)}};
  };
  s.reference = [fn](const Node&, std::span<const Tensor> in) -> std::vector<Tensor> {
    const Shape shape = broadcast_shapes(in[0].shape(), in[1].shape());
    Tensor out(DType::boolean, shape);
    auto a = in[0].values<std::uint8_t>();
    auto b = in[1].values<std::uint8_t>();
    auto z = out.values<std::uint8_t>();
    for_each_broadcast(shape, in, [&](std::int64_t i, std::span<const std::int64_t> at) {
      z[static_cast<std::size_t>(i)] =
          fn(a[static_cast<std::size_t>(at[0])] != 0, b[static_cast<std::size_t>(at[1])] != 0) ? 1 : 0;
    });
    return {out};
  };
  s.summary = summary;
  return s;
}

// Where(condition, X, Y): X where condition holds, else Y; all three broadcast.
OpSchema where_schema() {
  OpSchema s;
  s.name = "Where";
  s.min_inputs = 3;
  s.max_inputs = 3;
  s.infer = [](const Node& node, std::span<const TensorType> in) -> std::vector<TensorType> {
    check_known_attributes(node, {});
    require_dtype_in("condition", in[0], {DType::boolean});
    require_same_dtype("X", in[1], "Y", in[2]);
    return {{in[1].dtype, broadcast_all(in)}};
  };
  s.reference = [](const Node&, std::span<const Tensor> in) -> std::vector<Tensor> {
    const std::vector<TensorType> types = types_of(in);
    const Shape shape = broadcast_all(types);
    Tensor out(in[1].dtype(), shape);
    const std::size_t size = dtype_size(out.dtype());
    auto condition = in[0].values<std::uint8_t>();
    std::byte* z = out.bytes().data();
    for_each_broadcast(shape, in, [&](std::int64_t i, std::span<const std::int64_t> at) {
      const bool take_x = condition[static_cast<std::size_t>(at[0])] != 0;
      const Tensor& from = take_x ? in[1] : in[2];
      const auto offset = static_cast<std::size_t>(take_x ? at[1] : at[2]);
      std::memcpy(z + static_cast<std::size_t>(i) * size, from.bytes().data() + offset * size, size);
    });
    return {out};
  };
  s.summary = "condition ? X : Y elementwise, numpy broadcasting of all three";
  return s;
}

// ---- Cast ------------------------------------------------------------------------------

// The kiln dtype of an ONNX TensorProto data type code, if kiln has it.
std::optional<DType> dtype_of_onnx_code(std::int64_t code) {
  switch (code) {
    case 1:
      return DType::f32;
    case 2:
      return DType::u8;
    case 6:
      return DType::i32;
    case 7:
      return DType::i64;
    case 9:
      return DType::boolean;
    case 10:
      return DType::f16;
    case 16:
      return DType::bf16;
    default:
      return std::nullopt;
  }
}

DType cast_target(const Node& node) {
  KILN_CHECK(node.attrs.has("to"), ErrorKind::InvalidArgument, "attribute 'to' (the ONNX data type code) is required");
  const std::int64_t code = node.attrs.get_int("to", 0);
  const std::optional<DType> dtype = dtype_of_onnx_code(code);
  KILN_CHECK(dtype.has_value(), ErrorKind::Unsupported,
             "attribute 'to' = " + std::to_string(code) +
                 " is not a supported data type (1 float, 2 uint8, 6 int32, 7 int64, 9 bool, 10 float16, 16 bfloat16)");
  return *dtype;
}

// One element on its way through Cast: floats travel as double, integers and
// bools as int64 so that large i64 values stay exact.
struct CastValue {
  bool is_float;
  double f;
  std::int64_t i;
};

CastValue read_element(const Tensor& t, std::size_t index) {
  switch (t.dtype()) {
    case DType::f32:
      return {true, t.values<float>()[index], 0};
    case DType::f16:
      return {true, f16_value(t.values<std::uint16_t>()[index]), 0};
    case DType::bf16:
      return {true, bf16_value(t.values<std::uint16_t>()[index]), 0};
    case DType::i32:
      return {false, 0, t.values<std::int32_t>()[index]};
    case DType::i64:
      return {false, 0, t.values<std::int64_t>()[index]};
    case DType::u8:
    case DType::boolean:
      return {false, 0, t.values<std::uint8_t>()[index]};
  }
  throw_error(ErrorKind::Internal, "internal error: Cast read an unknown dtype");
}

// Float to integer truncates toward zero (saturating); integer to narrower
// integer wraps as in C.
template <class T>
T integer_of(const CastValue& v) {
  return v.is_float ? saturate_to<T>(v.f) : static_cast<T>(v.i);
}

void write_element(Tensor& t, std::size_t index, const CastValue& v) {
  const double as_float = v.is_float ? v.f : static_cast<double>(v.i);
  switch (t.dtype()) {
    case DType::f32:
      t.values<float>()[index] = static_cast<float>(as_float);
      return;
    case DType::f16:
      t.values<std::uint16_t>()[index] = f16_bits(static_cast<float>(as_float));
      return;
    case DType::bf16:
      t.values<std::uint16_t>()[index] = bf16_bits(static_cast<float>(as_float));
      return;
    case DType::i32:
      t.values<std::int32_t>()[index] = integer_of<std::int32_t>(v);
      return;
    case DType::i64:
      t.values<std::int64_t>()[index] = integer_of<std::int64_t>(v);
      return;
    case DType::u8:
      t.values<std::uint8_t>()[index] = integer_of<std::uint8_t>(v);
      return;
    case DType::boolean:
      t.values<std::uint8_t>()[index] = (v.is_float ? v.f != 0.0 : v.i != 0) ? 1 : 0;
      return;
  }
}

}  // namespace

Tensor cast_tensor(const Tensor& t, DType to) {
  Tensor out(to, t.shape());
  // f32 <-> f16 / bf16, which the reference's 16-bit rule makes around every
  // op: a loop over the elements, not a dispatch on both types per element.
  if (t.dtype() == DType::f32 && (to == DType::f16 || to == DType::bf16)) {
    const std::span<const float> from = t.values<float>();
    const std::span<std::uint16_t> bits = out.values<std::uint16_t>();
    for (std::size_t i = 0; i < from.size(); ++i) bits[i] = to == DType::f16 ? f16_bits(from[i]) : bf16_bits(from[i]);
    return out;
  }
  if ((t.dtype() == DType::f16 || t.dtype() == DType::bf16) && to == DType::f32) {
    const std::span<const std::uint16_t> bits = t.values<std::uint16_t>();
    const std::span<float> values = out.values<float>();
    for (std::size_t i = 0; i < bits.size(); ++i)
      values[i] = t.dtype() == DType::f16 ? f16_value(bits[i]) : bf16_value(bits[i]);
    return out;
  }
  const std::size_t count = static_cast<std::size_t>(out.numel());
  for (std::size_t i = 0; i < count; ++i) write_element(out, i, read_element(t, i));
  return out;
}

namespace {

OpSchema cast_schema() {
  OpSchema s;
  s.name = "Cast";
  s.infer = [](const Node& node, std::span<const TensorType> in) -> std::vector<TensorType> {
    // `saturate` (opset 19) only affects float8 types, which kiln lacks.
    check_known_attributes(node, {"to", "saturate"});
    return {{cast_target(node), in[0].shape}};
  };
  s.reference = [](const Node& node, std::span<const Tensor> in) -> std::vector<Tensor> {
    return {cast_tensor(in[0], cast_target(node))};
  };
  s.summary = "converts to the ONNX data type `to` (floats to integers truncate toward zero, to 16-bit floats to "
              "nearest even)";
  return s;
}

}  // namespace

void register_math_ops(OpTable& table) {
  add_op(table, simple_float_unary("Sqrt", [](double x) { return std::sqrt(x); }, "square root"));
  add_op(table, simple_float_unary("Exp", [](double x) { return std::exp(x); }, "e ^ x"));
  add_op(table, simple_float_unary("Log", [](double x) { return std::log(x); }, "natural logarithm"));
  add_op(table, simple_float_unary("Erf", [](double x) { return std::erf(x); }, "the Gauss error function"));
  add_op(table, simple_float_unary("Sin", [](double x) { return std::sin(x); }, "sine (radians)"));
  add_op(table, simple_float_unary("Cos", [](double x) { return std::cos(x); }, "cosine (radians)"));
  add_op(table, simple_float_unary("Reciprocal", [](double x) { return 1.0 / x; }, "1 / x"));
  add_op(table, simple_float_unary("Floor", [](double x) { return std::floor(x); }, "round toward -infinity"));
  add_op(table, simple_float_unary("Ceil", [](double x) { return std::ceil(x); }, "round toward +infinity"));
  add_op(table, simple_float_unary("Round", [](double x) { return std::nearbyint(x); }, "round to nearest, ties to even"));
  add_op(table, simple_float_unary("Sinh", [](double x) { return std::sinh(x); }, "hyperbolic sine"));
  add_op(table, simple_float_unary("Cosh", [](double x) { return std::cosh(x); }, "hyperbolic cosine"));
  add_op(table, simple_float_unary("Asinh", [](double x) { return std::asinh(x); }, "inverse hyperbolic sine"));
  add_op(table, simple_float_unary("Acosh", [](double x) { return std::acosh(x); }, "inverse hyperbolic cosine"));
  add_op(table, simple_float_unary("Atanh", [](double x) { return std::atanh(x); }, "inverse hyperbolic tangent"));
  // References only for now: the kernel IR has no arctangent to build them from.
  add_op(table, simple_float_unary("Tan", [](double x) { return std::tan(x); }, "tangent (radians)"));
  add_op(table, simple_float_unary("Atan", [](double x) { return std::atan(x); }, "arctangent"));
  add_op(table, simple_float_unary("Asin", [](double x) { return std::asin(x); }, "arcsine"));
  add_op(table, simple_float_unary("Acos", [](double x) { return std::acos(x); }, "arccosine"));
  add_op(table, f32_unary_schema("HardSigmoid", {"alpha", "beta"}, make_hard_sigmoid,
                                   "max(0, min(1, alpha * x + beta)); alpha 0.2, beta 0.5"));
  add_op(table, simple_float_unary("HardSwish", hard_swish, "x * max(0, min(1, x / 6 + 1/2))"));
  add_op(table, signed_unary_schema("Neg", SignedUnary::neg, "-x"));
  add_op(table, signed_unary_schema("Abs", SignedUnary::abs, "|x|"));
  add_op(table, signed_unary_schema("Sign", SignedUnary::sign, "-1, 0 or 1 by the sign of x"));
  add_op(table, pow_schema());
  add_op(table, extremum_schema("Max", true));
  add_op(table, extremum_schema("Min", false));
  add_op(table, mod_schema());
  add_op(table, float_class_schema("IsNaN"));
  add_op(table, float_class_schema("IsInf"));
  add_op(table, variadic_sum_schema("Sum", false));
  add_op(table, variadic_sum_schema("Mean", true));
  add_op(table, compare_schema("Equal", Compare::equal, "A == B -> bool, numpy broadcasting"));
  add_op(table, compare_schema("Less", Compare::less, "A < B -> bool, numpy broadcasting"));
  add_op(table, compare_schema("Greater", Compare::greater, "A > B -> bool, numpy broadcasting"));
  add_op(table, compare_schema("LessOrEqual", Compare::less_equal, "A <= B -> bool, numpy broadcasting"));
  add_op(table, compare_schema("GreaterOrEqual", Compare::greater_equal, "A >= B -> bool, numpy broadcasting"));
  add_op(table, not_schema());
  add_op(table, logic_schema("And", [](bool a, bool b) { return a && b; }, "A and B (bool), numpy broadcasting"));
  add_op(table, logic_schema("Or", [](bool a, bool b) { return a || b; }, "A or B (bool), numpy broadcasting"));
  add_op(table, logic_schema("Xor", [](bool a, bool b) { return a != b; }, "A xor B (bool), numpy broadcasting"));
  add_op(table, where_schema());
  add_op(table, cast_schema());
}

}  // namespace kiln::graph::ops

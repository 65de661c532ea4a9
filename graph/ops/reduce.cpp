// Reductions (ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceProd on f32,
// i32 and i64; ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum,
// ReduceLogSumExp on f32), CumSum, ArgMax/ArgMin (i64 positions) and Hardmax.
//
// The axes are attributes in kiln's IR (ONNX opset 13+ passes them as an
// input; the importer folds it). Absent or empty axes reduce every axis,
// unless noop_with_empty_axes=1, which makes the op an identity.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "graph/broadcast.h"
#include "graph/ops/ops.h"
#include "src/base/check.h"

namespace kiln::graph::ops {

namespace {

void require_arithmetic_dtype(const TensorType& type) {
  KILN_CHECK(type.dtype == DType::f32 || type.dtype == DType::i32 || type.dtype == DType::i64, ErrorKind::Unsupported,
             describe("input", type) + " has an unsupported dtype (expected f32, i32 or i64)");
}

// Calls f(T{}) with the element type of an f32, i32 or i64 tensor.
template <class F>
void visit_arithmetic(DType dtype, F&& f) {
  if (dtype == DType::f32) return f(float{});
  if (dtype == DType::i32) return f(std::int32_t{});
  KILN_ASSERT(dtype == DType::i64);
  f(std::int64_t{});
}

// Integer sums and products wrap around (as numpy's do) instead of overflowing.
template <class T>
T wrapping_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

template <class T>
T wrapping_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

// ---- reductions -----------------------------------------------------------------

enum class Reduction { mean, sum, max, min, prod, l1, l2, sum_square, log_sum, log_sum_exp };

// The sums of a mapped input (f32 only): each element is mapped before it is
// summed (|x|, x^2, e^x) and the sum after (sqrt, log).
bool is_mapped_sum(Reduction kind) {
  return kind == Reduction::l1 || kind == Reduction::l2 || kind == Reduction::sum_square ||
         kind == Reduction::log_sum || kind == Reduction::log_sum_exp;
}
double map_element(Reduction kind, double x) {
  switch (kind) {
    case Reduction::l1: return std::fabs(x);
    case Reduction::l2:
    case Reduction::sum_square: return x * x;
    case Reduction::log_sum_exp: return std::exp(x);
    default: return x;
  }
}
double map_sum(Reduction kind, double sum) {
  if (kind == Reduction::l2) return std::sqrt(sum);
  if (kind == Reduction::log_sum || kind == Reduction::log_sum_exp) return std::log(sum);
  return sum;
}

// Which input axes a reduce node reduces (all false: the op is an identity).
std::vector<bool> reduced_axes(const Node& node, std::size_t rank) {
  const std::vector<std::int64_t> axes = node.attrs.get_ints("axes", {});
  if (axes.empty()) return std::vector<bool>(rank, !get_flag(node, "noop_with_empty_axes", false));
  std::vector<bool> reduced(rank, false);
  for (std::int64_t axis : axes) {
    const auto d = static_cast<std::size_t>(normalize_axis(axis, static_cast<std::int64_t>(rank), "axes"));
    KILN_CHECK(!reduced[d], ErrorKind::InvalidArgument,
               "attribute 'axes' " + shape_str(axes) + " names axis " + std::to_string(d) + " twice");
    reduced[d] = true;
  }
  return reduced;
}

// The input shape with every reduced axis set to 1 (keepdims=1) or dropped.
SymShape reduced_shape(const SymShape& shape, const std::vector<bool>& reduced, bool keepdims) {
  SymShape out;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d]) out.push_back(shape[d]);
    else if (keepdims) out.push_back(1);
  }
  return out;
}

// The value a reduction over no elements produces (an empty axis).
template <class Acc>
Acc identity_of(Reduction kind) {
  switch (kind) {
    case Reduction::mean:
    case Reduction::sum:
    case Reduction::l1:
    case Reduction::l2:
    case Reduction::sum_square:
    case Reduction::log_sum:
    case Reduction::log_sum_exp:
      return Acc{0};
    case Reduction::prod:
      return Acc{1};
    case Reduction::max:
      if constexpr (std::is_floating_point_v<Acc>) return -std::numeric_limits<Acc>::infinity();
      return std::numeric_limits<Acc>::lowest();
    case Reduction::min:
      if constexpr (std::is_floating_point_v<Acc>) return std::numeric_limits<Acc>::infinity();
      return std::numeric_limits<Acc>::max();
  }
  return Acc{0};
}

template <class Acc>
Acc combine(Reduction kind, Acc acc, Acc v) {
  switch (kind) {
    case Reduction::mean:
    case Reduction::sum:
    case Reduction::l1:
    case Reduction::l2:
    case Reduction::sum_square:
    case Reduction::log_sum:
    case Reduction::log_sum_exp:
      return wrapping_add(acc, v);
    case Reduction::prod:
      return wrapping_mul(acc, v);
    case Reduction::max:
    case Reduction::min:
      if constexpr (std::is_floating_point_v<Acc>)
        if (std::isnan(acc) || std::isnan(v)) return std::numeric_limits<Acc>::quiet_NaN();
      return kind == Reduction::max ? std::max(acc, v) : std::min(acc, v);
  }
  return acc;
}

// Every input element is folded into the output element its kept coordinates
// name; floats accumulate in double.
template <class T>
Tensor reduce_tensor(Reduction kind, const Tensor& x, const std::vector<bool>& reduced, const Shape& out_shape) {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
  const Shape& shape = x.shape();
  const Shape kept_shape = reduced_shape(shape, reduced, true);
  Strides out_strides = row_major_strides(kept_shape);
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (reduced[d]) out_strides[d] = 0;

  const std::int64_t out_count = num_elements(kept_shape);
  std::vector<Acc> acc(static_cast<std::size_t>(out_count), identity_of<Acc>(kind));
  auto in = x.values<T>();
  std::vector<std::int64_t> coords(shape.size(), 0);
  std::int64_t out_offset = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    Acc& slot = acc[static_cast<std::size_t>(out_offset)];
    Acc v = static_cast<Acc>(in[i]);
    if constexpr (std::is_floating_point_v<Acc>)
      if (is_mapped_sum(kind)) v = map_element(kind, v);
    slot = combine<Acc>(kind, slot, v);
    for (std::size_t d = shape.size(); d-- > 0;) {
      ++coords[d];
      out_offset += out_strides[d];
      if (coords[d] < shape[d]) break;
      out_offset -= out_strides[d] * shape[d];
      coords[d] = 0;
    }
  }

  const std::int64_t count = num_elements(shape) / std::max<std::int64_t>(out_count, 1);
  Tensor out(x.dtype(), out_shape);
  auto y = out.values<T>();
  for (std::size_t i = 0; i < acc.size(); ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      if (is_mapped_sum(kind)) {
        y[i] = static_cast<T>(map_sum(kind, acc[i]));  // log of an empty sum: -inf
        continue;
      }
    }
    if (kind != Reduction::mean) {
      y[i] = static_cast<T>(acc[i]);
    } else if constexpr (std::is_floating_point_v<T>) {
      y[i] = static_cast<T>(acc[i] / static_cast<double>(count));  // NaN for an empty axis
    } else {
      KILN_CHECK(count > 0, ErrorKind::InvalidArgument, "integer mean over an empty axis is undefined");
      y[i] = static_cast<T>(acc[i] / static_cast<Acc>(count));  // truncates toward zero
    }
  }
  return out;
}

OpSchema reduce_schema(const std::string& name, Reduction kind, const std::string& summary) {
  OpSchema s;
  s.name = name;
  s.infer = [kind](const Node& node, std::span<const TensorType> in) -> std::vector<TensorType> {
    check_known_attributes(node, {"axes", "keepdims", "noop_with_empty_axes"});
    require_arithmetic_dtype(in[0]);
    KILN_CHECK(!is_mapped_sum(kind) || in[0].dtype == DType::f32, ErrorKind::Unsupported,
               describe("input", in[0]) + ": " + node.op + " takes f32 only");
    const std::vector<bool> reduced = reduced_axes(node, in[0].shape.size());
    return {{in[0].dtype, reduced_shape(in[0].shape, reduced, get_flag(node, "keepdims", true))}};
  };
  s.reference = [kind](const Node& node, std::span<const Tensor> in) -> std::vector<Tensor> {
    const std::vector<bool> reduced = reduced_axes(node, in[0].shape().size());
    const Shape out_shape = reduced_shape(in[0].shape(), reduced, get_flag(node, "keepdims", true));
    Tensor out;
    visit_arithmetic(in[0].dtype(), [&]<class T>(T) { out = reduce_tensor<T>(kind, in[0], reduced, out_shape); });
    return {out};
  };
  s.summary = summary;
  return s;
}

// ---- CumSum --------------------------------------------------------------------

std::int64_t cumsum_axis(const Node& node, std::size_t rank) {
  KILN_CHECK(node.attrs.has("axis"), ErrorKind::InvalidArgument,
             "attribute 'axis' is required (the importer folds ONNX's constant axis input into it)");
  return normalize_axis(node.attrs.get_int("axis", 0), static_cast<std::int64_t>(rank), "axis");
}

// Running sums along one axis; each line is an independent scan.
template <class T>
void cumsum_lines(const Tensor& x, Tensor& out, std::size_t axis, bool exclusive, bool reverse) {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
  const Shape& shape = x.shape();
  std::int64_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (std::size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const std::int64_t length = shape[axis];
  auto in = x.values<T>();
  auto y = out.values<T>();
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t r = 0; r < inner; ++r) {
      Acc sum{0};
      for (std::int64_t step = 0; step < length; ++step) {
        const std::int64_t k = reverse ? length - 1 - step : step;
        const auto at = static_cast<std::size_t>((o * length + k) * inner + r);
        if (exclusive) y[at] = static_cast<T>(sum);
        sum = wrapping_add<Acc>(sum, static_cast<Acc>(in[at]));
        if (!exclusive) y[at] = static_cast<T>(sum);
      }
    }
  }
}

OpSchema cumsum_schema() {
  OpSchema s;
  s.name = "CumSum";
  s.infer = [](const Node& node, std::span<const TensorType> in) -> std::vector<TensorType> {
    check_known_attributes(node, {"axis", "exclusive", "reverse"});
    require_arithmetic_dtype(in[0]);
    KILN_CHECK(!in[0].shape.empty(), ErrorKind::ShapeMismatch,
               describe("input", in[0]) + " is a scalar; CumSum needs at least one axis");
    cumsum_axis(node, in[0].shape.size());
    get_flag(node, "exclusive", false);
    get_flag(node, "reverse", false);
    return {in[0]};
  };
  s.reference = [](const Node& node, std::span<const Tensor> in) -> std::vector<Tensor> {
    const auto axis = static_cast<std::size_t>(cumsum_axis(node, in[0].shape().size()));
    const bool exclusive = get_flag(node, "exclusive", false);
    const bool reverse = get_flag(node, "reverse", false);
    Tensor out(in[0].dtype(), in[0].shape());
    visit_arithmetic(in[0].dtype(), [&]<class T>(T) { cumsum_lines<T>(in[0], out, axis, exclusive, reverse); });
    return {out};
  };
  s.summary = "running sum along `axis`; `exclusive` leaves out the element itself, `reverse` runs backwards";
  return s;
}

// ---- ArgMax, ArgMin ---------------------------------------------------------------

struct ArgPlan {
  std::size_t axis = 0;
  bool keepdims = true;
  bool select_last_index = false;
  SymShape output_shape;
};

ArgPlan arg_plan(const Node& node, const TensorType& x) {
  check_known_attributes(node, {"axis", "keepdims", "select_last_index"});
  require_arithmetic_dtype(x);
  KILN_CHECK(!x.shape.empty(), ErrorKind::ShapeMismatch,
             describe("input", x) + " is a scalar; " + node.op + " needs at least one axis");
  ArgPlan plan;
  plan.axis = static_cast<std::size_t>(
      normalize_axis(node.attrs.get_int("axis", 0), static_cast<std::int64_t>(x.shape.size()), "axis"));
  plan.keepdims = get_flag(node, "keepdims", true);
  plan.select_last_index = get_flag(node, "select_last_index", false);
  std::vector<bool> reduced(x.shape.size(), false);
  reduced[plan.axis] = true;
  plan.output_shape = reduced_shape(x.shape, reduced, plan.keepdims);
  // Positions in an empty axis do not exist; an empty output needs none.
  KILN_CHECK(x.shape[plan.axis] > 0 || num_elements(plan.output_shape) == 0, ErrorKind::ShapeMismatch,
             node.op + " along axis " + std::to_string(plan.axis) + " of extent 0 in " + describe("input", x) +
                 " has no position to return");
  return plan;
}

// Whether `v` takes the place of the best value so far: NaN beats every
// number (numpy's argmax/argmin return the first NaN); ties go to the later
// element only with select_last_index.
template <class T>
bool replaces_best(T v, T best, bool is_max, bool select_last) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(best)) return select_last && std::isnan(v);
    if (std::isnan(v)) return true;
  }
  if (v == best) return select_last;
  return is_max ? v > best : v < best;
}

template <class T>
Tensor arg_extremum(const Tensor& x, const ArgPlan& plan, bool is_max) {
  const Shape& shape = x.shape();
  const std::int64_t extent = shape[plan.axis];
  const auto axis = static_cast<std::ptrdiff_t>(plan.axis);
  const std::int64_t inner = num_elements(Shape(shape.begin() + axis + 1, shape.end()));
  const std::int64_t outer = num_elements(Shape(shape.begin(), shape.begin() + axis));
  auto in = x.values<T>();
  Tensor out(DType::i64, plan.output_shape);
  auto y = out.values<std::int64_t>();
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      auto at = [&](std::int64_t e) { return static_cast<std::size_t>((o * extent + e) * inner + i); };
      std::int64_t best = 0;
      for (std::int64_t e = 1; e < extent; ++e)
        if (replaces_best<T>(in[at(e)], in[at(best)], is_max, plan.select_last_index)) best = e;
      y[static_cast<std::size_t>(o * inner + i)] = best;
    }
  return out;
}

OpSchema arg_schema(const std::string& name, bool is_max, const std::string& summary) {
  auto infer = [](const Node& node, std::span<const TensorType> in) -> std::vector<TensorType> {
    return {{DType::i64, arg_plan(node, in[0]).output_shape}};
  };
  auto reference = [is_max](const Node& node, std::span<const Tensor> in) -> std::vector<Tensor> {
    const ArgPlan plan = arg_plan(node, {in[0].dtype(), in[0].shape()});
    Tensor out;
    visit_arithmetic(in[0].dtype(), [&]<class T>(T) { out = arg_extremum<T>(in[0], plan, is_max); });
    return {out};
  };
  return make_schema(name, 1, 1, std::move(infer), std::move(reference), summary);
}

// ---- Hardmax -----------------------------------------------------------------------

// 1 where an element is the first maximum of its line along `axis`, else 0
// (ONNX opset 13: any axis; the importer rewrites older opsets' flattening).
OpSchema hardmax_schema() {
  auto infer = [](const Node& node, std::span<const TensorType> in) -> std::vector<TensorType> {
    check_known_attributes(node, {"axis"});
    KILN_CHECK(in[0].dtype == DType::f32, ErrorKind::Unsupported, describe("input", in[0]) + ": Hardmax takes f32 only");
    KILN_CHECK(!in[0].shape.empty(), ErrorKind::ShapeMismatch, describe("input", in[0]) + " is a scalar; Hardmax needs an axis");
    normalize_axis(node.attrs.get_int("axis", -1), static_cast<std::int64_t>(in[0].shape.size()), "axis");
    return {in[0]};
  };
  auto reference = [](const Node& node, std::span<const Tensor> in) -> std::vector<Tensor> {
    const Shape& shape = in[0].shape();
    const auto axis = static_cast<std::size_t>(
        normalize_axis(node.attrs.get_int("axis", -1), static_cast<std::int64_t>(shape.size()), "axis"));
    const std::int64_t extent = shape[axis];
    const std::int64_t inner = num_elements(Shape(shape.begin() + static_cast<std::ptrdiff_t>(axis) + 1, shape.end()));
    const std::int64_t outer = num_elements(Shape(shape.begin(), shape.begin() + static_cast<std::ptrdiff_t>(axis)));
    auto x = in[0].values<float>();
    Tensor out(DType::f32, shape);  // zero-filled
    auto y = out.values<float>();
    for (std::int64_t o = 0; o < outer && extent > 0; ++o)
      for (std::int64_t i = 0; i < inner; ++i) {
        auto at = [&](std::int64_t e) { return static_cast<std::size_t>((o * extent + e) * inner + i); };
        std::int64_t best = 0;
        for (std::int64_t e = 1; e < extent; ++e)
          if (replaces_best<float>(x[at(e)], x[at(best)], true, false)) best = e;
        y[at(best)] = 1.0f;
      }
    return {out};
  };
  return make_schema("Hardmax", 1, 1, std::move(infer), std::move(reference),
                     "1 at the first maximum along `axis` (default -1), 0 elsewhere");
}

}  // namespace

void register_reduce_ops(OpTable& table) {
  add_op(table, reduce_schema("ReduceMean", Reduction::mean, "mean over `axes` (all when absent)"));
  add_op(table, reduce_schema("ReduceSum", Reduction::sum, "sum over `axes` (all when absent)"));
  add_op(table, reduce_schema("ReduceMax", Reduction::max, "maximum over `axes` (all when absent)"));
  add_op(table, reduce_schema("ReduceMin", Reduction::min, "minimum over `axes` (all when absent)"));
  add_op(table, reduce_schema("ReduceProd", Reduction::prod, "product over `axes` (all when absent)"));
  add_op(table, reduce_schema("ReduceL1", Reduction::l1, "sum of |x| over `axes` (all when absent)"));
  add_op(table, reduce_schema("ReduceL2", Reduction::l2, "sqrt of the sum of x^2 over `axes` (all when absent)"));
  add_op(table, reduce_schema("ReduceSumSquare", Reduction::sum_square, "sum of x^2 over `axes` (all when absent)"));
  add_op(table, reduce_schema("ReduceLogSum", Reduction::log_sum, "log of the sum over `axes` (all when absent)"));
  add_op(table, reduce_schema("ReduceLogSumExp", Reduction::log_sum_exp,
                              "log of the sum of e^x over `axes` (all when absent)"));
  add_op(table, cumsum_schema());
  add_op(table, hardmax_schema());
  add_op(table, arg_schema("ArgMax", true,
                           "i64 position of the maximum along `axis` (first, or last with `select_last_index`)"));
  add_op(table, arg_schema("ArgMin", false,
                           "i64 position of the minimum along `axis` (first, or last with `select_last_index`)"));
}

}  // namespace kiln::graph::ops

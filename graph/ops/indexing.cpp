// Ops whose output elements are chosen by position: GatherElements and
// ScatterElements (by an index tensor along one axis), GatherND (by index
// tuples), TensorScatter (rows at a position per batch entry: the
// key/value cache update) and Trilu (by the side of a diagonal). They move raw elements, so
// they accept every dtype (ScatterElements' reductions: f32, i32, i64).
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "graph/broadcast.h"
#include "graph/checked_math.h"
#include "graph/ops/data_plans.h"
#include "graph/ops/ops.h"
#include "src/base/check.h"

namespace kiln::graph::ops {

namespace {

// ---- GatherElements -----------------------------------------------------------------

// The normalised axis of a GatherElements node, after checking that the
// indices fit the data: the same rank, and no larger than the data along
// every other axis (ONNX's reference reads data at the indices' coordinates).
std::size_t gather_elements_axis(const Node& node, const TensorType& data, const TensorType& indices) {
  if (node.op == "ScatterElements") check_known_attributes(node, {"axis", "reduction"});
  else check_known_attributes(node, {"axis"});
  KILN_CHECK(indices.dtype == DType::i64 || indices.dtype == DType::i32, ErrorKind::ShapeMismatch,
             "indices must be i64 or i32, got " + describe("indices", indices));
  KILN_CHECK(!data.shape.empty(), ErrorKind::ShapeMismatch, "cannot gather from a scalar " + describe("data", data));
  KILN_CHECK(indices.shape.size() == data.shape.size(), ErrorKind::ShapeMismatch,
             "indices must have the rank of the data: " + describe("data", data) + ", " + describe("indices", indices));
  const auto axis = static_cast<std::size_t>(
      normalize_axis(node.attrs.get_int("axis", 0), static_cast<std::int64_t>(data.shape.size()), "axis"));
  for (std::size_t d = 0; d < data.shape.size(); ++d)
    KILN_CHECK(d == axis || indices.shape[d] <= data.shape[d], ErrorKind::ShapeMismatch,
               "indices extent " + std::to_string(indices.shape[d]) + " exceeds the data's " +
                   std::to_string(data.shape[d]) + " on axis " + std::to_string(d) + ": " + describe("data", data) +
                   ", " + describe("indices", indices));
  return axis;
}

std::vector<TensorType> infer_gather_elements(const Node& node, std::span<const TensorType> in) {
  gather_elements_axis(node, in[0], in[1]);
  return {{in[0].dtype, in[1].shape}};
}

std::vector<std::int64_t> index_values(const Tensor& indices) {
  if (indices.dtype() == DType::i64) {
    auto v = indices.values<std::int64_t>();
    return {v.begin(), v.end()};
  }
  auto v = indices.values<std::int32_t>();
  return {v.begin(), v.end()};
}

// out[c] = data[c with c[axis] replaced by indices[c]].
std::vector<Tensor> reference_gather_elements(const Node& node, std::span<const Tensor> in) {
  const Tensor& data = in[0];
  const std::size_t axis = gather_elements_axis(node, {data.dtype(), data.shape()}, {in[1].dtype(), in[1].shape()});
  const std::int64_t extent = data.shape()[axis];
  const std::vector<std::int64_t> indices = normalize_gather_indices(index_values(in[1]), extent);
  const Strides data_strides = row_major_strides(data.shape());
  const Strides index_strides = row_major_strides(in[1].shape());
  return {gather_elements(data, in[1].shape(), [&](std::span<const std::int64_t> coords) {
    std::int64_t position = 0;  // of the index in the indices tensor (the output has its shape)
    for (std::size_t d = 0; d < coords.size(); ++d) position += coords[d] * index_strides[d];
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < coords.size(); ++d)
      offset += (d == axis ? indices[static_cast<std::size_t>(position)] : coords[d]) * data_strides[d];
    return offset;
  })};
}

// ---- ScatterElements ----------------------------------------------------------------

enum class ScatterReduction { none, add, mul, max, min };

ScatterReduction scatter_reduction(const Node& node) {
  const std::string r = node.attrs.get_string("reduction", "none");
  if (r == "none") return ScatterReduction::none;
  if (r == "add") return ScatterReduction::add;
  if (r == "mul") return ScatterReduction::mul;
  if (r == "max") return ScatterReduction::max;
  if (r == "min") return ScatterReduction::min;
  throw_error(ErrorKind::InvalidArgument, "attribute 'reduction' is '" + r + "'; expected none, add, mul, max or min");
}

// The axis of a ScatterElements node, after checking data, indices and updates fit.
std::size_t scatter_elements_axis(const Node& node, std::span<const TensorType> in) {
  KILN_CHECK(in[2].dtype == in[0].dtype && in[2].shape == in[1].shape, ErrorKind::ShapeMismatch,
             "updates must have the data's dtype and the indices' shape: " + describe("data", in[0]) + ", " +
                 describe("indices", in[1]) + ", " + describe("updates", in[2]));
  KILN_CHECK(scatter_reduction(node) == ScatterReduction::none || in[0].dtype == DType::f32 ||
                 in[0].dtype == DType::i32 || in[0].dtype == DType::i64,
             ErrorKind::Unsupported, "a scatter reduction needs f32, i32 or i64 data, got " + describe("data", in[0]));
  return gather_elements_axis(node, in[0], in[1]);
}

std::vector<TensorType> infer_scatter_elements(const Node& node, std::span<const TensorType> in) {
  scatter_elements_axis(node, in);
  return {in[0]};
}

// Integer sums and products wrap around (as numpy's do) instead of overflowing.
template <class T>
T wrapping(T a, T b, bool multiply) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(multiply ? static_cast<U>(a) * static_cast<U>(b) : static_cast<U>(a) + static_cast<U>(b));
  } else {
    return multiply ? a * b : a + b;
  }
}

template <class T>
T scatter_combine(ScatterReduction r, T old_value, T update) {
  switch (r) {
    case ScatterReduction::add: return wrapping(old_value, update, false);
    case ScatterReduction::mul: return wrapping(old_value, update, true);
    case ScatterReduction::max: return std::max(old_value, update);
    case ScatterReduction::min: return std::min(old_value, update);
    case ScatterReduction::none: break;
  }
  return update;
}

// A copy of data; then, in the indices' order, data[c with c[axis] =
// indices[c]] takes (or is combined with) updates[c].
std::vector<Tensor> reference_scatter_elements(const Node& node, std::span<const Tensor> in) {
  const std::size_t axis = scatter_elements_axis(node, types_of(in));
  const ScatterReduction reduction = scatter_reduction(node);
  const Tensor& data = in[0];
  const std::vector<std::int64_t> indices = normalize_gather_indices(index_values(in[1]), data.shape()[axis]);
  Tensor out = data.clone();
  const Strides data_strides = row_major_strides(data.shape());
  const Shape& index_shape = in[1].shape();
  const std::size_t size = dtype_size(data.dtype());
  std::vector<std::int64_t> coords(index_shape.size(), 0);
  for (std::size_t i = 0; i < indices.size(); ++i) {
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < coords.size(); ++d) offset += (d == axis ? indices[i] : coords[d]) * data_strides[d];
    std::byte* target = out.bytes().data() + static_cast<std::size_t>(offset) * size;
    const std::byte* update = in[2].bytes().data() + i * size;
    if (reduction == ScatterReduction::none) {
      std::memcpy(target, update, size);
    } else {
      auto apply = [&]<class T>(T) {
        T a, b;
        std::memcpy(&a, target, sizeof a);
        std::memcpy(&b, update, sizeof b);
        const T c = scatter_combine<T>(reduction, a, b);
        std::memcpy(target, &c, sizeof c);
      };
      if (data.dtype() == DType::f32) apply(float{});
      else if (data.dtype() == DType::i32) apply(std::int32_t{});
      else apply(std::int64_t{});
    }
    for (std::size_t d = coords.size(); d-- > 0;) {
      if (++coords[d] < index_shape[d]) break;
      coords[d] = 0;
    }
  }
  return {out};
}

// ---- GatherND ---------------------------------------------------------------------

// The element offset an index tuple names along the axes from `first_axis`
// (GatherND, ScatterND): each index checked against its axis, negative ones
// counted from the end.
std::int64_t tuple_offset(std::span<const std::int64_t> tuple, std::size_t first_axis, const Shape& shape,
                          const Strides& strides) {
  std::int64_t offset = 0;
  for (std::size_t j = 0; j < tuple.size(); ++j) {
    const std::size_t d = first_axis + j;
    std::int64_t index = tuple[j];
    const std::int64_t extent = shape[d];
    KILN_CHECK(index >= -extent && index < extent, ErrorKind::InvalidArgument,
               "index " + std::to_string(index) + " is out of range for axis " + std::to_string(d) + " of extent " +
                   std::to_string(extent));
    if (index < 0) index += extent;
    offset += index * strides[d];
  }
  return offset;
}

// GatherND: each index tuple (the indices' last axis, k long) picks a slice
// of the data after `batch_dims` shared leading axes.
struct GatherNdPlan {
  std::int64_t batch_dims = 0, k = 0;
  std::int64_t batches = 1, tuples = 1, slice = 1;  // tuples per batch, elements per slice
  Shape output_shape;
};

GatherNdPlan gather_nd_plan(const Node& node, const TensorType& data, const TensorType& indices) {
  check_known_attributes(node, {"batch_dims"});
  KILN_CHECK(indices.dtype == DType::i64, ErrorKind::ShapeMismatch, "indices must be i64, got " + describe("indices", indices));
  GatherNdPlan p;
  p.batch_dims = node.attrs.get_int("batch_dims", 0);
  const auto r = static_cast<std::int64_t>(data.shape.size());
  const auto q = static_cast<std::int64_t>(indices.shape.size());
  KILN_CHECK(q >= 1 && r >= 1 && p.batch_dims >= 0 && p.batch_dims < std::min(q, r), ErrorKind::ShapeMismatch,
             "batch_dims " + std::to_string(p.batch_dims) + " does not fit " + describe("data", data) + " and " +
                 describe("indices", indices));
  p.k = indices.shape.back();
  KILN_CHECK(p.k >= 1 && p.k <= r - p.batch_dims, ErrorKind::ShapeMismatch,
             "index tuples of " + std::to_string(p.k) + " do not fit " + describe("data", data) + " after " +
                 std::to_string(p.batch_dims) + " batch axes");
  for (std::int64_t d = 0; d < p.batch_dims; ++d) {
    KILN_CHECK(indices.shape[static_cast<std::size_t>(d)] == data.shape[static_cast<std::size_t>(d)],
               ErrorKind::ShapeMismatch, "batch axis " + std::to_string(d) + " differs: " + describe("data", data) +
                                             ", " + describe("indices", indices));
    p.batches *= data.shape[static_cast<std::size_t>(d)];
    p.output_shape.push_back(data.shape[static_cast<std::size_t>(d)]);
  }
  for (std::int64_t d = p.batch_dims; d < q - 1; ++d) {
    p.tuples *= indices.shape[static_cast<std::size_t>(d)];
    p.output_shape.push_back(indices.shape[static_cast<std::size_t>(d)]);
  }
  for (std::int64_t d = p.batch_dims + p.k; d < r; ++d) {
    p.slice *= data.shape[static_cast<std::size_t>(d)];
    p.output_shape.push_back(data.shape[static_cast<std::size_t>(d)]);
  }
  return p;
}

std::vector<TensorType> infer_gather_nd(const Node& node, std::span<const TensorType> in) {
  return {{in[0].dtype, gather_nd_plan(node, in[0], in[1]).output_shape}};
}

std::vector<Tensor> reference_gather_nd(const Node& node, std::span<const Tensor> in) {
  const Tensor& data = in[0];
  const GatherNdPlan p = gather_nd_plan(node, {data.dtype(), data.shape()}, {in[1].dtype(), in[1].shape()});
  const Strides strides = row_major_strides(data.shape());
  const std::int64_t batch_stride = p.batch_dims > 0 ? strides[static_cast<std::size_t>(p.batch_dims - 1)] : 0;
  auto indices = in[1].values<std::int64_t>();
  Tensor out(data.dtype(), p.output_shape);
  const std::size_t size = dtype_size(data.dtype());
  const auto slice_bytes = static_cast<std::size_t>(p.slice) * size;
  for (std::int64_t b = 0; b < p.batches; ++b)
    for (std::int64_t t = 0; t < p.tuples; ++t) {
      const std::int64_t offset =
          b * batch_stride + tuple_offset(indices.subspan(static_cast<std::size_t>((b * p.tuples + t) * p.k),
                                                          static_cast<std::size_t>(p.k)),
                                          static_cast<std::size_t>(p.batch_dims), data.shape(), strides);
      std::memcpy(out.bytes().data() + static_cast<std::size_t>(b * p.tuples + t) * slice_bytes,
                  data.bytes().data() + static_cast<std::size_t>(offset) * size, slice_bytes);
    }
  return {out};
}

// ---- ScatterND --------------------------------------------------------------------

// ScatterND: a copy of data where each index tuple (the indices' last axis,
// k long) names a slice of data[k:] that takes (or is combined with) the
// matching slice of updates, in the indices' order.
struct ScatterNdPlan {
  std::int64_t k = 0, tuples = 1, slice = 1;
};

ScatterNdPlan scatter_nd_plan(const Node& node, std::span<const TensorType> in) {
  check_known_attributes(node, {"reduction"});
  const TensorType& data = in[0];
  const TensorType& indices = in[1];
  const TensorType& updates = in[2];
  KILN_CHECK(indices.dtype == DType::i64, ErrorKind::ShapeMismatch, "indices must be i64, got " + describe("indices", indices));
  KILN_CHECK(updates.dtype == data.dtype, ErrorKind::ShapeMismatch,
             "updates must have the data's dtype: " + describe("data", data) + ", " + describe("updates", updates));
  KILN_CHECK(scatter_reduction(node) == ScatterReduction::none || data.dtype == DType::f32 ||
                 data.dtype == DType::i32 || data.dtype == DType::i64,
             ErrorKind::Unsupported, "a scatter reduction needs f32, i32 or i64 data, got " + describe("data", data));
  const auto r = static_cast<std::int64_t>(data.shape.size());
  KILN_CHECK(!indices.shape.empty() && indices.shape.back() >= 1 && indices.shape.back() <= r, ErrorKind::ShapeMismatch,
             "the indices' last axis must hold 1 to " + std::to_string(r) + " coordinates: " + describe("data", data) +
                 ", " + describe("indices", indices));
  ScatterNdPlan p;
  p.k = indices.shape.back();
  Shape expected(indices.shape.begin(), indices.shape.end() - 1);
  for (std::size_t d = 0; d + 1 < indices.shape.size(); ++d) p.tuples *= indices.shape[d];
  for (auto d = static_cast<std::size_t>(p.k); d < data.shape.size(); ++d) {
    p.slice *= data.shape[d];
    expected.push_back(data.shape[d]);
  }
  KILN_CHECK(updates.shape == expected, ErrorKind::ShapeMismatch,
             "updates must be " + shape_str(expected) + " (the indices' tuples, then the slice each names): " +
                 describe("data", data) + ", " + describe("indices", indices) + ", " + describe("updates", updates));
  return p;
}

std::vector<TensorType> infer_scatter_nd(const Node& node, std::span<const TensorType> in) {
  scatter_nd_plan(node, in);
  return {in[0]};
}

std::vector<Tensor> reference_scatter_nd(const Node& node, std::span<const Tensor> in) {
  const ScatterNdPlan p = scatter_nd_plan(node, types_of(in));
  const ScatterReduction reduction = scatter_reduction(node);
  const Tensor& data = in[0];
  const Strides strides = row_major_strides(data.shape());
  auto indices = in[1].values<std::int64_t>();
  Tensor out = data.clone();
  const std::size_t size = dtype_size(data.dtype());
  for (std::int64_t t = 0; t < p.tuples; ++t) {
    const std::int64_t offset = tuple_offset(
        indices.subspan(static_cast<std::size_t>(t * p.k), static_cast<std::size_t>(p.k)), 0, data.shape(), strides);
    std::byte* target = out.bytes().data() + static_cast<std::size_t>(offset) * size;
    const std::byte* update = in[2].bytes().data() + static_cast<std::size_t>(t * p.slice) * size;
    if (reduction == ScatterReduction::none) {
      std::memcpy(target, update, static_cast<std::size_t>(p.slice) * size);
      continue;
    }
    for (std::int64_t e = 0; e < p.slice; ++e) {
      auto apply = [&]<class T>(T) {
        T a, b;
        std::memcpy(&a, target + static_cast<std::size_t>(e) * size, sizeof a);
        std::memcpy(&b, update + static_cast<std::size_t>(e) * size, sizeof b);
        const T c = scatter_combine<T>(reduction, a, b);
        std::memcpy(target + static_cast<std::size_t>(e) * size, &c, sizeof c);
      };
      if (data.dtype() == DType::f32) apply(float{});
      else if (data.dtype() == DType::i32) apply(std::int32_t{});
      else apply(std::int64_t{});
    }
  }
  return {out};
}

// ---- TensorScatter ----------------------------------------------------------------

std::vector<TensorType> infer_tensor_scatter(const Node& node, std::span<const TensorType> in) {
  tensor_scatter_plan(node, in);
  return {in[0]};
}

// Each batch entry's update rows copied to their cache positions; a linear
// write past the cache's end is an error, as is a negative write index.
std::vector<Tensor> reference_tensor_scatter(const Node& node, std::span<const Tensor> in) {
  const TensorScatterPlan p = tensor_scatter_plan(node, types_of(in));
  Tensor out = in[0].clone();
  const std::size_t row_bytes = static_cast<std::size_t>(p.inner) * dtype_size(in[0].dtype());
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const std::int64_t write = p.has_indices ? in[2].values<std::int64_t>()[static_cast<std::size_t>(b)] : 0;
    KILN_CHECK(write >= 0 && (p.circular || write <= p.cache - p.length), ErrorKind::InvalidArgument,
               "node '" + node.name + "' (TensorScatter): write index " + std::to_string(write) + " of batch entry " +
                   std::to_string(b) + " puts " + std::to_string(p.length) + " rows outside a cache of " +
                   std::to_string(p.cache) + (p.circular ? " (negative)" : " (mode linear)"));
    for (std::int64_t m = 0; m < p.middle; ++m)
      for (std::int64_t i = 0; i < p.length; ++i) {
        const std::int64_t slot = p.circular ? (write % p.cache + i) % p.cache : write + i;
        const std::int64_t from = (b * p.middle + m) * p.length + i, to = (b * p.middle + m) * p.cache + slot;
        std::memcpy(out.bytes().data() + static_cast<std::size_t>(to) * row_bytes,
                    in[1].bytes().data() + static_cast<std::size_t>(from) * row_bytes, row_bytes);
      }
  }
  return {out};
}

// ---- OneHot -----------------------------------------------------------------------

// OneHot: inputs (indices, values [off, on]); `depth` (ONNX's constant
// input, folded by the importer) and `axis`, where the new axis goes.
struct OneHotPlan {
  std::int64_t depth = 0;
  std::size_t axis = 0;
  Shape output_shape;
};

OneHotPlan one_hot_plan(const Node& node, const TensorType& indices, const TensorType& values) {
  check_known_attributes(node, {"depth", "axis"});
  KILN_CHECK(indices.dtype == DType::f32 || indices.dtype == DType::i32 || indices.dtype == DType::i64 ||
                 indices.dtype == DType::u8,
             ErrorKind::Unsupported, "indices must be numeric, got " + describe("indices", indices));
  KILN_CHECK(num_elements(values.shape) == 2 && values.shape.size() == 1, ErrorKind::ShapeMismatch,
             "values must hold [off, on], got " + describe("values", values));
  KILN_CHECK(node.attrs.has("depth"), ErrorKind::InvalidArgument,
             "attribute 'depth' is required (the importer folds ONNX's constant depth input into it)");
  OneHotPlan p;
  p.depth = node.attrs.get_int("depth", 0);
  KILN_CHECK(p.depth > 0, ErrorKind::InvalidArgument, "depth " + std::to_string(p.depth) + " must be positive");
  const auto rank = static_cast<std::int64_t>(indices.shape.size());
  p.axis = static_cast<std::size_t>(normalize_axis(node.attrs.get_int("axis", -1), rank + 1, "axis"));
  p.output_shape = indices.shape;
  p.output_shape.insert(p.output_shape.begin() + static_cast<std::ptrdiff_t>(p.axis), p.depth);
  KILN_CHECK(checked_product(p.output_shape).has_value(), ErrorKind::InvalidArgument,
             "the one-hot output " + shape_str(p.output_shape) + " overflows 64-bit sizes");
  return p;
}

std::vector<TensorType> infer_one_hot(const Node& node, std::span<const TensorType> in) {
  return {{in[1].dtype, one_hot_plan(node, in[0], in[1]).output_shape}};
}

// The position an index names in [0, depth), or -1 (every entry off) for
// one outside [-depth, depth); float indices are truncated, as ONNX's are.
std::int64_t one_hot_position(double index, std::int64_t depth) {
  if (!(index > -static_cast<double>(depth) - 1.0 && index < static_cast<double>(depth))) return -1;  // NaN too
  auto i = static_cast<std::int64_t>(index);  // in range: no overflow
  if (i < 0) i += depth;
  return i >= 0 && i < depth ? i : -1;
}

std::vector<Tensor> reference_one_hot(const Node& node, std::span<const Tensor> in) {
  const Tensor& indices = in[0];
  const OneHotPlan p = one_hot_plan(node, {indices.dtype(), indices.shape()}, {in[1].dtype(), in[1].shape()});
  const std::size_t size = dtype_size(in[1].dtype());
  const std::byte* off = in[1].bytes().data();
  const std::byte* on = off + size;
  std::int64_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < indices.shape().size(); ++d) (d < p.axis ? outer : inner) *= indices.shape()[d];
  Tensor out(in[1].dtype(), p.output_shape);
  std::byte* y = out.bytes().data();
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      const auto at = static_cast<std::size_t>(o * inner + i);
      double index = 0;
      switch (indices.dtype()) {
        case DType::f32: index = indices.values<float>()[at]; break;
        case DType::i32: index = indices.values<std::int32_t>()[at]; break;
        case DType::i64: index = static_cast<double>(indices.values<std::int64_t>()[at]); break;
        default: index = indices.values<std::uint8_t>()[at]; break;
      }
      const std::int64_t hot = one_hot_position(index, p.depth);
      for (std::int64_t k = 0; k < p.depth; ++k)
        std::memcpy(y + static_cast<std::size_t>((o * p.depth + k) * inner + i) * size, k == hot ? on : off, size);
    }
  return {out};
}

// ---- Trilu --------------------------------------------------------------------------

// Trilu keeps the elements on and above (upper=1) or on and below (upper=0)
// the k-th diagonal of each matrix in the last two axes and zeroes the rest.
// k comes from the `k` attribute (ONNX's constant input, folded by the
// importer) or from a runtime i64 input.
void check_trilu(const Node& node, std::span<const TensorType> in) {
  check_known_attributes(node, {"upper", "k"});
  get_flag(node, "upper", true);
  KILN_CHECK(in[0].shape.size() >= 2, ErrorKind::ShapeMismatch,
             "Trilu needs matrices (rank >= 2), got " + describe("input", in[0]));
  if (in.size() < 2 || !has_input(node, 1)) return;
  KILN_CHECK(!node.attrs.has("k"), ErrorKind::InvalidArgument, "attribute 'k' and a k input are both given");
  KILN_CHECK(in[1].dtype == DType::i64 && num_elements(in[1].shape) == 1, ErrorKind::ShapeMismatch,
             "k must be one i64 value, got " + describe("k", in[1]));
}

std::vector<TensorType> infer_trilu(const Node& node, std::span<const TensorType> in) {
  check_trilu(node, in);
  return {in[0]};
}

std::vector<Tensor> reference_trilu(const Node& node, std::span<const Tensor> in) {
  check_trilu(node, types_of(in));
  const Tensor& x = in[0];
  const bool upper = get_flag(node, "upper", true);
  const bool k_input = in.size() > 1 && in[1].numel() == 1;  // an absent input has shape [0]
  const std::int64_t k = k_input ? in[1].values<std::int64_t>()[0] : node.attrs.get_int("k", 0);
  const Shape& shape = x.shape();
  const std::int64_t rows = shape[shape.size() - 2];
  const std::int64_t columns = shape.back();
  const std::size_t size = dtype_size(x.dtype());
  Tensor y = copy_tensor(x, shape);
  std::byte* out = y.bytes().data();
  for (std::int64_t i = 0; i < y.numel(); ++i) {
    const std::int64_t column = i % columns;
    const std::int64_t row = i / columns % rows;
    // The k-th diagonal holds column - row == k (k may lie far outside the matrix).
    const bool keep = upper ? column - row >= k : column - row <= k;
    if (!keep) std::memset(out + i * static_cast<std::int64_t>(size), 0, size);
  }
  return {y};
}

// ---- ReverseSequence ------------------------------------------------------------------

// ReverseSequence reverses, for each batch entry b along `batch_axis`, the
// first sequence_lens[b] elements along `time_axis` (0 and 1, either way
// round); the rest are copied. TensorFlow's converters write a backward
// recurrent layer with it.
struct ReverseAxes {
  std::size_t batch, time;
};

ReverseAxes check_reverse_sequence(const Node& node, std::span<const TensorType> in) {
  check_known_attributes(node, {"batch_axis", "time_axis"});
  const std::int64_t batch = node.attrs.get_int("batch_axis", 1), time = node.attrs.get_int("time_axis", 0);
  KILN_CHECK((batch == 0 && time == 1) || (batch == 1 && time == 0), ErrorKind::InvalidArgument,
             "batch_axis and time_axis must be 0 and 1 (either way round), got " + std::to_string(batch) + " and " +
                 std::to_string(time));
  KILN_CHECK(in[0].shape.size() >= 2, ErrorKind::ShapeMismatch,
             "the input needs a batch and a time axis, got " + describe("input", in[0]));
  KILN_CHECK((in[1].dtype == DType::i64 || in[1].dtype == DType::i32) && in[1].shape.size() == 1 &&
                 in[1].shape[0] == in[0].shape[static_cast<std::size_t>(batch)],
             ErrorKind::ShapeMismatch,
             "sequence_lens must be one i64 per batch entry (" + std::to_string(in[0].shape[static_cast<std::size_t>(batch)]) +
                 "), got " + describe("sequence_lens", in[1]));
  return {static_cast<std::size_t>(batch), static_cast<std::size_t>(time)};
}

std::vector<TensorType> infer_reverse_sequence(const Node& node, std::span<const TensorType> in) {
  check_reverse_sequence(node, in);
  return {in[0]};
}

std::vector<Tensor> reference_reverse_sequence(const Node& node, std::span<const Tensor> in) {
  const ReverseAxes axes = check_reverse_sequence(node, types_of(in));
  const Tensor& x = in[0];
  const Shape& shape = x.shape();
  const Strides strides = row_major_strides(shape);
  const std::int64_t steps = shape[axes.time];
  const std::size_t size = dtype_size(x.dtype());
  Tensor y(x.dtype(), shape);
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const std::int64_t b = i / strides[axes.batch] % shape[axes.batch];
    const std::int64_t t = i / strides[axes.time] % steps;
    const std::int64_t length = in[1].dtype() == DType::i64 ? in[1].values<std::int64_t>()[b]
                                                            : in[1].values<std::int32_t>()[b];
    KILN_CHECK(length >= 0 && length <= steps, ErrorKind::InvalidArgument,
               "sequence_lens[" + std::to_string(b) + "] = " + std::to_string(length) + " is outside [0, " +
                   std::to_string(steps) + "]");
    const std::int64_t source = t < length ? i + (length - 1 - 2 * t) * strides[axes.time] : i;
    std::memcpy(y.bytes().data() + i * static_cast<std::int64_t>(size),
                x.bytes().data() + source * static_cast<std::int64_t>(size), size);
  }
  return {y};
}

}  // namespace

TensorScatterPlan tensor_scatter_plan(const Node& node, std::span<const TensorType> in) {
  check_known_attributes(node, {"axis", "mode"});
  const TensorType& past = in[0];
  const TensorType& update = in[1];
  const std::string mode = node.attrs.get_string("mode", "linear");
  KILN_CHECK(mode == "linear" || mode == "circular", ErrorKind::InvalidArgument,
             "mode must be \"linear\" or \"circular\", got \"" + mode + "\"");
  const auto rank = static_cast<std::int64_t>(past.shape.size());
  KILN_CHECK(rank >= 2, ErrorKind::ShapeMismatch, "the cache needs a batch axis and a sequence axis: " + describe("past", past));
  const auto axis = static_cast<std::size_t>(normalize_axis(node.attrs.get_int("axis", -2), rank, "axis"));
  KILN_CHECK(axis != 0, ErrorKind::InvalidArgument, "axis must not be the batch axis 0");
  require_same_dtype("past", past, "update", update);
  bool fits = update.shape.size() == past.shape.size() && update.shape[axis] <= past.shape[axis];
  for (std::size_t d = 0; fits && d < past.shape.size(); ++d) fits = d == axis || update.shape[d] == past.shape[d];
  KILN_CHECK(fits, ErrorKind::ShapeMismatch,
             "update must have the cache's shape but for at most as many rows on axis " + std::to_string(axis) + ": " +
                 describe("past", past) + ", " + describe("update", update));
  TensorScatterPlan p;
  p.circular = mode == "circular";
  p.has_indices = has_input(node, 2);
  if (p.has_indices)
    KILN_CHECK(in[2].dtype == DType::i64 && in[2].shape == Shape{past.shape[0]}, ErrorKind::ShapeMismatch,
               "write_indices must be i64 [" + std::to_string(past.shape[0]) + "], one per batch entry: " +
                   describe("write_indices", in[2]));
  p.batch = past.shape[0];
  for (std::size_t d = 1; d < axis; ++d) p.middle *= past.shape[d];
  p.cache = past.shape[axis];
  p.length = update.shape[axis];
  for (std::size_t d = axis + 1; d < past.shape.size(); ++d) p.inner *= past.shape[d];
  KILN_CHECK(p.cache > 0 || p.length == 0, ErrorKind::ShapeMismatch, "a cache of no rows: " + describe("past", past));
  return p;
}

void register_indexing_ops(OpTable& table) {
  add_op(table, make_schema("ReverseSequence", 2, 2, infer_reverse_sequence, reference_reverse_sequence,
                            "the first sequence_lens[b] steps along `time_axis` reversed, per batch entry b"));
  add_op(table, make_schema("GatherElements", 2, 2, infer_gather_elements, reference_gather_elements,
                            "data at the indices' coordinates, `axis` replaced by the index (output: indices' shape)"));
  add_op(table, make_schema("ScatterElements", 3, 3, infer_scatter_elements, reference_scatter_elements,
                            "data with updates written (or combined by `reduction`) at the indices along `axis`"));
  add_op(table, make_schema("GatherND", 2, 2, infer_gather_nd, reference_gather_nd,
                            "the data slices the indices' last axis names as tuples, after `batch_dims` shared axes"));
  add_op(table, make_schema("ScatterND", 3, 3, infer_scatter_nd, reference_scatter_nd,
                            "data with the slices the indices' tuples name replaced (or combined by `reduction`) by updates"));
  add_op(table, make_schema("TensorScatter", 2, 3, infer_tensor_scatter, reference_tensor_scatter,
                            "past with update's rows written along `axis` at write_indices[b] + i (mod the cache "
                            "length in `mode` circular): the key/value cache update, in place where nothing else reads past"));
  add_op(table, make_schema("OneHot", 2, 2, infer_one_hot, reference_one_hot,
                            "values[1] where an index names the position along the new `axis` of `depth`, else values[0]"));
  add_op(table, make_schema("Trilu", 1, 2, infer_trilu, reference_trilu,
                            "keep the upper (`upper`=1) or lower triangle from diagonal `k` of the last two axes"));
}

}  // namespace kiln::graph::ops

// The data-movement ops: Slice, Split, Gather, Squeeze, Unsqueeze, Expand,
// Tile, Shape, ConstantOfShape. Arguments that ONNX passes as tensors are
// attributes here (the importer folds them). The references move raw
// elements, so they accept every dtype.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>

#include "graph/broadcast.h"
#include "graph/checked_math.h"
#include "graph/ops/data_plans.h"
#include "graph/ops/ops.h"
#include "src/base/check.h"

#include <kiln/float16.h>

namespace kiln::graph::ops {

namespace {

// Axes given as an attribute, normalised against `rank`; duplicates are an error.
std::vector<std::int64_t> normalized_axes(const std::vector<std::int64_t>& axes, std::int64_t rank,
                                          const std::string& attribute) {
  std::vector<std::int64_t> out;
  for (std::int64_t axis : axes) {
    const std::int64_t a = normalize_axis(axis, rank, attribute);
    KILN_CHECK(std::find(out.begin(), out.end(), a) == out.end(), ErrorKind::InvalidArgument,
               "attribute '" + attribute + "' " + ints_str(axes) + " names axis " + std::to_string(a) + " twice");
    out.push_back(a);
  }
  return out;
}

}  // namespace

// ---- plans (graph/ops/data_plans.h) --------------------------------------------------

void check_element_count(const Shape& shape, const std::string& what) {
  std::int64_t count = 1;
  for (std::int64_t d : shape) {
    if (d == 0) return;
    KILN_CHECK(d > 0 && count <= kMaxDataOpElements / d, ErrorKind::InvalidArgument,
               what + " " + shape_str(shape) + " has more than " + std::to_string(kMaxDataOpElements) +
                   " elements, the most a data op may create");
    count *= d;
  }
}

DType dtype_from_onnx(std::int64_t onnx_type) {
  switch (onnx_type) {
    case 1: return DType::f32;
    case 2: return DType::u8;
    case 6: return DType::i32;
    case 7: return DType::i64;
    case 9: return DType::boolean;
    case 10: return DType::f16;
    case 16: return DType::bf16;
    default:
      throw_error(ErrorKind::Unsupported, "ONNX data type " + std::to_string(onnx_type) +
                                              " is not supported (kiln has float 1, uint8 2, int32 6, int64 7, "
                                              "bool 9, float16 10, bfloat16 16)");
  }
}

namespace {

template <class T>
std::vector<std::byte> bytes_of(T value) {
  std::vector<std::byte> out(sizeof(T));
  std::memcpy(out.data(), &value, sizeof(T));
  return out;
}

}  // namespace

std::vector<std::byte> encode_element(DType dtype, double value) {
  switch (dtype) {
    case DType::f32: return bytes_of(static_cast<float>(value));
    case DType::f16: return bytes_of(f16_bits(static_cast<float>(value)));
    case DType::bf16: return bytes_of(bf16_bits(static_cast<float>(value)));
    case DType::i32: return bytes_of(static_cast<std::int32_t>(value));
    case DType::i64: return bytes_of(static_cast<std::int64_t>(value));
    case DType::u8: return bytes_of(static_cast<std::uint8_t>(value));
    case DType::boolean: return bytes_of(static_cast<std::uint8_t>(value != 0.0 ? 1 : 0));
  }
  KILN_ASSERT(false);
}

Tensor gather_elements(const Tensor& x, const Shape& out_shape,
                       const std::function<std::int64_t(std::span<const std::int64_t>)>& source) {
  Tensor y(x.dtype(), out_shape);
  const std::size_t size = dtype_size(x.dtype());
  const std::byte* src = x.bytes().data();
  std::byte* dst = y.bytes().data();
  std::vector<std::int64_t> coords(out_shape.size(), 0);
  for (std::int64_t i = 0; i < y.numel(); ++i) {
    const std::int64_t offset = source(coords);
    KILN_ASSERT(offset >= 0 && offset < x.numel());
    std::memcpy(dst + i * size, src + offset * size, size);
    // Advance the coordinates in row-major order.
    for (std::size_t d = coords.size(); d-- > 0;) {
      if (++coords[d] < out_shape[d]) break;
      coords[d] = 0;
    }
  }
  return y;
}

std::int64_t SlicePlan::source_offset(std::span<const std::int64_t> coords, const Strides& strides) const {
  std::int64_t offset = 0;
  for (std::size_t d = 0; d < coords.size(); ++d) offset += (starts[d] + coords[d] * steps[d]) * strides[d];
  return offset;
}

SlicePlan slice_plan(const Node& node, const Shape& input) {
  check_known_attributes(node, {"starts", "ends", "axes", "steps"});
  KILN_CHECK(node.attrs.has("starts") && node.attrs.has("ends"), ErrorKind::InvalidArgument,
             "attributes 'starts' and 'ends' are required");
  const auto rank = static_cast<std::int64_t>(input.size());
  const std::vector<std::int64_t> starts = node.attrs.get_ints("starts", {});
  const std::vector<std::int64_t> ends = node.attrs.get_ints("ends", {});
  const std::size_t n = starts.size();
  std::vector<std::int64_t> default_axes(n);
  for (std::size_t i = 0; i < n; ++i) default_axes[i] = static_cast<std::int64_t>(i);
  const std::vector<std::int64_t> axes = normalized_axes(get_ints_of_length(node, "axes", default_axes, n), rank, "axes");
  const std::vector<std::int64_t> steps = get_ints_of_length(node, "steps", std::vector<std::int64_t>(n, 1), n);
  KILN_CHECK(ends.size() == n, ErrorKind::InvalidArgument,
             "attributes 'starts' " + ints_str(starts) + " and 'ends' " + ints_str(ends) + " differ in length");

  SlicePlan plan{std::vector<std::int64_t>(input.size(), 0), std::vector<std::int64_t>(input.size(), 1), input};
  for (std::size_t i = 0; i < n; ++i) {
    const auto a = static_cast<std::size_t>(axes[i]);
    const std::int64_t extent = input[a];
    const std::int64_t step = steps[i];
    KILN_CHECK(step != 0, ErrorKind::InvalidArgument, "attribute 'steps' " + ints_str(steps) + " contains 0");
    // ONNX: negative positions count from the end, then clamp; INT64_MIN/MAX
    // sentinels stay far from overflow because only the extent is added.
    std::int64_t start = starts[i] < 0 ? starts[i] + extent : starts[i];
    std::int64_t end = ends[i] < 0 ? ends[i] + extent : ends[i];
    // count = ceil(distance / |step|), written so no sentinel can overflow.
    std::int64_t count = 0;
    if (step > 0) {
      start = std::clamp<std::int64_t>(start, 0, extent);
      end = std::clamp<std::int64_t>(end, 0, extent);
      if (end > start) count = (end - start - 1) / step + 1;
    } else if (extent > 0) {
      start = std::clamp<std::int64_t>(start, 0, extent - 1);
      end = std::clamp<std::int64_t>(end, -1, extent - 1);
      if (start > end) count = step == INT64_MIN ? 1 : (start - end - 1) / -step + 1;
    }
    plan.starts[a] = count > 0 ? start : 0;
    plan.steps[a] = step;
    plan.counts[a] = count;
  }
  return plan;
}

SplitPlan split_plan(const Node& node, const Shape& input) {
  check_known_attributes(node, {"axis", "split", "num_outputs"});
  KILN_CHECK(!input.empty(), ErrorKind::ShapeMismatch, "cannot split a scalar");
  SplitPlan plan;
  plan.axis = normalize_axis(node.attrs.get_int("axis", 0), static_cast<std::int64_t>(input.size()), "axis");
  const std::int64_t extent = input[static_cast<std::size_t>(plan.axis)];
  const std::string context = " along axis " + std::to_string(plan.axis) + " of input " + shape_str(input);
  if (node.attrs.has("split")) {
    KILN_CHECK(!node.attrs.has("num_outputs"), ErrorKind::InvalidArgument,
               "attributes 'split' and 'num_outputs' are exclusive");
    plan.sizes = node.attrs.get_ints("split", {});
    KILN_CHECK(!plan.sizes.empty(), ErrorKind::InvalidArgument, "attribute 'split' is empty");
    check_non_negative("split", plan.sizes);
    std::optional<std::int64_t> sum = 0;
    for (std::int64_t s : plan.sizes)
      if (sum) sum = checked_add(*sum, s);
    KILN_CHECK(sum.has_value(), ErrorKind::InvalidArgument,
               "attribute 'split' " + ints_str(plan.sizes) + " sums past int64" + context);
    const std::int64_t total = *sum;
    KILN_CHECK(total == extent, ErrorKind::ShapeMismatch,
               "attribute 'split' " + ints_str(plan.sizes) + " sums to " + std::to_string(total) + ", not " +
                   std::to_string(extent) + context);
    return plan;
  }
  // ONNX opset 18: pieces of ceil(extent / n), the last one smaller.
  KILN_CHECK(node.attrs.has("num_outputs"), ErrorKind::InvalidArgument,
             "attribute 'split' (sizes) or 'num_outputs' is required");
  const std::int64_t pieces = node.attrs.get_int("num_outputs", 1);
  KILN_CHECK(pieces >= 1 && pieces <= std::max<std::int64_t>(extent, 1), ErrorKind::InvalidArgument,
             "attribute 'num_outputs' is " + std::to_string(pieces) + ", expected 1.." +
                 std::to_string(std::max<std::int64_t>(extent, 1)) + context);
  const std::int64_t piece = (extent + pieces - 1) / pieces;
  for (std::int64_t i = 0, left = extent; i < pieces; ++i, left -= piece) plan.sizes.push_back(std::min(piece, left));
  KILN_CHECK(plan.sizes.back() > 0 || extent == 0, ErrorKind::InvalidArgument,
             std::to_string(pieces) + " pieces of " + std::to_string(piece) + " leave the last one empty" + context);
  return plan;
}

std::vector<std::int64_t> normalize_gather_indices(const std::vector<std::int64_t>& raw, std::int64_t extent) {
  std::vector<std::int64_t> out;
  out.reserve(raw.size());
  for (std::int64_t index : raw) {
    KILN_CHECK(index >= -extent && index < extent, ErrorKind::InvalidArgument,
               "index " + std::to_string(index) + " is out of range for an axis of extent " + std::to_string(extent) +
                   " (allowed " + std::to_string(-extent) + ".." + std::to_string(extent - 1) + ")");
    out.push_back(index < 0 ? index + extent : index);
  }
  return out;
}

GatherPlan gather_plan(const Node& node, std::span<const TensorType> inputs) {
  check_known_attributes(node, {"axis", "indices", "indices_shape"});
  const TensorType& data = inputs[0];
  KILN_CHECK(!data.shape.empty(), ErrorKind::ShapeMismatch, "cannot gather from a scalar " + describe("data", data));
  GatherPlan plan;
  const auto rank = static_cast<std::int64_t>(data.shape.size());
  plan.axis = normalize_axis(node.attrs.get_int("axis", 0), rank, "axis");
  const auto a = static_cast<std::size_t>(plan.axis);
  plan.outer = num_elements(Shape(data.shape.begin(), data.shape.begin() + plan.axis));
  plan.extent = data.shape[a];
  plan.inner = num_elements(Shape(data.shape.begin() + plan.axis + 1, data.shape.end()));
  plan.constant_indices = inputs.size() < 2;
  Shape indices_shape;
  if (plan.constant_indices) {
    KILN_CHECK(node.attrs.has("indices") && node.attrs.has("indices_shape"), ErrorKind::InvalidArgument,
               "the one-input form needs attributes 'indices' and 'indices_shape'");
    indices_shape = node.attrs.get_ints("indices_shape", {});
    check_non_negative("indices_shape", indices_shape);
    const std::vector<std::int64_t> raw = node.attrs.get_ints("indices", {});
    const std::optional<std::int64_t> count = checked_product(indices_shape);
    KILN_CHECK(count && static_cast<std::int64_t>(raw.size()) == *count, ErrorKind::InvalidArgument,
               "attribute 'indices' has " + std::to_string(raw.size()) + " values for 'indices_shape' " +
                   shape_str(indices_shape));
    plan.indices = normalize_gather_indices(raw, plan.extent);
  } else {
    KILN_CHECK(!node.attrs.has("indices") && !node.attrs.has("indices_shape"), ErrorKind::InvalidArgument,
               "attributes 'indices' and 'indices_shape' belong to the one-input form, but an indices input is given");
    const TensorType& indices = inputs[1];
    KILN_CHECK(indices.dtype == DType::i64 || indices.dtype == DType::i32, ErrorKind::ShapeMismatch,
               "indices must be i64 or i32, got " + describe("indices", indices));
    indices_shape = indices.shape;
  }
  plan.output_shape = Shape(data.shape.begin(), data.shape.begin() + plan.axis);
  plan.output_shape.insert(plan.output_shape.end(), indices_shape.begin(), indices_shape.end());
  plan.output_shape.insert(plan.output_shape.end(), data.shape.begin() + plan.axis + 1, data.shape.end());
  return plan;
}

Shape expand_shape(const Node& node, const Shape& input) {
  check_known_attributes(node, {"shape"});
  KILN_CHECK(node.attrs.has("shape"), ErrorKind::InvalidArgument, "attribute 'shape' is required");
  const Shape target = node.attrs.get_ints("shape", {});
  check_non_negative("shape", target);
  const Shape out = broadcast_shapes(input, target);
  check_element_count(out, "output");
  return out;
}

Shape tile_shape(const Node& node, const Shape& input) {
  check_known_attributes(node, {"repeats"});
  KILN_CHECK(node.attrs.has("repeats"), ErrorKind::InvalidArgument, "attribute 'repeats' is required");
  const std::vector<std::int64_t> repeats = get_ints_of_length(node, "repeats", {}, input.size());
  check_non_negative("repeats", repeats);
  Shape out(input.size());
  for (std::size_t d = 0; d < input.size(); ++d) {
    KILN_CHECK(repeats[d] == 0 || input[d] <= kMaxDataOpElements / repeats[d], ErrorKind::InvalidArgument,
               "attribute 'repeats' " + ints_str(repeats) + " makes input " + shape_str(input) + " too large");
    out[d] = input[d] * repeats[d];
  }
  check_element_count(out, "output");
  return out;
}

namespace {

// ---- Slice ------------------------------------------------------------------------

// With more inputs (starts, ends, then optionally axes and steps, read at
// run time: the importer's form for a window computed from data, as a loop
// body's iteration number) the output is dynamic.
// The one-input form's output: its sliced axes' extents read (guarded), the
// others kept as they are.
SymShape slice_dims(const Node& node, const SymShape& input) {
  const SlicePlan plan = slice_plan(node, input.hints());
  SymShape out(plan.counts.begin(), plan.counts.end());
  if (!input.symbolic()) return out;
  const auto rank = static_cast<std::int64_t>(input.size());
  std::vector<std::int64_t> axes = node.attrs.get_ints("axes", {});
  if (!node.attrs.has("axes"))
    for (std::size_t i = 0; i < node.attrs.get_ints("starts", {}).size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
  std::vector<bool> sliced(input.size(), false);
  for (std::int64_t a : axes) sliced[static_cast<std::size_t>(a < 0 ? a + rank : a)] = true;  // slice_plan checked them
  for (std::size_t d = 0; d < input.size(); ++d) {
    if (sliced[d]) (void)input[d].value();
    else out[d] = input[d];
  }
  return out;
}

std::vector<TensorType> infer_slice(const Node& node, std::span<const TensorType> in) {
  if (in.size() == 1) return {{in[0].dtype, slice_dims(node, in[0].shape)}};
  check_known_attributes(node, {});
  KILN_CHECK(in.size() >= 3, ErrorKind::InvalidArgument, "takes the data alone, or with starts, ends[, axes[, steps]]");
  for (std::size_t i = 1; i < in.size(); ++i)
    KILN_CHECK((in[i].dtype == DType::i64 || in[i].dtype == DType::i32) && in[i].shape.size() == 1 && !in[i].dynamic &&
                   in[i].shape[0] == in[1].shape[0],
               ErrorKind::ShapeMismatch,
               "starts, ends, axes and steps must be 1-D integer tensors of one length, got " + describe("input", in[i]));
  const bool rank_known = !in[0].dynamic || !in[0].shape.empty();
  return {dynamic_type(in[0].dtype, rank_known ? Shape(in[0].shape.size(), kDynamicDim) : Shape{})};
}

// The node with its run-time inputs as the one-input form's attributes.
Node with_read_window(const Node& node, std::span<const Tensor> in) {
  Node window = node;
  auto ints = [&](std::size_t i) {
    std::vector<std::int64_t> values;
    if (in[i].dtype() == DType::i64)
      for (std::int64_t v : in[i].values<std::int64_t>()) values.push_back(v);
    else
      for (std::int32_t v : in[i].values<std::int32_t>()) values.push_back(v);
    return values;
  };
  window.attrs.set("starts", ints(1));
  window.attrs.set("ends", ints(2));
  if (in.size() > 3) window.attrs.set("axes", ints(3));
  if (in.size() > 4) window.attrs.set("steps", ints(4));
  return window;
}

std::vector<Tensor> reference_slice(const Node& node, std::span<const Tensor> in) {
  const SlicePlan plan = in.size() == 1 ? slice_plan(node, in[0].shape()) : slice_plan(with_read_window(node, in), in[0].shape());
  return {gather_elements(in[0], plan.output_shape(), [&](std::span<const std::int64_t> coords) {
    return plan.source_offset(coords, row_major_strides(in[0].shape()));
  })};
}

// ---- Split ------------------------------------------------------------------------

std::vector<TensorType> infer_split(const Node& node, std::span<const TensorType> in) {
  // The plan depends on the split axis's extent alone: that one is read (guarded).
  const SplitPlan plan = split_plan(node, in[0].shape.hints());
  (void)in[0].shape[plan.axis].value();
  std::vector<TensorType> out;
  for (std::int64_t size : plan.sizes) {
    SymShape shape = in[0].shape;
    shape[plan.axis] = size;
    out.push_back({in[0].dtype, shape});
  }
  return out;
}

std::vector<Tensor> reference_split(const Node& node, std::span<const Tensor> in) {
  const Tensor& x = in[0];
  const SplitPlan plan = split_plan(node, x.shape());
  const std::size_t axis = static_cast<std::size_t>(plan.axis);
  const std::int64_t outer = num_elements(Shape(x.shape().begin(), x.shape().begin() + plan.axis));
  const std::int64_t inner = num_elements(Shape(x.shape().begin() + plan.axis + 1, x.shape().end()));
  const std::size_t size = dtype_size(x.dtype());
  const std::int64_t in_row = x.shape()[axis] * inner;
  std::vector<Tensor> out;
  std::int64_t column = 0;  // where this piece starts inside an input row
  for (std::int64_t length : plan.sizes) {
    Shape shape = x.shape();
    shape[axis] = length;
    Tensor y(x.dtype(), shape);
    const std::int64_t row = length * inner;
    for (std::int64_t o = 0; o < outer && row > 0; ++o)
      std::memcpy(y.bytes().data() + o * row * size, x.bytes().data() + (o * in_row + column) * size, row * size);
    column += row;
    out.push_back(y);
  }
  return out;
}

// ---- Gather -----------------------------------------------------------------------

// The indices of either form, each in [0, extent) after adding the extent to
// negative ones; throws InvalidArgument naming the index out of range.
std::vector<std::int64_t> gather_indices(const Node& node, std::span<const Tensor> in) {
  const GatherPlan plan = gather_plan(node, types_of(in));
  if (plan.constant_indices) return plan.indices;
  const Tensor& t = in[1];
  std::vector<std::int64_t> raw;
  if (t.dtype() == DType::i64) raw.assign(t.values<std::int64_t>().begin(), t.values<std::int64_t>().end());
  else raw.assign(t.values<std::int32_t>().begin(), t.values<std::int32_t>().end());
  return normalize_gather_indices(raw, plan.extent);
}

std::vector<TensorType> infer_gather(const Node& node, std::span<const TensorType> in) {
  if (!in[0].shape.symbolic() && (in.size() < 2 || !in[1].shape.symbolic()))
    return {{in[0].dtype, gather_plan(node, in).output_shape}};
  // The plan at the planned extents; the indexed axis's extent is read
  // (indices are checked against it), every other dim kept.
  std::vector<TensorType> planned(in.begin(), in.end());
  for (TensorType& t : planned) t.shape = t.shape.hints();
  const GatherPlan plan = gather_plan(node, planned);
  const SymShape& data = in[0].shape;
  (void)data[plan.axis].value();
  SymShape out(data.begin(), data.begin() + plan.axis);
  if (!plan.constant_indices) out.insert(out.end(), in[1].shape.begin(), in[1].shape.end());
  else {
    const Shape& with_indices = plan.output_shape;  // the constant indices' dims
    const std::size_t index_rank = with_indices.size() + 1 - data.size();
    out.insert(out.end(), with_indices.begin() + plan.axis, with_indices.begin() + plan.axis + static_cast<std::ptrdiff_t>(index_rank));
  }
  out.insert(out.end(), data.begin() + plan.axis + 1, data.end());
  return {{in[0].dtype, out}};
}

std::vector<Tensor> reference_gather(const Node& node, std::span<const Tensor> in) {
  const Tensor& x = in[0];
  const GatherPlan plan = gather_plan(node, types_of(in));
  const std::vector<std::int64_t> indices = gather_indices(node, in);
  const std::size_t size = dtype_size(x.dtype());
  const std::int64_t row = plan.inner * static_cast<std::int64_t>(size);
  Tensor y(x.dtype(), plan.output_shape);
  std::byte* dst = y.bytes().data();
  // Output is [outer, indices..., inner]; each (outer, index) copies one row.
  for (std::int64_t o = 0; o < plan.outer; ++o)
    for (std::int64_t index : indices) {
      if (row > 0) std::memcpy(dst, x.bytes().data() + (o * plan.extent + index) * row, row);
      dst += row;
    }
  return {y};
}

// ---- Squeeze / Unsqueeze ----------------------------------------------------------

SymShape squeeze_shape(const Node& node, const TensorType& x) {
  check_known_attributes(node, {"axes"});
  const auto rank = static_cast<std::int64_t>(x.shape.size());
  std::vector<std::int64_t> axes;
  if (node.attrs.has("axes")) {
    axes = normalized_axes(node.attrs.get_ints("axes", {}), rank, "axes");
    for (std::int64_t a : axes)
      KILN_CHECK(x.shape[a] == 1, ErrorKind::ShapeMismatch,
                 "cannot squeeze axis " + std::to_string(a) + " of extent " + std::to_string(x.shape[a]) + " in " +
                     describe("input", x));
  } else {
    for (std::int64_t a = 0; a < rank; ++a)
      if (x.shape[a] == 1) axes.push_back(a);
  }
  SymShape out;
  for (std::int64_t a = 0; a < rank; ++a)
    if (std::find(axes.begin(), axes.end(), a) == axes.end()) out.push_back(x.shape[a]);
  return out;
}

SymShape unsqueeze_shape(const Node& node, const TensorType& x) {
  check_known_attributes(node, {"axes"});
  KILN_CHECK(node.attrs.has("axes"), ErrorKind::InvalidArgument, "attribute 'axes' is required");
  const std::vector<std::int64_t> given = node.attrs.get_ints("axes", {});
  const auto rank = static_cast<std::int64_t>(x.shape.size() + given.size());
  const std::vector<std::int64_t> axes = normalized_axes(given, rank, "axes");
  SymShape out;
  std::size_t next = 0;
  for (std::int64_t a = 0; a < rank; ++a)
    out.push_back(std::find(axes.begin(), axes.end(), a) != axes.end() ? sym::Dim(1) : x.shape[next++]);
  return out;
}

std::vector<TensorType> infer_squeeze(const Node& node, std::span<const TensorType> in) {
  return {{in[0].dtype, squeeze_shape(node, in[0])}};
}
std::vector<Tensor> reference_squeeze(const Node& node, std::span<const Tensor> in) {
  return {copy_tensor(in[0], squeeze_shape(node, {in[0].dtype(), in[0].shape()}))};
}
std::vector<TensorType> infer_unsqueeze(const Node& node, std::span<const TensorType> in) {
  return {{in[0].dtype, unsqueeze_shape(node, in[0])}};
}
std::vector<Tensor> reference_unsqueeze(const Node& node, std::span<const Tensor> in) {
  return {copy_tensor(in[0], unsqueeze_shape(node, {in[0].dtype(), in[0].shape()}))};
}

// ---- Expand -----------------------------------------------------------------------

// With a second input (the shape, read at run time: computed from a
// data-dependent value, as TensorFlow's converters write a loop's output
// length), the output is dynamic and the node runs on the host.
std::vector<TensorType> infer_expand(const Node& node, std::span<const TensorType> in) {
  if (in.size() < 2 || !has_input(node, 1)) return {{in[0].dtype, expand_shape(node, in[0].shape)}};
  check_known_attributes(node, {});
  KILN_CHECK(in[1].dtype == DType::i64 && in[1].shape.size() == 1 && !in[1].dynamic, ErrorKind::ShapeMismatch,
             "the shape must be a 1-D i64 tensor of known length, got " + describe("shape", in[1]));
  const std::size_t rank = std::max(in[0].shape.size(), static_cast<std::size_t>(in[1].shape[0]));
  return {dynamic_type(in[0].dtype, Shape(rank, kDynamicDim))};
}

std::vector<Tensor> reference_expand(const Node& node, std::span<const Tensor> in) {
  Shape out_shape;
  if (in.size() > 1 && has_input(node, 1)) {
    const auto dims = in[1].values<std::int64_t>();
    const Shape target(dims.begin(), dims.end());
    check_non_negative("shape", target);
    out_shape = broadcast_shapes(in[0].shape(), target);
    check_element_count(out_shape, "output");
  } else {
    out_shape = expand_shape(node, in[0].shape());
  }
  const Strides strides = broadcast_strides(in[0].shape(), out_shape);
  return {gather_elements(in[0], out_shape, [&](std::span<const std::int64_t> coords) {
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < coords.size(); ++d) offset += coords[d] * strides[d];
    return offset;
  })};
}

// ---- Tile -------------------------------------------------------------------------

std::vector<TensorType> infer_tile(const Node& node, std::span<const TensorType> in) {
  return {{in[0].dtype, tile_shape(node, in[0].shape)}};
}

std::vector<Tensor> reference_tile(const Node& node, std::span<const Tensor> in) {
  const Shape& x_shape = in[0].shape();
  const Strides strides = row_major_strides(x_shape);
  return {gather_elements(in[0], tile_shape(node, x_shape), [&](std::span<const std::int64_t> coords) {
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < coords.size(); ++d) offset += (coords[d] % x_shape[d]) * strides[d];
    return offset;
  })};
}

// ---- Shape ------------------------------------------------------------------------

// ONNX Shape's [start, end) window over the dims: negative values count from
// the end and both are clamped to [0, rank].
std::pair<std::int64_t, std::int64_t> shape_window(const Node& node, const TensorType& x) {
  check_known_attributes(node, {"start", "end"});
  const auto rank = static_cast<std::int64_t>(x.shape.size());
  auto clamp = [rank](std::int64_t v) { return std::clamp(v < 0 ? v + rank : v, std::int64_t{0}, rank); };
  const std::int64_t start = clamp(node.attrs.get_int("start", 0));
  const std::int64_t end = clamp(node.attrs.get_int("end", rank));
  return {start, std::max(start, end)};
}

std::vector<TensorType> infer_shape(const Node& node, std::span<const TensorType> in) {
  const auto [start, end] = shape_window(node, in[0]);
  return {{DType::i64, {end - start}}};
}

std::vector<Tensor> reference_shape(const Node& node, std::span<const Tensor> in) {
  const auto [start, end] = shape_window(node, {in[0].dtype(), in[0].shape()});
  return {Tensor::from_i64({end - start}, Shape(in[0].shape().begin() + start, in[0].shape().begin() + end))};
}

// ---- ConstantOfShape --------------------------------------------------------------

TensorType constant_of_shape_type(const Node& node) {
  check_known_attributes(node, {"shape", "value", "dtype"});
  KILN_CHECK(node.attrs.has("shape"), ErrorKind::InvalidArgument, "attribute 'shape' is required");
  const Shape shape = node.attrs.get_ints("shape", {});
  check_non_negative("shape", shape);
  check_element_count(shape, "attribute 'shape'");
  return {dtype_from_onnx(node.attrs.get_int("dtype", kOnnxFloat)), shape};
}

// With inputs (the shape, read at run time, and the scalar value) the output
// is dynamic: the importer's form for a shape computed from a data-dependent
// value (torchvision's full_like of a TopK result).
std::vector<TensorType> infer_constant_of_shape(const Node& node, std::span<const TensorType> in) {
  if (in.empty()) return {constant_of_shape_type(node)};
  check_known_attributes(node, {});
  KILN_CHECK(in.size() == 2, ErrorKind::InvalidArgument, "takes no inputs, or the shape and the value");
  KILN_CHECK(in[0].dtype == DType::i64 && in[0].shape.size() == 1 && !in[0].dynamic, ErrorKind::ShapeMismatch,
             "the shape must be a 1-D i64 tensor of known length, got " + describe("shape", in[0]));
  KILN_CHECK(in[1].shape.empty() && !in[1].dynamic, ErrorKind::ShapeMismatch,
             "the value must be a scalar, got " + describe("value", in[1]));
  return {dynamic_type(in[1].dtype, Shape(static_cast<std::size_t>(in[0].shape[0]), kDynamicDim))};
}

Tensor fill_read_shape(std::span<const Tensor> in) {
  const auto dims = in[0].values<std::int64_t>();
  const Shape shape(dims.begin(), dims.end());
  for (std::int64_t d : shape)
    KILN_CHECK(d >= 0, ErrorKind::InvalidArgument, "the shape " + shape_str(shape) + " has a negative extent");
  const std::optional<std::int64_t> count = checked_product(shape);
  KILN_CHECK(count && *count <= (std::int64_t{1} << 31), ErrorKind::InvalidArgument,
             "the shape " + shape_str(shape) + " is too large to fill");
  Tensor out(in[1].dtype(), shape);
  const std::size_t size = dtype_size(out.dtype());
  for (std::size_t offset = 0; offset < out.nbytes(); offset += size)
    std::memcpy(out.bytes().data() + offset, in[1].bytes().data(), size);
  return out;
}

std::vector<Tensor> reference_constant_of_shape(const Node& node, std::span<const Tensor> in) {
  if (!in.empty()) return {fill_read_shape(in)};
  const TensorType type = constant_of_shape_type(node);
  Tensor y(type.dtype, type.shape);
  const std::vector<std::byte> element = encode_element(type.dtype, node.attrs.get_float("value", 0.0));
  for (std::size_t offset = 0; offset < y.nbytes(); offset += element.size())
    std::memcpy(y.bytes().data() + offset, element.data(), element.size());
  return {y};
}

}  // namespace

void register_data_ops(OpTable& table) {
  add_op(table, make_schema("Slice", 1, 5, infer_slice, reference_slice,
                       "strided window: `starts`, `ends`, `axes`, `steps` with ONNX clamping (attributes, or inputs read at run time)"));
  OpSchema split = make_schema("Split", 1, 1, infer_split, reference_split,
                          "pieces along `axis`: sizes `split`, or `num_outputs` equal pieces");
  split.variadic_outputs = true;
  add_op(table, std::move(split));
  add_op(table, make_schema("Gather", 1, 2, infer_gather, reference_gather,
                       "rows of `axis` picked by indices: an input, or constant `indices` + `indices_shape`"));
  add_op(table, make_schema("Squeeze", 1, 1, infer_squeeze, reference_squeeze,
                       "drop unit dims `axes` (default: every unit dim)"));
  add_op(table, make_schema("Unsqueeze", 1, 1, infer_unsqueeze, reference_unsqueeze,
                       "insert unit dims at output `axes`"));
  add_op(table, make_schema("Expand", 1, 2, infer_expand, reference_expand,
                       "broadcast to `shape` (numpy rules, both ways)"));
  add_op(table, make_schema("Tile", 1, 1, infer_tile, reference_tile, "repeat the input `repeats` times per dim"));
  add_op(table, make_schema("Shape", 1, 1, infer_shape, reference_shape, "the input's dims [start, end) as i64"));
  add_op(table, make_schema("ConstantOfShape", 0, 2, infer_constant_of_shape, reference_constant_of_shape,
                       "a tensor of `shape` filled with `value` of ONNX `dtype`; or, given inputs, of the shape "
                       "input's extents (read at run time) filled with the scalar value input"));
}

}  // namespace kiln::graph::ops

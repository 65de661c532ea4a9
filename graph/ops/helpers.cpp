// Helpers shared by the op schemas (graph/ops/ops.h).
#include <algorithm>
#include <cstring>
#include <optional>

#include "graph/checked_math.h"
#include "graph/ops/ops.h"
#include "src/base/check.h"

namespace kiln::graph::ops {

std::string ints_str(const std::vector<std::int64_t>& values) { return shape_str(values); }

void add_op(OpTable& table, OpSchema schema) {
  KILN_ASSERT(!schema.name.empty() && schema.infer && schema.reference);
  KILN_ASSERT(schema.min_inputs >= 0 && schema.min_inputs <= schema.max_inputs && schema.num_outputs >= 1);
  const std::string name = schema.name;
  const bool inserted = table.emplace(name, std::move(schema)).second;
  KILN_ASSERT(inserted);
}

bool has_input(const Node& node, std::size_t index) { return index < node.inputs.size() && node.inputs[index] >= 0; }

void check_known_attributes(const Node& node, const std::vector<std::string_view>& known) {
  for (const auto& [name, value] : node.attrs.all()) {
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    std::string list;
    for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    throw_error(ErrorKind::InvalidArgument,
                "unknown attribute '" + name + "' (" + node.op + " takes " + (list.empty() ? "none" : list) + ")");
  }
}

void check_f32_products(const Node& node) {
  const std::string products = node.attrs.get_string("f32_products", "");
  KILN_CHECK(products.empty() || products == "tf32" || products == "bf16", ErrorKind::InvalidArgument,
             "attribute 'f32_products' is '" + products + "' (tf32 or bf16)");
}

std::vector<std::int64_t> get_ints_of_length(const Node& node, const std::string& name,
                                             std::vector<std::int64_t> fallback, std::size_t length) {
  std::vector<std::int64_t> values = node.attrs.get_ints(name, std::move(fallback));
  KILN_CHECK(values.size() == length, ErrorKind::InvalidArgument,
             "attribute '" + name + "' needs " + std::to_string(length) + " values, got " +
                 std::to_string(values.size()) + " " + ints_str(values));
  return values;
}

void check_positive(const std::string& name, const std::vector<std::int64_t>& values) {
  for (std::int64_t v : values)
    KILN_CHECK(v > 0, ErrorKind::InvalidArgument, "attribute '" + name + "' must be positive, got " + ints_str(values));
}

void check_non_negative(const std::string& name, const std::vector<std::int64_t>& values) {
  for (std::int64_t v : values)
    KILN_CHECK(v >= 0, ErrorKind::InvalidArgument,
               "attribute '" + name + "' must not be negative, got " + ints_str(values));
}

bool get_flag(const Node& node, const std::string& name, bool fallback) {
  const std::int64_t value = node.attrs.get_int(name, fallback ? 1 : 0);
  KILN_CHECK(value == 0 || value == 1, ErrorKind::InvalidArgument,
             "attribute '" + name + "' must be 0 or 1, got " + std::to_string(value));
  return value == 1;
}

std::int64_t window_extent(std::int64_t kernel, std::int64_t dilation) {
  std::optional<std::int64_t> extent = checked_mul(kernel - 1, dilation);
  if (extent) extent = checked_add(*extent, 1);
  KILN_CHECK(extent.has_value(), ErrorKind::InvalidArgument,
             "a window of " + std::to_string(kernel) + " taps with dilation " + std::to_string(dilation) +
                 " is longer than int64 can hold");
  return *extent;
}

std::int64_t padded_extent(std::int64_t size, std::int64_t pad_begin, std::int64_t pad_end) {
  std::optional<std::int64_t> padded = checked_add(size, pad_begin);
  if (padded) padded = checked_add(*padded, pad_end);
  KILN_CHECK(padded.has_value(), ErrorKind::InvalidArgument,
             "an extent of " + std::to_string(size) + " padded by " + std::to_string(pad_begin) + " and " +
                 std::to_string(pad_end) + " is longer than int64 can hold");
  return *padded;
}

sym::Dim padded_extent(const sym::Dim& size, std::int64_t pad_begin, std::int64_t pad_end) {
  if (!size.symbolic()) return padded_extent(size.hint(), pad_begin, pad_end);
  return size + pad_begin + pad_end;
}

std::int64_t normalize_axis(std::int64_t axis, std::int64_t rank, std::string_view attribute) {
  KILN_CHECK(axis >= -rank && axis < rank, ErrorKind::InvalidArgument,
             "attribute '" + std::string(attribute) + "' is " + std::to_string(axis) + ", out of range for rank " +
                 std::to_string(rank) + " (allowed " + std::to_string(-rank) + ".." + std::to_string(rank - 1) + ")");
  return axis < 0 ? axis + rank : axis;
}

Activation get_activation(const Node& node) {
  const std::string name = node.attrs.get_string("activation", "");
  if (name.empty()) return Activation::none;
  if (name == "Relu") return Activation::relu;
  throw_error(ErrorKind::InvalidArgument,
              "attribute 'activation' is '" + name + "'; supported: \"\" (none) or \"Relu\"");
}

std::string describe(std::string_view what, const TensorType& type) { return std::string(what) + " " + type_str(type); }

void require_f32(std::string_view what, const TensorType& type) {
  KILN_CHECK(type.dtype == DType::f32, ErrorKind::Unsupported,
             std::string(what) + " has dtype " + std::string(dtype_name(type.dtype)) + "; this op supports f32 only");
}

void require_rank(std::string_view what, const TensorType& type, std::size_t rank) {
  KILN_CHECK(type.shape.size() == rank, ErrorKind::ShapeMismatch,
             std::string(what) + " must have rank " + std::to_string(rank) + ", got " + describe(what, type));
}

void require_same_dtype(std::string_view what_a, const TensorType& a, std::string_view what_b, const TensorType& b) {
  KILN_CHECK(a.dtype == b.dtype, ErrorKind::ShapeMismatch,
             "dtypes differ: " + describe(what_a, a) + ", " + describe(what_b, b));
}

std::vector<TensorType> types_of(std::span<const Tensor> tensors) {
  std::vector<TensorType> types;
  types.reserve(tensors.size());
  for (const Tensor& t : tensors) types.push_back({t.dtype(), t.shape()});
  return types;
}

Tensor copy_tensor(const Tensor& tensor, Shape shape) {
  Tensor out(tensor.dtype(), std::move(shape));
  KILN_ASSERT(out.nbytes() == tensor.nbytes());
  if (out.nbytes() != 0) std::memcpy(out.bytes().data(), tensor.bytes().data(), out.nbytes());
  return out;
}

OpSchema make_schema(const std::string& name, int min_inputs, int max_inputs, decltype(OpSchema::infer) infer,
                     decltype(OpSchema::reference) reference, const std::string& summary) {
  OpSchema s;
  s.name = name;
  s.min_inputs = min_inputs;
  s.max_inputs = max_inputs;
  s.infer = std::move(infer);
  s.reference = std::move(reference);
  s.summary = summary;
  return s;
}

OpSchema f32_unary_schema(const std::string& name, std::vector<std::string_view> known, MakeElementFn make_fn,
                          const std::string& summary) {
  auto infer = [known, make_fn](const Node& node, std::span<const TensorType> in) -> std::vector<TensorType> {
    check_known_attributes(node, known);
    require_f32("input", in[0]);
    make_fn(node);  // validates the attributes
    return {in[0]};
  };
  auto reference = [make_fn](const Node& node, std::span<const Tensor> in) -> std::vector<Tensor> {
    return {map_f32(in[0], make_fn(node))};
  };
  return make_schema(name, 1, 1, std::move(infer), std::move(reference), summary);
}

}  // namespace kiln::graph::ops

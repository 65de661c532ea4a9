// Ops that move data without arithmetic: Reshape, Flatten, Transpose, Concat,
// Identity. They accept any dtype; the references copy bytes.
#include <algorithm>
#include <cstring>
#include <optional>

#include "graph/broadcast.h"
#include "graph/checked_math.h"
#include "graph/ops/ops.h"
#include "src/base/check.h"

namespace kiln::graph::ops {

namespace {

// ---- Reshape --------------------------------------------------------------------

// ONNX semantics: 0 copies the input's dim at that index (unless allowzero),
// one -1 is inferred from the element count.
SymShape reshape_target(const Node& node, const TensorType& x) {
  check_known_attributes(node, {"shape", "allowzero"});
  KILN_CHECK(node.attrs.has("shape"), ErrorKind::InvalidArgument, "attribute 'shape' is required");
  const std::vector<std::int64_t> spec = node.attrs.get_ints("shape", {});
  const bool allow_zero = get_flag(node, "allowzero", false);
  const std::string context = ": " + describe("input", x) + ", shape " + shape_str(spec);
  SymShape out(spec.size());
  int inferred = -1;
  for (std::size_t i = 0; i < spec.size(); ++i) {
    const std::int64_t d = spec[i];
    KILN_CHECK(d >= -1, ErrorKind::InvalidArgument,
               "dimension " + std::to_string(i) + " is " + std::to_string(d) + context);
    if (d == -1) {
      KILN_CHECK(inferred == -1, ErrorKind::InvalidArgument, "more than one -1" + context);
      inferred = static_cast<int>(i);
      continue;
    }
    if (d == 0 && !allow_zero) {
      KILN_CHECK(i < x.shape.size(), ErrorKind::InvalidArgument,
                 "dimension " + std::to_string(i) + " is 0 (copy) but the input has rank " +
                     std::to_string(x.shape.size()) + context);
      out[i] = x.shape[i];
    } else {
      out[i] = d;
    }
  }
  if (x.shape.symbolic()) {
    // The same rules on expressions (each comparison not decided by them guards).
    SymShape known_dims = out;
    if (inferred >= 0) known_dims[static_cast<std::size_t>(inferred)] = 1;
    const sym::Dim known = element_count(known_dims);
    const sym::Dim total = element_count(x.shape);
    if (inferred >= 0) {
      KILN_CHECK(known != 0, ErrorKind::InvalidArgument, "cannot infer -1 next to a zero-sized dimension" + context);
      KILN_CHECK(mod(total, known) == 0, ErrorKind::ShapeMismatch,
                 "cannot reshape " + std::to_string(total.hint()) + " elements: they do not divide into " +
                     std::to_string(known.hint()) + context);
      out[inferred] = floor_div(total, known);
      return out;
    }
    KILN_CHECK(known == total, ErrorKind::ShapeMismatch,
               "cannot reshape " + std::to_string(total.hint()) + " elements to " + shape_str(out.hints()) + " (" +
                   std::to_string(known.hint()) + " elements)" + context);
    return out;
  }
  // The product of the known dims: a target shape from a file may overflow it.
  Shape known_dims = out;
  if (inferred >= 0) known_dims[static_cast<std::size_t>(inferred)] = 1;
  const std::optional<std::int64_t> known_product = checked_product(known_dims);
  KILN_CHECK(known_product.has_value(), ErrorKind::InvalidArgument,
             "the product of the target dimensions overflows int64" + context);
  const std::int64_t known = *known_product;
  const std::int64_t total = num_elements(x.shape);
  if (inferred >= 0) {
    KILN_CHECK(known != 0, ErrorKind::InvalidArgument, "cannot infer -1 next to a zero-sized dimension" + context);
    KILN_CHECK(total % known == 0, ErrorKind::ShapeMismatch,
               "cannot reshape " + std::to_string(total) + " elements: they do not divide into " +
                   std::to_string(known) + context);
    out[inferred] = total / known;
    return out;
  }
  KILN_CHECK(known == total, ErrorKind::ShapeMismatch,
             "cannot reshape " + std::to_string(total) + " elements to " + shape_str(out.hints()) + " (" +
                 std::to_string(known) + " elements)" + context);
  return out;
}

std::vector<TensorType> infer_reshape(const Node& node, std::span<const TensorType> in) {
  return {{in[0].dtype, reshape_target(node, in[0])}};
}

std::vector<Tensor> reference_reshape(const Node& node, std::span<const Tensor> in) {
  return {copy_tensor(in[0], reshape_target(node, {in[0].dtype(), in[0].shape()}))};
}

// ---- Flatten --------------------------------------------------------------------

SymShape flatten_shape(const Node& node, const TensorType& x) {
  check_known_attributes(node, {"axis"});
  const auto rank = static_cast<std::int64_t>(x.shape.size());
  std::int64_t axis = node.attrs.get_int("axis", 1);
  // Unlike most axes, rank itself is allowed: [prod(all), 1].
  KILN_CHECK(axis >= -rank && axis <= rank, ErrorKind::InvalidArgument,
             "attribute 'axis' is " + std::to_string(axis) + ", out of range for " + describe("input", x) +
                 " (allowed " + std::to_string(-rank) + ".." + std::to_string(rank) + ")");
  if (axis < 0) axis += rank;
  const std::span<const sym::Dim> dims(x.shape);
  return {element_count(dims.first(static_cast<std::size_t>(axis))), element_count(dims.subspan(static_cast<std::size_t>(axis)))};
}

std::vector<TensorType> infer_flatten(const Node& node, std::span<const TensorType> in) {
  return {{in[0].dtype, flatten_shape(node, in[0])}};
}

std::vector<Tensor> reference_flatten(const Node& node, std::span<const Tensor> in) {
  return {copy_tensor(in[0], flatten_shape(node, {in[0].dtype(), in[0].shape()}))};
}

// ---- Transpose ------------------------------------------------------------------

std::vector<std::int64_t> read_perm(const Node& node, const TensorType& x) {
  check_known_attributes(node, {"perm"});
  const auto rank = static_cast<std::int64_t>(x.shape.size());
  std::vector<std::int64_t> reversed(rank);
  for (std::int64_t i = 0; i < rank; ++i) reversed[i] = rank - 1 - i;
  const std::vector<std::int64_t> perm = node.attrs.get_ints("perm", reversed);
  std::vector<std::int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::int64_t> identity(rank);
  for (std::int64_t i = 0; i < rank; ++i) identity[i] = i;
  KILN_CHECK(sorted == identity, ErrorKind::InvalidArgument,
             "attribute 'perm' " + shape_str(perm) + " is not a permutation of 0.." + std::to_string(rank - 1) +
                 " for " + describe("input", x));
  return perm;
}

std::vector<TensorType> infer_transpose(const Node& node, std::span<const TensorType> in) {
  const std::vector<std::int64_t> perm = read_perm(node, in[0]);
  SymShape out(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) out[i] = in[0].shape[perm[i]];
  return {{in[0].dtype, out}};
}

std::vector<Tensor> reference_transpose(const Node& node, std::span<const Tensor> in) {
  const Tensor& x = in[0];
  const std::vector<std::int64_t> perm = read_perm(node, {x.dtype(), x.shape()});
  const Shape out_shape = infer_transpose(node, types_of(in))[0].shape;
  const Strides in_strides = row_major_strides(x.shape());
  const std::size_t size = dtype_size(x.dtype());
  Tensor y(x.dtype(), out_shape);
  const std::byte* src = x.bytes().data();
  std::byte* dst = y.bytes().data();
  for (std::int64_t i = 0; i < y.numel(); ++i) {
    // Output dim d walks input dim perm[d].
    const std::vector<std::int64_t> coords = unravel_index(i, out_shape);
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < coords.size(); ++d) offset += coords[d] * in_strides[perm[d]];
    std::memcpy(dst + i * size, src + offset * size, size);
  }
  return {y};
}

// ---- Concat ---------------------------------------------------------------------

std::int64_t concat_axis(const Node& node, const TensorType& first) {
  check_known_attributes(node, {"axis"});
  KILN_CHECK(node.attrs.has("axis"), ErrorKind::InvalidArgument, "attribute 'axis' is required");
  KILN_CHECK(!first.shape.empty(), ErrorKind::ShapeMismatch,
             "inputs must have rank >= 1, got " + describe("input 0", first));
  return normalize_axis(node.attrs.get_int("axis", 0), static_cast<std::int64_t>(first.shape.size()), "axis");
}

std::vector<TensorType> infer_concat(const Node& node, std::span<const TensorType> in) {
  const std::int64_t axis = concat_axis(node, in[0]);
  SymShape out = in[0].shape;
  for (std::size_t i = 1; i < in.size(); ++i) {
    const std::string what = "input " + std::to_string(i);
    require_same_dtype("input 0", in[0], what, in[i]);
    bool fits = in[i].shape.size() == out.size();
    for (std::size_t d = 0; fits && d < out.size(); ++d)
      fits = static_cast<std::int64_t>(d) == axis || in[i].shape[d] == in[0].shape[d];
    KILN_CHECK(fits, ErrorKind::ShapeMismatch,
               "inputs must match except along axis " + std::to_string(axis) + ": " + describe("input 0", in[0]) +
                   ", " + describe(what, in[i]));
    out[axis] += in[i].shape[axis];
  }
  return {{in[0].dtype, out}};
}

std::vector<Tensor> reference_concat(const Node& node, std::span<const Tensor> in) {
  const Shape out_shape = infer_concat(node, types_of(in))[0].shape;
  const auto axis = static_cast<std::size_t>(concat_axis(node, {in[0].dtype(), in[0].shape()}));
  const std::size_t size = dtype_size(in[0].dtype());
  // Each input is [outer, its axis extent * inner]; rows interleave.
  const std::int64_t outer = num_elements(Shape(out_shape.begin(), out_shape.begin() + axis));
  const std::int64_t inner = num_elements(Shape(out_shape.begin() + axis + 1, out_shape.end()));
  const std::int64_t out_row = out_shape[axis] * inner;
  Tensor y(in[0].dtype(), out_shape);
  std::byte* dst = y.bytes().data();
  std::int64_t column = 0;
  for (const Tensor& t : in) {
    const std::int64_t row = t.shape()[axis] * inner;
    const std::byte* src = t.bytes().data();
    for (std::int64_t o = 0; o < outer; ++o)
      if (row > 0) std::memcpy(dst + (o * out_row + column) * size, src + o * row * size, row * size);
    column += row;
  }
  return {y};
}

// ---- Identity ---------------------------------------------------------------------

std::vector<TensorType> infer_identity(const Node& node, std::span<const TensorType> in) {
  check_known_attributes(node, {});
  return {in[0]};
}

std::vector<Tensor> reference_identity(const Node&, std::span<const Tensor> in) {
  return {copy_tensor(in[0], in[0].shape())};
}

}  // namespace

void register_shape_ops(OpTable& table) {
  add_op(table, make_schema("Reshape", 1, 1, infer_reshape, reference_reshape,
                       "new shape, same elements; `shape` 0 copies a dim, one -1 is inferred"));
  add_op(table, make_schema("Flatten", 1, 1, infer_flatten, reference_flatten,
                       "2-D view [prod(dims before axis), prod(dims from axis)]"));
  add_op(table,
         make_schema("Transpose", 1, 1, infer_transpose, reference_transpose, "permute dims by `perm` (default: reversed)"));
  add_op(table, make_schema("Concat", 1, kUnboundedInputs, infer_concat, reference_concat, "join inputs along `axis`"));
  add_op(table, make_schema("Identity", 1, 1, infer_identity, reference_identity, "a copy of the input"));
}

}  // namespace kiln::graph::ops

// Ops whose output elements are chosen by position: GatherElements (by an
// index tensor along one axis) and Trilu (by the side of a diagonal). Both
// move raw elements, so they accept every dtype.
#include <cstring>

#include "graph/broadcast.h"
#include "graph/ops/data_plans.h"
#include "graph/ops/ops.h"

namespace kiln::graph::ops {

namespace {

// ---- GatherElements -----------------------------------------------------------------

// The normalised axis of a GatherElements node, after checking that the
// indices fit the data: the same rank, and no larger than the data along
// every other axis (ONNX's reference reads data at the indices' coordinates).
std::size_t gather_elements_axis(const Node& node, const TensorType& data, const TensorType& indices) {
  check_known_attributes(node, {"axis"});
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

}  // namespace

void register_indexing_ops(OpTable& table) {
  add_op(table, make_schema("GatherElements", 2, 2, infer_gather_elements, reference_gather_elements,
                            "data at the indices' coordinates, `axis` replaced by the index (output: indices' shape)"));
  add_op(table, make_schema("Trilu", 1, 2, infer_trilu, reference_trilu,
                            "keep the upper (`upper`=1) or lower triangle from diagonal `k` of the last two axes"));
}

}  // namespace kiln::graph::ops

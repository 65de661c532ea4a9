// How the data-movement ops (Slice, Split, Gather, Expand, Tile, Pad, Resize,
// ConstantOfShape) read their attributes: each op's attributes resolved once
// into a plan of plain numbers. The reference implementations (graph/ops) and
// the kernel lowerings (src/lower/lower_data.cpp) both use these, so they
// cannot disagree on ONNX's clamping and coordinate rules. Plans throw
// kiln::Error naming the attribute and shapes when the attributes are invalid.
#pragma once

#include <kiln/tensor.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "graph/broadcast.h"
#include "graph/ir.h"

namespace kiln::graph::ops {

// ---- shared ----------------------------------------------------------------------

// The most elements a data op may create (a hostile `shape` must not make
// kiln allocate without bound): 2^32, as for a tensor read from a file.
inline constexpr std::int64_t kMaxDataOpElements = std::int64_t{1} << 32;
// Throws InvalidArgument naming `what` if the shape's element count exceeds
// kMaxDataOpElements (checked without overflow).
void check_element_count(const Shape& shape, const std::string& what);

// ONNX TensorProto data types (Cast `to`, ConstantOfShape `dtype`).
inline constexpr std::int64_t kOnnxFloat = 1;
// Maps an ONNX TensorProto data type to kiln's DType; throws Unsupported otherwise.
DType dtype_from_onnx(std::int64_t onnx_type);
// The bytes of one element of `dtype` holding `value` (f16 rounded to nearest even).
std::vector<std::byte> encode_element(DType dtype, double value);

// A new tensor of `out_shape` whose element at output coordinates c is x's
// element at linear offset source(c); works on raw bytes, so on any dtype.
Tensor gather_elements(const Tensor& x, const Shape& out_shape,
                       const std::function<std::int64_t(std::span<const std::int64_t>)>& source);

// ---- Slice -----------------------------------------------------------------------

// Output dim d reads input positions starts[d] + i * steps[d], i < counts[d].
struct SlicePlan {
  std::vector<std::int64_t> starts, steps, counts;
  Shape output_shape() const { return counts; }
  // The input offset of output coordinates `coords` (input strides given).
  std::int64_t source_offset(std::span<const std::int64_t> coords, const Strides& strides) const;
};
SlicePlan slice_plan(const Node& node, const Shape& input);

// ---- Split -----------------------------------------------------------------------

struct SplitPlan {
  std::int64_t axis = 0;            // normalised
  std::vector<std::int64_t> sizes;  // one per output, summing to the axis extent
};
SplitPlan split_plan(const Node& node, const Shape& input);

// ---- Gather ----------------------------------------------------------------------

// The data viewed as [outer, extent, inner] around `axis`.
struct GatherPlan {
  std::int64_t axis = 0;
  std::int64_t outer = 1, extent = 0, inner = 1;
  bool constant_indices = false;     // the one-input form
  std::vector<std::int64_t> indices;  // constant form only, normalised into [0, extent)
  Shape output_shape;
};
GatherPlan gather_plan(const Node& node, std::span<const TensorType> inputs);
// Adds `extent` to negative indices; throws InvalidArgument for any outside [-extent, extent).
std::vector<std::int64_t> normalize_gather_indices(const std::vector<std::int64_t>& raw, std::int64_t extent);

// ---- TensorScatter ---------------------------------------------------------------

// TensorScatter (ONNX opset 24, the key/value cache update): `past`
// [batch, ..., S, ...] with `update` [batch, ..., L, ...] written along `axis`
// (not the batch axis) at positions write_indices[b] + 0 .. L - 1 of each batch
// entry b (write_indices i64 [batch], zeros when absent); mode "circular" takes
// the positions modulo S. As [batch, middle, S or L, inner] around the axis.
struct TensorScatterPlan {
  std::int64_t batch = 1, middle = 1, cache = 0, length = 0, inner = 1;
  bool circular = false;
  bool has_indices = false;
};
// inputs: past, update and (when has_input(node, 2)) write_indices.
TensorScatterPlan tensor_scatter_plan(const Node& node, std::span<const TensorType> inputs);

// ---- Expand, Tile ----------------------------------------------------------------

Shape expand_shape(const Node& node, const Shape& input);
Shape tile_shape(const Node& node, const Shape& input);

// ---- Pad -------------------------------------------------------------------------

enum class PadMode { constant, reflect, edge };
struct PadPlan {
  PadMode mode = PadMode::constant;
  std::vector<std::int64_t> begins, ends;  // per dim; negative values crop
  double value = 0.0;                      // constant mode
  Shape output_shape;
};
PadPlan pad_plan(const Node& node, const Shape& input);
// The input position read by output position `out` on a dim of `extent` with
// `begin` padding; -1 when it falls in constant padding.
std::int64_t pad_source(const PadPlan& plan, std::int64_t out, std::int64_t begin, std::int64_t extent);

// ---- Resize ----------------------------------------------------------------------

enum class ResizeMode { nearest, linear };
enum class CoordinateMode { half_pixel, half_pixel_symmetric, pytorch_half_pixel, align_corners, asymmetric,
                            tf_half_pixel_for_nn };
enum class NearestMode { round_prefer_floor, round_prefer_ceil, floor, ceil };

// One axis of a resize: its extents, the scale of ONNX's coordinate formulas
// (the given scale, or output/input when sizes were given) and the mode.
struct ResizeAxis {
  std::int64_t input_extent = 1;
  std::int64_t output_extent = 1;
  double scale = 1.0;
  CoordinateMode coordinate = CoordinateMode::half_pixel;
  // Whether output position x reads exactly input position x (nothing to do).
  bool identity() const;
};

struct ResizePlan {
  ResizeMode mode = ResizeMode::nearest;
  NearestMode nearest = NearestMode::round_prefer_floor;
  std::vector<ResizeAxis> axes;  // one per dim
  Shape output_shape;
};
ResizePlan resize_plan(const Node& node, const Shape& input);

// The input coordinate of output position x, by ONNX's formula for the axis's
// coordinate mode, evaluated in T: double in the reference, float where a
// kernel's f32 arithmetic is emulated (the kernel emits the same operations
// in the same order).
template <class T>
T resize_coordinate(const ResizeAxis& axis, std::int64_t x) {
  const T in = static_cast<T>(axis.input_extent);
  const T scale = static_cast<T>(axis.scale);
  const T resized = static_cast<T>(axis.scale * static_cast<double>(axis.input_extent));  // ONNX: scale * in
  const T half = static_cast<T>(0.5);
  const T pos = static_cast<T>(x);
  switch (axis.coordinate) {
    case CoordinateMode::half_pixel: return (pos + half) / scale - half;
    case CoordinateMode::half_pixel_symmetric: {
      const T adjustment = static_cast<T>(axis.output_extent) / resized;
      const T offset = in / static_cast<T>(2) * (static_cast<T>(1) - adjustment);
      return offset + ((pos + half) / scale - half);
    }
    case CoordinateMode::pytorch_half_pixel: return resized == static_cast<T>(1) ? T(0) : (pos + half) / scale - half;
    case CoordinateMode::align_corners:
      return resized == static_cast<T>(1) ? T(0) : pos * (in - static_cast<T>(1)) / (resized - static_cast<T>(1));
    case CoordinateMode::asymmetric: return pos / scale;
    case CoordinateMode::tf_half_pixel_for_nn: return (pos + half) / scale;
  }
  return T(0);
}

// The nearest input position for coordinate `c` by ONNX's nearest_mode (a
// tie is a fraction of exactly 0.5), clamped into [0, extent).
template <class T>
std::int64_t resize_nearest_index(NearestMode mode, T c, std::int64_t extent) {
  using std::ceil;
  using std::floor;
  const T below = floor(c);
  const T fraction = c - below;
  T chosen = below;
  switch (mode) {
    case NearestMode::round_prefer_floor: chosen = fraction > static_cast<T>(0.5) ? below + 1 : below; break;
    case NearestMode::round_prefer_ceil: chosen = fraction >= static_cast<T>(0.5) ? below + 1 : below; break;
    case NearestMode::floor: chosen = below; break;
    case NearestMode::ceil: chosen = ceil(c); break;
  }
  if (chosen < 0) return 0;
  if (chosen > static_cast<T>(extent - 1)) return extent - 1;
  return static_cast<std::int64_t>(chosen);
}

}  // namespace kiln::graph::ops

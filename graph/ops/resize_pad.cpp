// Pad (constant, reflect, edge; negative pads crop) and Resize (nearest and
// N-linear, following the formulas of ONNX's reference implementation). The
// plans that read their attributes are shared with the lowering
// (graph/ops/data_plans.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "graph/ops/data_plans.h"
#include "graph/ops/ops.h"
#include "src/base/check.h"

namespace kiln::graph::ops {

namespace {

template <class E>
E parse_enum(const Node& node, const std::string& attribute, const std::string& fallback,
             const std::vector<std::pair<std::string_view, E>>& choices) {
  const std::string value = node.attrs.get_string(attribute, fallback);
  std::string list;
  for (const auto& [name, e] : choices) {
    if (name == value) return e;
    list += (list.empty() ? "" : ", ") + std::string(name);
  }
  throw_error(ErrorKind::Unsupported,
              "attribute '" + attribute + "' is '" + value + "'; supported: " + list);
}

}  // namespace

// ---- plans (graph/ops/data_plans.h) --------------------------------------------------

PadPlan pad_plan(const Node& node, const Shape& input) {
  check_known_attributes(node, {"pads", "mode", "value"});
  KILN_CHECK(node.attrs.has("pads"), ErrorKind::InvalidArgument, "attribute 'pads' is required");
  const std::size_t rank = input.size();
  const std::vector<std::int64_t> pads = get_ints_of_length(node, "pads", {}, 2 * rank);
  PadPlan plan;
  plan.mode = parse_enum<PadMode>(node, "mode", "constant",
                                  {{"constant", PadMode::constant}, {"reflect", PadMode::reflect}, {"edge", PadMode::edge}});
  plan.value = node.attrs.get_float("value", 0.0);
  plan.begins.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(rank));
  plan.ends.assign(pads.begin() + static_cast<std::ptrdiff_t>(rank), pads.end());
  const std::string context = ": pads " + ints_str(pads) + ", input " + shape_str(input);
  for (std::size_t d = 0; d < rank; ++d) {
    const std::int64_t extent = input[d];
    KILN_CHECK(plan.begins[d] > -kMaxDataOpElements && plan.begins[d] < kMaxDataOpElements &&
                   plan.ends[d] > -kMaxDataOpElements && plan.ends[d] < kMaxDataOpElements,
               ErrorKind::InvalidArgument, "a pad is out of range" + context);
    const std::int64_t out = extent + plan.begins[d] + plan.ends[d];
    KILN_CHECK(out >= 0, ErrorKind::ShapeMismatch,
               "dim " + std::to_string(d) + " would crop to " + std::to_string(out) + context);
    const bool pads_here = plan.begins[d] > 0 || plan.ends[d] > 0;
    if (plan.mode == PadMode::reflect && pads_here)
      KILN_CHECK(std::max(plan.begins[d], plan.ends[d]) < extent, ErrorKind::ShapeMismatch,
                 "reflect padding of dim " + std::to_string(d) + " needs pads smaller than its extent " +
                     std::to_string(extent) + context);
    if (plan.mode == PadMode::edge && pads_here && out > 0)
      KILN_CHECK(extent > 0, ErrorKind::ShapeMismatch,
                 "edge padding of empty dim " + std::to_string(d) + " has no edge to copy" + context);
    plan.output_shape.push_back(out);
  }
  check_element_count(plan.output_shape, "output");
  return plan;
}

std::int64_t pad_source(const PadPlan& plan, std::int64_t out, std::int64_t begin, std::int64_t extent) {
  std::int64_t source = out - begin;
  if (source >= 0 && source < extent) return source;
  switch (plan.mode) {
    case PadMode::constant: return -1;
    case PadMode::edge: return std::clamp<std::int64_t>(source, 0, extent - 1);
    case PadMode::reflect:
      // One reflection suffices: pads are smaller than the extent.
      if (source < 0) source = -source;
      if (source >= extent) source = 2 * (extent - 1) - source;
      return source;
  }
  KILN_ASSERT(false);
}

bool ResizeAxis::identity() const {
  return input_extent == output_extent && resize_coordinate<double>(*this, 0) == 0.0 &&
         (output_extent < 2 || resize_coordinate<double>(*this, output_extent - 1) ==
                                   static_cast<double>(output_extent - 1));
}

ResizePlan resize_plan(const Node& node, const Shape& input) {
  check_known_attributes(node, {"mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a",
                                "exclude_outside", "extrapolation_value", "sizes", "scales", "antialias"});
  ResizePlan plan;
  const std::string mode = node.attrs.get_string("mode", "nearest");
  KILN_CHECK(mode != "cubic", ErrorKind::Unsupported, "mode 'cubic' is not supported (nearest and linear are)");
  plan.mode = parse_enum<ResizeMode>(node, "mode", "nearest",
                                     {{"nearest", ResizeMode::nearest}, {"linear", ResizeMode::linear}});
  plan.nearest = parse_enum<NearestMode>(node, "nearest_mode", "round_prefer_floor",
                                         {{"round_prefer_floor", NearestMode::round_prefer_floor},
                                          {"round_prefer_ceil", NearestMode::round_prefer_ceil},
                                          {"floor", NearestMode::floor},
                                          {"ceil", NearestMode::ceil}});
  const CoordinateMode coordinate =
      parse_enum<CoordinateMode>(node, "coordinate_transformation_mode", "half_pixel",
                                 {{"half_pixel", CoordinateMode::half_pixel},
                                  {"half_pixel_symmetric", CoordinateMode::half_pixel_symmetric},
                                  {"pytorch_half_pixel", CoordinateMode::pytorch_half_pixel},
                                  {"align_corners", CoordinateMode::align_corners},
                                  {"asymmetric", CoordinateMode::asymmetric},
                                  {"tf_half_pixel_for_nn", CoordinateMode::tf_half_pixel_for_nn}});
  KILN_CHECK(node.attrs.get_int("antialias", 0) == 0, ErrorKind::Unsupported, "antialias is not supported");
  KILN_CHECK(node.attrs.get_int("exclude_outside", 0) == 0, ErrorKind::Unsupported,
             "exclude_outside is not supported (it only affects cubic mode)");

  const std::size_t rank = input.size();
  const std::string context = " for input " + shape_str(input);
  KILN_CHECK(node.attrs.has("sizes") || node.attrs.has("scales"), ErrorKind::InvalidArgument,
             "attribute 'sizes' or 'scales' is required");
  std::vector<double> scales;
  if (node.attrs.has("scales")) {
    const auto& all = node.attrs.all();
    const auto it = all.find("scales");
    const auto* values = std::get_if<std::vector<double>>(&it->second);
    KILN_CHECK(values != nullptr, ErrorKind::InvalidArgument, "attribute 'scales' must be floats");
    scales = *values;
    KILN_CHECK(scales.size() == rank, ErrorKind::InvalidArgument,
               "attribute 'scales' has " + std::to_string(scales.size()) + " values, expected " +
                   std::to_string(rank) + context);
    for (double s : scales)
      KILN_CHECK(std::isfinite(s) && s > 0.0, ErrorKind::InvalidArgument,
                 "attribute 'scales' must be positive and finite" + context);
  }
  Shape sizes;
  if (node.attrs.has("sizes")) {
    sizes = get_ints_of_length(node, "sizes", {}, rank);
    check_non_negative("sizes", sizes);
  } else {
    // ONNX: output = floor(input * scale).
    for (std::size_t d = 0; d < rank; ++d) {
      const double size = std::floor(static_cast<double>(input[d]) * scales[d]);
      KILN_CHECK(size < static_cast<double>(kMaxDataOpElements), ErrorKind::InvalidArgument,
                 "attribute 'scales' makes dim " + std::to_string(d) + " too large" + context);
      sizes.push_back(static_cast<std::int64_t>(size));
    }
  }
  check_element_count(sizes, "output");
  for (std::size_t d = 0; d < rank; ++d) {
    KILN_CHECK(input[d] > 0 || sizes[d] == 0, ErrorKind::ShapeMismatch,
               "cannot resize empty dim " + std::to_string(d) + " to " + std::to_string(sizes[d]) + context);
    ResizeAxis axis;
    axis.input_extent = input[d];
    axis.output_extent = sizes[d];
    // The coordinate formulas use the given scale, else output / input.
    axis.scale = !scales.empty() ? scales[d]
                 : input[d] > 0  ? static_cast<double>(sizes[d]) / static_cast<double>(input[d])
                                 : 1.0;
    axis.coordinate = coordinate;
    if (axis.scale <= 0.0) axis.scale = 1.0;  // an empty output reads nothing
    plan.axes.push_back(axis);
  }
  plan.output_shape = sizes;
  return plan;
}

namespace {

// ---- Pad --------------------------------------------------------------------------

std::vector<TensorType> infer_pad(const Node& node, std::span<const TensorType> in) {
  const PadPlan plan = pad_plan(node, in[0].shape);
  KILN_CHECK(plan.mode != PadMode::constant || in[0].dtype == DType::f32 || in[0].dtype == DType::i64 ||
                 in[0].dtype == DType::i32,
             ErrorKind::Unsupported, "constant padding supports f32, i32 and i64, got " + describe("input", in[0]));
  return {{in[0].dtype, plan.output_shape}};
}

std::vector<Tensor> reference_pad(const Node& node, std::span<const Tensor> in) {
  const Tensor& x = in[0];
  const PadPlan plan = pad_plan(node, x.shape());
  const Strides strides = row_major_strides(x.shape());
  Tensor y(x.dtype(), plan.output_shape);
  const std::size_t size = dtype_size(x.dtype());
  const std::vector<std::byte> fill = encode_element(x.dtype(), plan.value);
  std::byte* dst = y.bytes().data();
  std::vector<std::int64_t> coords(plan.output_shape.size(), 0);
  for (std::int64_t i = 0; i < y.numel(); ++i) {
    std::int64_t offset = 0;  // -1 once some dim falls in constant padding
    for (std::size_t d = 0; d < coords.size() && offset >= 0; ++d) {
      const std::int64_t source = pad_source(plan, coords[d], plan.begins[d], x.shape()[d]);
      offset = source < 0 ? -1 : offset + source * strides[d];
    }
    std::memcpy(dst + i * size, offset < 0 ? fill.data() : x.bytes().data() + offset * size, size);
    for (std::size_t d = coords.size(); d-- > 0;) {
      if (++coords[d] < plan.output_shape[d]) break;
      coords[d] = 0;
    }
  }
  return {y};
}

// ---- Resize -----------------------------------------------------------------------

std::vector<TensorType> infer_resize(const Node& node, std::span<const TensorType> in) {
  const SymShape& input = in[0].shape;
  // The plan's checks (sizes that fit) at the extents planned for; the
  // output's dims are kept symbolic where a scale is a whole number (ONNX's
  // floor(input * scale) is then exact), and read (guarded) where not.
  const ResizePlan plan = resize_plan(node, input.hints());
  KILN_CHECK(plan.mode == ResizeMode::nearest || in[0].dtype == DType::f32, ErrorKind::Unsupported,
             "linear resize supports f32 only, got " + describe("input", in[0]));
  if (!input.symbolic()) return {{in[0].dtype, plan.output_shape}};
  SymShape out(plan.output_shape.begin(), plan.output_shape.end());
  for (std::size_t d = 0; d < input.size(); ++d) {
    if (!input[d].symbolic()) continue;
    const double scale = plan.axes[d].scale;
    if (!node.attrs.has("sizes") && scale == std::floor(scale) && scale <= 1024.0)
      out[d] = input[d] * static_cast<std::int64_t>(scale);
    else
      (void)input[d].value();  // the output extent was computed from this value
  }
  return {{in[0].dtype, out}};
}

// One axis's contribution to an output element: up to two input positions
// with their weights (nearest: one position of weight 1).
struct Taps {
  std::int64_t index[2] = {0, 0};
  double weight[2] = {1.0, 0.0};
  int count = 1;
};

Taps axis_taps(const ResizePlan& plan, const ResizeAxis& axis, std::int64_t x) {
  Taps taps;
  if (axis.identity()) {
    taps.index[0] = x;
    return taps;
  }
  const double c = resize_coordinate<double>(axis, x);
  if (plan.mode == ResizeMode::nearest) {
    taps.index[0] = resize_nearest_index<double>(plan.nearest, c, axis.input_extent);
    return taps;
  }
  // Linear: neighbours floor(c) and floor(c) + 1, clamped (ONNX pads with the edge).
  const double below = std::floor(c);
  const double ratio = c - below;
  const auto clamp = [&](double p) {
    return static_cast<std::int64_t>(std::clamp(p, 0.0, static_cast<double>(axis.input_extent - 1)));
  };
  taps.index[0] = clamp(below);
  taps.index[1] = clamp(below + 1.0);
  taps.weight[0] = 1.0 - ratio;
  taps.weight[1] = ratio;
  taps.count = 2;
  return taps;
}

std::vector<Tensor> reference_resize(const Node& node, std::span<const Tensor> in) {
  const Tensor& x = in[0];
  const ResizePlan plan = resize_plan(node, x.shape());
  const Strides strides = row_major_strides(x.shape());
  const std::size_t rank = x.shape().size();
  // Each axis's taps depend only on the output position along it: tabulate them.
  std::vector<std::vector<Taps>> table(rank);
  for (std::size_t d = 0; d < rank; ++d)
    for (std::int64_t p = 0; p < plan.output_shape[d]; ++p) table[d].push_back(axis_taps(plan, plan.axes[d], p));
  if (plan.mode == ResizeMode::nearest) {
    return {gather_elements(x, plan.output_shape, [&](std::span<const std::int64_t> coords) {
      std::int64_t offset = 0;
      for (std::size_t d = 0; d < rank; ++d) offset += table[d][static_cast<std::size_t>(coords[d])].index[0] * strides[d];
      return offset;
    })};
  }
  Tensor y(DType::f32, plan.output_shape);
  auto src = x.values<float>();
  auto dst = y.values<float>();
  std::vector<std::int64_t> coords(rank, 0);
  std::vector<int> corner(rank, 0);
  for (float& out : dst) {
    // Sum over every corner of the N-linear cell.
    double sum = 0.0;
    for (;;) {
      double weight = 1.0;
      std::int64_t offset = 0;
      for (std::size_t d = 0; d < rank; ++d) {
        const Taps& taps = table[d][static_cast<std::size_t>(coords[d])];
        weight *= taps.weight[corner[d]];
        offset += taps.index[corner[d]] * strides[d];
      }
      if (weight != 0.0) sum += weight * static_cast<double>(src[static_cast<std::size_t>(offset)]);
      std::size_t d = rank;
      while (d > 0 && ++corner[d - 1] == table[d - 1][static_cast<std::size_t>(coords[d - 1])].count) corner[--d] = 0;
      if (d == 0) break;
    }
    out = static_cast<float>(sum);
    // Next output element, row-major.
    for (std::size_t d = rank; d-- > 0;) {
      if (++coords[d] < plan.output_shape[d]) break;
      coords[d] = 0;
    }
  }
  return {y};
}

OpSchema schema(const std::string& name, decltype(OpSchema::infer) infer, decltype(OpSchema::reference) reference,
                const std::string& summary) {
  OpSchema s;
  s.name = name;
  s.min_inputs = 1;
  s.max_inputs = 1;
  s.infer = std::move(infer);
  s.reference = std::move(reference);
  s.summary = summary;
  return s;
}

}  // namespace

void register_resize_pad_ops(OpTable& table) {
  add_op(table, schema("Pad", infer_pad, reference_pad,
                       "pad by `pads` [begins..., ends...] (negative crops); `mode` constant/reflect/edge"));
  add_op(table, schema("Resize", infer_resize, reference_resize,
                       "nearest or N-linear resize to `sizes` (scale from `scales`), ONNX coordinate modes"));
}

}  // namespace kiln::graph::ops

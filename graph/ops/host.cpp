// The data-dependent ops: their output extents depend on input values
// (NonZero's count, NonMaxSuppression's selections, TopK with a k read from a
// tensor), so shape inference gives dynamic types (graph/ir.h) and they run on
// the host reference implementation, as graph breaks between compiled segments.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <string>

#include "graph/ops/ops.h"
#include "src/base/check.h"

namespace kiln::graph::ops {

namespace {

// ---- NonZero ------------------------------------------------------------------

std::vector<TensorType> infer_nonzero(const Node& node, std::span<const TensorType> in) {
  check_known_attributes(node, {});
  KILN_CHECK(!in[0].shape.empty(), ErrorKind::ShapeMismatch,
             "input must have rank >= 1, got " + describe("input", in[0]));
  return {dynamic_type(DType::i64, {static_cast<std::int64_t>(in[0].shape.size()), kDynamicDim})};
}

// True if element `index` of x is not zero (f16 +0 and -0 are both zero).
bool element_nonzero(const Tensor& x, std::size_t index) {
  switch (x.dtype()) {
    case DType::f32: return x.values<float>()[index] != 0.0f;
    case DType::f16:
    case DType::bf16: return (x.values<std::uint16_t>()[index] & 0x7fffu) != 0;
    case DType::i32: return x.values<std::int32_t>()[index] != 0;
    case DType::i64: return x.values<std::int64_t>()[index] != 0;
    case DType::u8:
    case DType::boolean: return x.values<std::uint8_t>()[index] != 0;
  }
  return false;
}

std::vector<Tensor> reference_nonzero(const Node&, std::span<const Tensor> in) {
  const Tensor& x = in[0];
  const Shape& shape = x.shape();
  const std::size_t rank = shape.size();
  // Row-major order of the hits, as numpy.nonzero gives them.
  std::vector<std::int64_t> hits;
  for (std::size_t i = 0; i < static_cast<std::size_t>(x.numel()); ++i)
    if (element_nonzero(x, i)) hits.push_back(static_cast<std::int64_t>(i));
  const auto count = static_cast<std::int64_t>(hits.size());
  Tensor out(DType::i64, {static_cast<std::int64_t>(rank), count});
  auto coords = out.values<std::int64_t>();
  for (std::int64_t h = 0; h < count; ++h) {
    std::int64_t rest = hits[h];
    for (std::size_t d = rank; d-- > 0;) {
      coords[d * count + h] = rest % shape[d];
      rest /= shape[d];
    }
  }
  return {out};
}

// ---- TopK ---------------------------------------------------------------------

struct TopKParams {
  std::int64_t axis = 0;
  bool largest = true;
  // kiln extension (builder models only; ONNX import refuses it): k is an
  // upper bound, so an axis shorter than k gives all its elements
  // (torchvision's min(k, n) on a data-dependent n). Otherwise, as in ONNX, a
  // k past the axis is an error.
  bool clamp_k = false;
  std::optional<std::int64_t> k;  // nullopt: read from the K input at run time
};

TopKParams topk_params(const Node& node, const TensorType& x, bool has_k_input) {
  check_known_attributes(node, {"k", "axis", "largest", "sorted", "clamp_k"});
  KILN_CHECK(x.dtype == DType::f32 || x.dtype == DType::i64 || x.dtype == DType::i32, ErrorKind::Unsupported,
             "TopK supports f32, i32 and i64 inputs, got " + describe("X", x));
  KILN_CHECK(!x.shape.empty(), ErrorKind::ShapeMismatch, "X must have rank >= 1, got " + describe("X", x));
  TopKParams p;
  p.axis = normalize_axis(node.attrs.get_int("axis", -1), static_cast<std::int64_t>(x.shape.size()), "axis");
  p.largest = get_flag(node, "largest", true);
  p.clamp_k = get_flag(node, "clamp_k", false);
  get_flag(node, "sorted", true);  // validated; results are always sorted
  KILN_CHECK(node.attrs.has("k") != has_k_input, ErrorKind::InvalidArgument,
             has_k_input ? "k is given both as attribute 'k' and as input K; give one"
                         : "needs k: the attribute 'k' or the input K");
  if (!has_k_input) p.k = node.attrs.get_int("k", 0);
  return p;
}

// The number of elements taken along an axis of `extent`: k itself, checked
// (ONNX: 0 <= k <= extent), or min(k, extent) with clamp_k. `source` names
// where k came from ("attribute 'k'", "input K").
std::int64_t topk_count(const TopKParams& p, std::int64_t k, std::int64_t extent, const std::string& source,
                        const TensorType& x) {
  KILN_CHECK(k >= 0, ErrorKind::InvalidArgument, source + " must not be negative, got k = " + std::to_string(k));
  if (p.clamp_k) return std::min(k, extent);
  KILN_CHECK(k <= extent, ErrorKind::InvalidArgument,
             source + " is k = " + std::to_string(k) + ", more than the " + std::to_string(extent) +
                 " elements along axis " + std::to_string(p.axis) + " of " + describe("X", x));
  return k;
}

std::vector<TensorType> infer_topk(const Node& node, std::span<const TensorType> in) {
  const bool has_k_input = has_input(node, 1);
  if (has_k_input)
    KILN_CHECK(in[1].dtype == DType::i64 && num_elements(in[1].shape) == 1 && !in[1].dynamic,
               ErrorKind::ShapeMismatch, "K must be one i64 value, got " + describe("K", in[1]));
  const TopKParams p = topk_params(node, in[0], has_k_input);
  Shape shape = in[0].shape;
  if (!p.k) {
    // The extent is the value of K: known only at run time.
    shape[p.axis] = kDynamicDim;
    return {dynamic_type(in[0].dtype, shape), dynamic_type(DType::i64, shape)};
  }
  shape[p.axis] = topk_count(p, *p.k, shape[p.axis], "attribute 'k'", in[0]);
  return {TensorType{in[0].dtype, shape}, TensorType{DType::i64, shape}};
}

// Element `index` of a numeric tensor as double (exact for the sizes kiln handles).
double element_value(const Tensor& x, std::size_t index) {
  switch (x.dtype()) {
    case DType::f32: return x.values<float>()[index];
    case DType::i32: return x.values<std::int32_t>()[index];
    case DType::i64: return static_cast<double>(x.values<std::int64_t>()[index]);
    default: break;
  }
  throw_error(ErrorKind::Internal, "element_value: unexpected dtype");
}

void set_element(Tensor& x, std::size_t index, double value) {
  switch (x.dtype()) {
    case DType::f32: x.values<float>()[index] = static_cast<float>(value); return;
    case DType::i32: x.values<std::int32_t>()[index] = static_cast<std::int32_t>(value); return;
    case DType::i64: x.values<std::int64_t>()[index] = static_cast<std::int64_t>(value); return;
    default: break;
  }
  throw_error(ErrorKind::Internal, "set_element: unexpected dtype");
}

std::vector<Tensor> reference_topk(const Node& node, std::span<const Tensor> in) {
  const Tensor& x = in[0];
  const bool has_k_input = in.size() > 1 && has_input(node, 1);
  const TopKParams p = topk_params(node, {x.dtype(), x.shape()}, has_k_input);
  const Shape& shape = x.shape();
  const std::int64_t extent = shape[p.axis];
  const std::int64_t k = has_k_input ? topk_count(p, in[1].values<std::int64_t>()[0], extent, "input K", {x.dtype(), shape})
                                     : topk_count(p, *p.k, extent, "attribute 'k'", {x.dtype(), shape});
  Shape out_shape = shape;
  out_shape[p.axis] = k;
  Tensor values(x.dtype(), out_shape), indices(DType::i64, out_shape);
  auto index_out = indices.values<std::int64_t>();
  const std::int64_t inner = num_elements(Shape(shape.begin() + p.axis + 1, shape.end()));
  const std::int64_t outer = num_elements(Shape(shape.begin(), shape.begin() + p.axis));
  std::vector<std::int64_t> order(static_cast<std::size_t>(extent));
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      auto at = [&](std::int64_t e) { return static_cast<std::size_t>((o * extent + e) * inner + i); };
      std::iota(order.begin(), order.end(), 0);
      // Ties keep the lower index first (ONNX); NaN counts as the largest value.
      std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
        const double va = element_value(x, at(a)), vb = element_value(x, at(b));
        if (std::isnan(va) || std::isnan(vb)) return p.largest ? std::isnan(va) && !std::isnan(vb)
                                                               : !std::isnan(va) && std::isnan(vb);
        return p.largest ? va > vb : va < vb;
      });
      for (std::int64_t e = 0; e < k; ++e) {
        const auto dst = static_cast<std::size_t>((o * k + e) * inner + i);
        set_element(values, dst, element_value(x, at(order[e])));
        index_out[dst] = order[e];
      }
    }
  return {values, indices};
}

// ---- NonMaxSuppression ----------------------------------------------------------

struct NmsParams {
  bool center_point_box = false;
  std::int64_t max_per_class = 0;
  float iou_threshold = 0.0f;
  std::optional<float> score_threshold;
};

void check_nms_types(const Node& node, std::span<const TensorType> in) {
  require_f32("boxes", in[0]);
  require_f32("scores", in[1]);
  require_rank("boxes", in[0], 3);
  require_rank("scores", in[1], 3);
  KILN_CHECK(in[0].shape[2] == 4, ErrorKind::ShapeMismatch,
             "boxes must be [batch, boxes, 4], got " + describe("boxes", in[0]));
  KILN_CHECK(in[0].shape[0] == in[1].shape[0] && in[0].shape[1] == in[1].shape[2], ErrorKind::ShapeMismatch,
             "scores must be [batch, classes, boxes] for " + describe("boxes", in[0]) + ", got " +
                 describe("scores", in[1]));
  const char* names[] = {"max_output_boxes_per_class", "iou_threshold", "score_threshold"};
  const DType dtypes[] = {DType::i64, DType::f32, DType::f32};
  for (std::size_t i = 2; i < in.size(); ++i) {
    if (!has_input(node, i)) continue;
    KILN_CHECK(in[i].dtype == dtypes[i - 2] && num_elements(in[i].shape) == 1, ErrorKind::ShapeMismatch,
               std::string(names[i - 2]) + " must be one " + std::string(dtype_name(dtypes[i - 2])) +
                   " value, got " + describe(names[i - 2], in[i]));
  }
}

// Each parameter comes from its input when given, else from the attribute of
// the same name (kiln's form for constants), else the ONNX default.
NmsParams nms_params(const Node& node, std::span<const Tensor> in) {
  check_known_attributes(node, {"center_point_box", "max_output_boxes_per_class", "iou_threshold", "score_threshold"});
  NmsParams p;
  p.center_point_box = get_flag(node, "center_point_box", false);
  p.max_per_class = has_input(node, 2) && in.size() > 2 ? in[2].values<std::int64_t>()[0]
                                                       : node.attrs.get_int("max_output_boxes_per_class", 0);
  p.iou_threshold = has_input(node, 3) && in.size() > 3 ? in[3].values<float>()[0]
                                                       : static_cast<float>(node.attrs.get_float("iou_threshold", 0.0));
  if (has_input(node, 4) && in.size() > 4) p.score_threshold = in[4].values<float>()[0];
  else if (node.attrs.has("score_threshold"))
    p.score_threshold = static_cast<float>(node.attrs.get_float("score_threshold", 0.0));
  KILN_CHECK(p.iou_threshold >= 0.0f && p.iou_threshold <= 1.0f, ErrorKind::InvalidArgument,
             "iou_threshold must be in [0, 1], got " + std::to_string(p.iou_threshold));
  return p;
}

std::vector<TensorType> infer_nms(const Node& node, std::span<const TensorType> in) {
  check_known_attributes(node, {"center_point_box", "max_output_boxes_per_class", "iou_threshold", "score_threshold"});
  get_flag(node, "center_point_box", false);
  check_nms_types(node, in);
  return {dynamic_type(DType::i64, {kDynamicDim, 3})};
}

struct Corners {
  double y1, x1, y2, x2;
};

Corners box_corners(std::span<const float> box, bool center_point_box) {
  if (center_point_box) {
    // [x_center, y_center, width, height]
    return {box[1] - box[3] / 2.0, box[0] - box[2] / 2.0, box[1] + box[3] / 2.0, box[0] + box[2] / 2.0};
  }
  // [y1, x1, y2, x2], either diagonal.
  return {std::min<double>(box[0], box[2]), std::min<double>(box[1], box[3]), std::max<double>(box[0], box[2]),
          std::max<double>(box[1], box[3])};
}

double iou(const Corners& a, const Corners& b) {
  const double h = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
  const double w = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  if (h <= 0.0 || w <= 0.0) return 0.0;
  const double inter = h * w;
  const double uni = (a.y2 - a.y1) * (a.x2 - a.x1) + (b.y2 - b.y1) * (b.x2 - b.x1) - inter;
  return uni <= 0.0 ? 0.0 : inter / uni;
}

// Kept boxes indexed for the question greedy NMS asks of every candidate: does
// any kept box overlap it by IoU > threshold? IoU > t >= 0 needs a positive
// overlap on x, so only kept boxes whose x1 lies in (x1 - widest, x2) can
// answer yes; they are found in a map ordered by x1 instead of by scanning all
// kept boxes (torchvision's batched NMS offsets each class far apart, so a scan
// is quadratic in the thousands of boxes a detector keeps). Boxes with a
// non-finite corner cannot be ordered and are checked against everything, so
// the result is exactly the exhaustive scan's.
class KeptBoxes {
 public:
  explicit KeptBoxes(const std::vector<Corners>& corners, float iou_threshold)
      : corners_(corners), threshold_(iou_threshold) {}

  bool suppresses(std::int64_t i) const {
    const Corners& box = corners_[static_cast<std::size_t>(i)];
    const auto overlaps = [&](std::int64_t j) { return iou(box, corners_[static_cast<std::size_t>(j)]) > threshold_; };
    if (std::any_of(non_finite_.begin(), non_finite_.end(), overlaps)) return true;
    if (!finite(box)) {
      for (const auto& [x1, j] : by_x1_)
        if (overlaps(j)) return true;
      return false;
    }
    // The margin covers rounding in the subtraction: a bound too low only costs a check.
    const double lowest_x1 = box.x1 - widest_ - (std::abs(box.x1) + widest_) * 1e-12;
    for (auto it = by_x1_.upper_bound(lowest_x1); it != by_x1_.end() && it->first < box.x2; ++it)
      if (overlaps(it->second)) return true;
    return false;
  }

  void add(std::int64_t i) {
    const Corners& box = corners_[static_cast<std::size_t>(i)];
    if (!finite(box)) {
      non_finite_.push_back(i);
      return;
    }
    by_x1_.emplace(box.x1, i);
    widest_ = std::max(widest_, box.x2 - box.x1);
  }

 private:
  static bool finite(const Corners& c) {
    return std::isfinite(c.x1) && std::isfinite(c.x2) && std::isfinite(c.y1) && std::isfinite(c.y2);
  }

  const std::vector<Corners>& corners_;
  float threshold_;
  std::multimap<double, std::int64_t> by_x1_;
  std::vector<std::int64_t> non_finite_;
  double widest_ = 0.0;
};

// ONNX's greedy selection: candidates in score order, each kept unless a kept
// box overlaps it by more than the threshold, at most max_per_class kept.
std::vector<std::int64_t> greedy_select(const std::vector<Corners>& corners, const std::vector<std::int64_t>& candidates,
                                        const NmsParams& p) {
  std::vector<std::int64_t> kept;
  KeptBoxes index(corners, p.iou_threshold);
  for (std::int64_t i : candidates) {
    if (static_cast<std::int64_t>(kept.size()) >= p.max_per_class) break;
    if (index.suppresses(i)) continue;
    kept.push_back(i);
    index.add(i);
  }
  return kept;
}

std::vector<Tensor> reference_nms(const Node& node, std::span<const Tensor> in) {
  const NmsParams p = nms_params(node, in);
  const Tensor& boxes = in[0];
  const Tensor& scores = in[1];
  const std::int64_t batches = boxes.shape()[0], count = boxes.shape()[1], classes = scores.shape()[1];
  auto box_values = boxes.values<float>();
  auto score_values = scores.values<float>();
  std::vector<std::int64_t> selected;  // triples [batch, class, box]
  for (std::int64_t b = 0; b < batches; ++b) {
    std::vector<Corners> corners;
    for (std::int64_t i = 0; i < count; ++i)
      corners.push_back(box_corners(box_values.subspan(static_cast<std::size_t>((b * count + i) * 4), 4),
                                    p.center_point_box));
    for (std::int64_t c = 0; c < classes; ++c) {
      auto class_scores = score_values.subspan(static_cast<std::size_t>((b * classes + c) * count),
                                               static_cast<std::size_t>(count));
      std::vector<std::int64_t> candidates;
      for (std::int64_t i = 0; i < count; ++i)
        if (!p.score_threshold || class_scores[i] > *p.score_threshold) candidates.push_back(i);
      // Highest score first; equal scores keep the lower box index first.
      std::stable_sort(candidates.begin(), candidates.end(),
                       [&](std::int64_t x, std::int64_t y) { return class_scores[x] > class_scores[y]; });
      const std::vector<std::int64_t> kept = greedy_select(corners, candidates, p);
      for (std::int64_t i : kept) selected.insert(selected.end(), {b, c, i});
    }
  }
  const auto rows = static_cast<std::int64_t>(selected.size() / 3);
  return {Tensor::from_i64({rows, 3}, std::move(selected))};
}

}  // namespace

void register_host_ops(OpTable& table) {

  OpSchema nonzero;
  nonzero.name = "NonZero";
  nonzero.infer = infer_nonzero;
  nonzero.reference = reference_nonzero;
  nonzero.summary = "indices of the non-zero elements, i64 [rank, count] (count depends on data)";
  add_op(table, nonzero);

  OpSchema topk;
  topk.name = "TopK";
  topk.min_inputs = 1;
  topk.max_inputs = 2;
  topk.num_outputs = 2;
  topk.infer = infer_topk;
  topk.reference = reference_topk;
  topk.summary = "the k largest (or smallest) values along `axis` and their indices; k from attribute 'k' or input K "
                 "(0 <= k <= the axis extent; kiln's clamp_k=1 takes min(k, extent) instead)";
  add_op(table, topk);

  OpSchema nms;
  nms.name = "NonMaxSuppression";
  nms.min_inputs = 2;
  nms.max_inputs = 5;
  nms.infer = infer_nms;
  nms.reference = reference_nms;
  nms.summary =
      "greedy per-class box selection by IoU, i64 [selected, 3] of (batch, class, box) (count depends on data)";
  add_op(table, nms);
}

}  // namespace kiln::graph::ops

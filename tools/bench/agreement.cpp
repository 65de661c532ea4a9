#include "agreement.h"
#include "format.h"
#include "src/base/check.h"

#include <kiln/error.h>
#include <kiln/float16.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::tools::bench {

double default_tolerance(const std::string& dtype) {
  if (dtype == "f16") return 4 * float_epsilon(DType::f16);
  if (dtype == "bf16") return 4 * float_epsilon(DType::bf16);
  return 1e-3;
}
namespace {

constexpr double kAbsoluteFloor = 1e-6;
constexpr std::size_t kDetectionsNamedInProblem = 3;
// Above this IoU two boxes are one candidate (moved), not two rival candidates.
constexpr double kSameBoxIoU = 0.9;

std::string describe(const Tensor& t) { return std::string(dtype_name(t.dtype())) + shape_str(t.shape()); }

bool is_integer(DType dtype) { return dtype == DType::i64 || dtype == DType::i32; }

// |expected - got|, with a NaN on one side only (or an infinity) as the worst disagreement.
double abs_diff(double expected, double got) {
  if (expected == got || (std::isnan(expected) && std::isnan(got))) return 0;
  const double diff = std::fabs(expected - got);
  return std::isfinite(diff) ? diff : std::numeric_limits<double>::infinity();
}

// Element-wise difference of f32 outputs, accumulated over outputs.
struct ElementwiseDiff {
  double max_abs_diff = 0;
  double scale = 0;
};

void accumulate_elementwise(const Tensor& r, const Tensor& c, ElementwiseDiff& d) {
  const auto rv = r.values<float>(), cv = c.values<float>();
  for (std::size_t k = 0; k < rv.size(); ++k) {
    if (std::isfinite(rv[k])) d.scale = std::max(d.scale, std::fabs(static_cast<double>(rv[k])));
    d.max_abs_diff = std::max(d.max_abs_diff, abs_diff(rv[k], cv[k]));
  }
}

std::string detection_text(const ListedDetection& d, const char* list) {
  return format("%s #%zu (label %lld, score %.7g, box %.4g %.4g %.4g %.4g)", list, d.rank,
                static_cast<long long>(d.label), static_cast<double>(d.score), static_cast<double>(d.box[0]),
                static_cast<double>(d.box[1]), static_cast<double>(d.box[2]), static_cast<double>(d.box[3]));
}

double intersection_over_union(const float* a, const float* b) {
  const double width = std::min(a[2], b[2]) - std::max(a[0], b[0]);
  const double height = std::min(a[3], b[3]) - std::max(a[1], b[1]);
  if (width <= 0 || height <= 0) return 0;
  const double intersection = width * height;
  const double area_a = (static_cast<double>(a[2]) - a[0]) * (static_cast<double>(a[3]) - a[1]);
  const double area_b = (static_cast<double>(b[2]) - b[0]) * (static_cast<double>(b[3]) - b[1]);
  const double union_area = area_a + area_b - intersection;
  return union_area > 0 ? intersection / union_area : 0;
}

double lowest_score(const std::vector<ListedDetection>& list) {
  double lowest = std::numeric_limits<double>::infinity();
  for (const ListedDetection& d : list) lowest = std::min(lowest, static_cast<double>(d.score));
  return lowest;
}

// Compares two detection lists as sets (see compare_outputs); adds to `a`.
void compare_detections(const std::vector<ListedDetection>& reference, const std::vector<ListedDetection>& candidate,
                        double relative_tolerance, Agreement& a, std::string& problems) {
  double box_scale = 0, score_scale = 0;
  for (const ListedDetection& d : reference) {
    for (float v : d.box)
      if (std::isfinite(v)) box_scale = std::max(box_scale, std::fabs(static_cast<double>(v)));
    if (std::isfinite(d.score)) score_scale = std::max(score_scale, std::fabs(static_cast<double>(d.score)));
  }
  const double box_tolerance = relative_tolerance * box_scale + kAbsoluteFloor;
  const double score_tolerance = relative_tolerance * score_scale + kAbsoluteFloor;
  a.scale = std::max({a.scale, box_scale, score_scale});

  // Greedy: each candidate takes the closest-scored unmatched reference
  // detection within tolerance. NMS leaves no two same-label boxes that
  // close, so the choice is never ambiguous in practice.
  std::vector<bool> reference_matched(reference.size(), false);
  std::vector<const ListedDetection*> unmatched_candidates;
  for (const ListedDetection& c : candidate) {
    std::size_t best = reference.size();
    double best_score_diff = std::numeric_limits<double>::infinity(), best_box_diff = 0;
    for (std::size_t i = 0; i < reference.size(); ++i) {
      const ListedDetection& r = reference[i];
      if (reference_matched[i] || r.label != c.label) continue;
      double box_diff = 0;
      for (int k = 0; k < 4; ++k) box_diff = std::max(box_diff, abs_diff(r.box[k], c.box[k]));
      const double score_diff = abs_diff(r.score, c.score);
      if (box_diff <= box_tolerance && score_diff <= score_tolerance && score_diff < best_score_diff) {
        best = i;
        best_score_diff = score_diff;
        best_box_diff = box_diff;
      }
    }
    if (best == reference.size()) {
      unmatched_candidates.push_back(&c);
      continue;
    }
    reference_matched[best] = true;
    a.max_abs_diff = std::max({a.max_abs_diff, best_score_diff, best_box_diff});
  }

  std::vector<const ListedDetection*> unmatched_references;
  for (std::size_t i = 0; i < reference.size(); ++i)
    if (!reference_matched[i]) unmatched_references.push_back(&reference[i]);

  // A tie-break: candidates whose scores tie exactly in one run and differ
  // by rounding in the other can change which of them NMS keeps (and so how
  // many survive, which moves the list's cut-off), so each list holds tied
  // detections the other lacks. Such a detection is excused when the other
  // list lacks one of the same label and score too; it must be a distinct
  // candidate (a different box): the same box moved a little is a wrong box.
  auto has_tied_rival = [&](const ListedDetection& d, const std::vector<const ListedDetection*>& others) {
    return std::any_of(others.begin(), others.end(), [&](const ListedDetection* o) {
      return o->label == d.label && abs_diff(o->score, d.score) <= score_tolerance &&
             intersection_over_union(o->box, d.box) < kSameBoxIoU;
    });
  };
  std::vector<const ListedDetection*> unexcused_references, unexcused_candidates;
  for (const ListedDetection* r : unmatched_references) {
    if (has_tied_rival(*r, unmatched_candidates)) ++a.tied_detections;
    else unexcused_references.push_back(r);
  }
  for (const ListedDetection* c : unmatched_candidates) {
    if (has_tied_rival(*c, unmatched_references)) ++a.tied_detections;
    else unexcused_candidates.push_back(c);
  }

  // A tie at the cut-off: a detection among the lowest-scored of its own list
  // that scores where the other list stops (its k-th score or the threshold).
  const double reference_lowest = lowest_score(reference), candidate_lowest = lowest_score(candidate);
  auto is_tie_at_cutoff = [&](const ListedDetection& d, double own_lowest, double other_lowest, bool other_empty) {
    const double score = d.score;
    return score - own_lowest <= score_tolerance && (other_empty || std::fabs(score - other_lowest) <= score_tolerance);
  };
  std::vector<std::string> real;
  for (const ListedDetection* r : unexcused_references) {
    if (is_tie_at_cutoff(*r, reference_lowest, candidate_lowest, candidate.empty())) ++a.tied_detections;
    else real.push_back(detection_text(*r, "eager") + " has no compiled match");
  }
  for (const ListedDetection* c : unexcused_candidates) {
    if (is_tie_at_cutoff(*c, candidate_lowest, reference_lowest, reference.empty())) ++a.tied_detections;
    else real.push_back(detection_text(*c, "compiled") + " has no eager match");
  }
  if (real.empty()) return;
  std::string text = format("detections differ beyond ties (box tolerance %.3g, score tolerance %.3g): ",
                            box_tolerance, score_tolerance) +
                     std::to_string(real.size()) + " unmatched, e.g. ";
  for (std::size_t i = 0; i < std::min(real.size(), kDetectionsNamedInProblem); ++i) text += (i ? "; " : "") + real[i];
  problems += (problems.empty() ? "" : "; ") + text;
  a.max_abs_diff = std::numeric_limits<double>::infinity();
}

}  // namespace

std::optional<DetectionList> find_detection_list(const std::string& task, const std::vector<TensorSpec>& outputs) {
  if (task != "detection") return std::nullopt;
  auto find = [&](const char* name, DType dtype, std::size_t rank) -> std::optional<std::size_t> {
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      const TensorSpec& o = outputs[i];
      const bool type_fits = dtype == DType::i64 ? is_integer(o.dtype) : o.dtype == dtype;
      if (o.name == name && type_fits && o.shape.size() == rank && o.shape[0] < 0) return i;
    }
    return std::nullopt;
  };
  const auto boxes = find("boxes", DType::f32, 2), scores = find("scores", DType::f32, 1),
             labels = find("labels", DType::i64, 1);
  if (!boxes || !scores || !labels || outputs[*boxes].shape[1] != 4) return std::nullopt;
  return DetectionList{*boxes, *scores, *labels};
}

std::string detection_list_problem(const std::vector<Tensor>& outputs, const DetectionList& list, const char* whose) {
  const Tensor& boxes = outputs[list.boxes];
  const Tensor& scores = outputs[list.scores];
  const Tensor& labels = outputs[list.labels];
  const bool ok = boxes.dtype() == DType::f32 && boxes.rank() == 2 && boxes.shape()[1] == 4 &&
                  scores.dtype() == DType::f32 && scores.rank() == 1 && is_integer(labels.dtype()) &&
                  labels.rank() == 1 && scores.shape()[0] == boxes.shape()[0] && labels.shape()[0] == boxes.shape()[0];
  if (ok) return "";
  return std::string(whose) + "'s detection list is boxes " + describe(boxes) + ", scores " + describe(scores) +
         ", labels " + describe(labels) + " (expected f32[N, 4], f32[N] and integer [N])";
}

std::vector<ListedDetection> read_detections(const std::vector<Tensor>& outputs, const DetectionList& list) {
  const auto b = outputs[list.boxes].values<float>();
  const auto s = outputs[list.scores].values<float>();
  const Tensor& labels = outputs[list.labels];
  std::vector<ListedDetection> detections(s.size());
  for (std::size_t i = 0; i < detections.size(); ++i) {
    std::copy_n(b.begin() + static_cast<std::ptrdiff_t>(4 * i), 4, detections[i].box);
    detections[i].score = s[i];
    detections[i].label =
        labels.dtype() == DType::i64 ? labels.values<std::int64_t>()[i] : labels.values<std::int32_t>()[i];
    detections[i].rank = i;
  }
  return detections;
}

Agreement compare_outputs(const std::vector<Tensor>& reference, const std::vector<Tensor>& candidate,
                          double relative_tolerance, const std::optional<DetectionList>& detections) {
  Agreement a;
  if (reference.size() != candidate.size()) {
    a.matches = false;
    a.problem = std::to_string(candidate.size()) + " outputs where eager gives " + std::to_string(reference.size());
    return a;
  }
  if (detections) {
    KILN_CHECK(std::max({detections->boxes, detections->scores, detections->labels}) < reference.size(),
               ErrorKind::Internal, "the detection list names an output the model does not have");
  }
  auto in_detection_list = [&](std::size_t i) {
    return detections && (i == detections->boxes || i == detections->scores || i == detections->labels);
  };
  std::string problems;
  auto note = [&](const std::string& text) { problems += (problems.empty() ? "" : "; ") + text; };
  ElementwiseDiff elementwise;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    if (in_detection_list(i)) continue;
    const Tensor& r = reference[i];
    const Tensor& c = candidate[i];
    const std::string which = "output " + std::to_string(i);
    if (r.dtype() != c.dtype() || r.shape() != c.shape()) {
      note(which + " is " + describe(c) + " where eager gives " + describe(r));
      continue;
    }
    if (r.dtype() != DType::f32) {
      const auto rb = r.bytes(), cb = c.bytes();
      if (!std::equal(rb.begin(), rb.end(), cb.begin(), cb.end())) note(which + " (" + describe(r) + ") differs");
      continue;
    }
    accumulate_elementwise(r, c, elementwise);
  }
  const double allowed = relative_tolerance * elementwise.scale + kAbsoluteFloor;
  if (elementwise.max_abs_diff > allowed) {
    note(format("max |eager - compiled| = %.3g exceeds %.3g (tolerance %.3g x largest |output| %.3g)",
                elementwise.max_abs_diff, allowed, relative_tolerance, elementwise.scale));
  }
  a.max_abs_diff = elementwise.max_abs_diff;
  a.scale = elementwise.scale;

  if (detections) {
    const std::string reference_problem = detection_list_problem(reference, *detections, "eager");
    const std::string candidate_problem = detection_list_problem(candidate, *detections, "compiled");
    if (!reference_problem.empty()) note(reference_problem);
    else if (!candidate_problem.empty()) note(candidate_problem);
    else
      compare_detections(
          read_detections(reference, *detections), read_detections(candidate, *detections),
          relative_tolerance, a, problems);
  }
  a.matches = problems.empty();
  a.problem = problems;
  return a;
}

}  // namespace kiln::tools::bench

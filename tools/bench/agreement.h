// Does a compiled model's output match eager's? A benchmark of wrong answers
// is worthless, so every compiled cell is checked against eager's output on
// the same input.
#pragma once

#include <kiln/model.h>
#include <kiln/tensor.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::tools::bench {

// The default allowed max |compiled - eager| relative to the largest |eager
// output| for a model run in `dtype` (--dtype: "model", "f16", "bf16"):
// 1e-3 in f32; four units of the 16-bit type's epsilon (2^-10, 2^-7)
// otherwise, since compiled kernels skip the rounding eager's make between
// fused ops (docs/precision.md).
double default_tolerance(const std::string& dtype);

struct Agreement {
  bool matches = true;
  double max_abs_diff = 0;  // over every f32 output (infinity for a NaN where eager has a number)
  double scale = 0;         // the largest |reference| over every f32 output
  int tied_detections = 0;  // detections in one list only, excused as ties (see compare_outputs)
  std::string problem;      // what differs, when !matches
};

// Which outputs (by position) form a detector's final detection list: N
// detections as boxes f32[N, 4], scores f32[N] and labels (integer) [N],
// where N depends on the values (score threshold, top-k, NMS), so which
// detections are kept can change with rounding when scores are nearly tied.
struct DetectionList {
  std::size_t boxes = 0;
  std::size_t scores = 0;
  std::size_t labels = 0;
};

// The detection list among a model's outputs: task "detection" and outputs
// named "boxes", "scores" and "labels" of those types, with a data-dependent
// (unknown, < 0) leading extent. Fixed-size detector outputs (DETR's per-query
// logits and boxes) are not a list: they are compared element by element.
std::optional<DetectionList> find_detection_list(const std::string& task, const std::vector<TensorSpec>& outputs);

// Why the list's tensors in `outputs` are not boxes f32[N, 4], scores f32[N]
// and integer labels [N], naming `whose` outputs they are; "" if they are.
std::string detection_list_problem(const std::vector<Tensor>& outputs, const DetectionList& list, const char* whose);

struct ListedDetection {
  float box[4];
  float score;
  std::int64_t label;
  std::size_t rank;  // position in its list
};

// The detections of a list whose tensors detection_list_problem accepts, in list order.
std::vector<ListedDetection> read_detections(const std::vector<Tensor>& outputs, const DetectionList& list);

// Outputs agree when counts, dtypes and shapes are equal, non-f32 outputs are
// bit-identical, and max |reference - candidate| <= relative_tolerance *
// scale + 1e-6 (the absolute floor keeps all-zero outputs from demanding
// exact equality).
//
// A detection list (if given) is compared as a set instead: every candidate
// detection must match a distinct reference detection of the same label
// whose box coordinates and score each differ by at most relative_tolerance
// x the largest reference coordinate (score) + 1e-6, in any order. A
// detection found in one list only is excused as a tie only when
//  - the other list also lacks one of its own of the same label, a score
//    within that tolerance and a distinct box (IoU < 0.9): a tie-break,
//    where exactly tied scores in one run, split by rounding in the other,
//    change which candidates NMS keeps (and how many: the cut-off moves); or
//  - its score is within that tolerance of both lists' lowest score: the
//    cut-off (k-th score or score threshold) where a near-tie decides what
//    is kept.
// Anything else fails: a missing or extra confident detection, a box off by
// more than the tolerance, a changed score or label. (A box moved far while
// keeping exactly a tied score cannot be told from a swap.)
Agreement compare_outputs(const std::vector<Tensor>& reference, const std::vector<Tensor>& candidate,
                          double relative_tolerance, const std::optional<DetectionList>& detections = std::nullopt);

}  // namespace kiln::tools::bench

// The order a site's candidates are measured in when the budget may end the
// search early: the heuristic's knobs first, then, alternately, the
// candidate with the most field values not yet measured, the farthest from
// everything measured among equals (exploring: every value of every knob,
// such as the subgroup path when the heuristic took the register path, or
// another convolution algorithm, is tried early rather than by chance), and
// a neighbour (one field different) of the fastest so far (climbing; at
// first the heuristic's neighbours).
// Ties fall to the list's order (candidates.h: seeded, the same every run),
// so the same timings give the same path.
#pragma once

#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kiln::tune {

class CandidateSearch {
 public:
  // `knobs` in list order; [0] is the heuristic's.
  explicit CandidateSearch(std::vector<std::string> knobs);

  // The next candidate to measure; nullopt when every one has been.
  std::optional<std::size_t> next();

  // Records that candidate `index` was measured: its median, or nullopt when
  // it failed (it never becomes the best).
  void measured(std::size_t index, std::optional<double> median_ms);

  std::optional<std::size_t> best() const { return best_; }

 private:
  std::size_t distance(std::size_t a, std::size_t b) const;
  std::optional<std::size_t> unmeasured_neighbour_of(std::size_t index) const;

  std::vector<std::string> knobs_;
  std::vector<std::set<std::string>> fields_;
  std::vector<bool> measured_;
  std::vector<std::size_t> nearest_measured_;  // per candidate: distance to the closest measured one
  std::set<std::string> seen_fields_;          // every field value of the measured candidates
  std::size_t measured_count_ = 0;
  std::size_t steps_after_heuristic_ = 0;
  std::optional<std::size_t> best_;
  double best_ms_ = 0;
};

// A knob text's fields: "8x4_k4_p8_wg64_v4" -> {"m8", "n4", "k4", "p8", "wg64", "v4"};
// "direct:c8_w8_wg64" -> {"algorithm=direct", "c8", "w8", "wg64"}.
std::set<std::string> knob_fields(const std::string& knobs);

}  // namespace kiln::tune

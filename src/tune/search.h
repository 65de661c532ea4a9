// The order a site's candidates are measured in when the budget may end the
// search early: the heuristic's knobs first; then one candidate of each
// family not yet measured (a family: the candidates with the same set of
// knobs, such as the subgroup path or a convolution algorithm; the first in
// list order, where candidates.h puts each family's head), so that a short
// budget still compares the ways of computing the kernel; then, alternately,
// a neighbour (one field different) of the fastest so far (climbing) and the
// candidate nearest to the fastest that has a knob value never measured
// (exploring: every value of every knob is tried early rather than by
// chance). Ties fall to the list's order (candidates.h: seeded, the same
// every run), so the same timings give the same path.
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
  std::vector<std::string> families_;
  std::vector<bool> measured_;
  std::set<std::string> seen_fields_;          // every field value of the measured candidates
  std::size_t measured_count_ = 0;
  std::set<std::string> measured_families_;
  std::size_t steps_after_families_ = 0;
  std::optional<std::size_t> best_;
  double best_ms_ = 0;
};

// A knob text's fields: "8x4_k4_p8_wg64_v4" -> {"m8", "n4", "k4", "p8", "wg64", "v4"};
// "direct:c8_w8_wg64" -> {"algorithm=direct", "c8", "w8", "wg64"}.
std::set<std::string> knob_fields(const std::string& knobs);

// The knobs a text sets, without their values: its family.
// "8x16_k1_p1_wg64_v4_sg8_tex" -> "k m n p sg tex v wg"; "direct:c8_w8_wg64" -> "algorithm=direct c w wg".
std::string knob_family(const std::string& knobs);

}  // namespace kiln::tune

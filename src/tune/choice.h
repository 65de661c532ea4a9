// The autotuner's statistics and its choice among measured candidates: a
// fixed rule on the timings alone, so the same measurements always choose
// the same kernel.
#pragma once

#include "src/tune/database.h"

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace kiln::tune {

// The median of `times` and their relative spread, (p75 - p25) / median
// (quartiles by linear interpolation); 0 and 0 when empty.
struct TimeSummary {
  double median = 0;
  double spread = 0;
};
TimeSummary summarize(std::vector<double> times);

// Below this relative difference two medians are a tie whatever the spreads say.
inline constexpr double kNoiseFloor = 0.02;

// The noise between two measured candidates: the larger spread, at least `floor`.
double noise_between(const CandidateResult& a, const CandidateResult& b, double floor = kNoiseFloor);

struct Choice {
  std::size_t index = 0;  // into the candidates; 0 (the heuristic's) when nothing beat it
  std::string reason;     // one line: why this one
};

// `candidates` in search order, the heuristic's first. Among the candidates
// whose status is ok, the fastest median is the best; the candidates within
// the best's own noise (its spread, at least `floor`) are ties, and the first
// of them in search order wins (the heuristic's, when it is one). The best's
// noise alone, because a candidate whose repeats scatter widely must not
// tie with a clear best by its own scatter and then lose to the heuristic
// in its stead. That winner replaces the heuristic's choice
// only if the heuristic's median exceeds the winner's by more than the noise
// between the two. A heuristic that did not measure ok loses to any candidate
// that did; with none ok the heuristic's stays.
Choice choose(std::span<const CandidateResult> candidates, double floor = kNoiseFloor);

}  // namespace kiln::tune

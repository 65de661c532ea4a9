#include "src/tune/choice.h"

#include <algorithm>
#include <cstdio>
#include <optional>

namespace kiln::tune {

namespace {

double quantile(const std::vector<double>& sorted, double q) {
  const double position = q * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<std::size_t>(position);
  const std::size_t above = std::min(below + 1, sorted.size() - 1);
  const double fraction = position - static_cast<double>(below);
  return sorted[below] + (sorted[above] - sorted[below]) * fraction;
}

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", fraction * 100);
  return text;
}

std::string ms(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g ms", value);
  return text;
}

}  // namespace

TimeSummary summarize(std::vector<double> times) {
  if (times.empty()) return {};
  std::sort(times.begin(), times.end());
  TimeSummary summary;
  summary.median = quantile(times, 0.5);
  if (summary.median > 0) summary.spread = (quantile(times, 0.75) - quantile(times, 0.25)) / summary.median;
  return summary;
}

double noise_between(const CandidateResult& a, const CandidateResult& b, double floor) {
  return std::max({a.spread, b.spread, floor});
}

Choice choose(std::span<const CandidateResult> candidates, double floor) {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < candidates.size(); ++i)
    if (candidates[i].status == CandidateStatus::ok && (!best || candidates[i].median_ms < candidates[*best].median_ms))
      best = i;
  if (!best) return {0, "no candidate measured ok: the heuristic's choice stays"};
  // The first candidate in search order that ties with the best.
  std::size_t winner = *best;
  const double tie = std::max(candidates[*best].spread, floor);
  for (std::size_t i = 0; i < *best; ++i) {
    const CandidateResult& c = candidates[i];
    if (c.status == CandidateStatus::ok && c.median_ms <= candidates[*best].median_ms * (1 + tie)) {
      winner = i;
      break;
    }
  }
  if (winner == 0) return {0, "the heuristic's choice is within the noise of the fastest"};
  const CandidateResult& heuristic = candidates.front();
  const CandidateResult& chosen = candidates[winner];
  if (heuristic.status != CandidateStatus::ok)
    return {winner, "the heuristic's choice did not measure ok; " + chosen.knobs + " is the fastest (" +
                        ms(chosen.median_ms) + ")"};
  const double noise = noise_between(heuristic, chosen, floor);
  if (heuristic.median_ms <= chosen.median_ms * (1 + noise))
    return {0, "the fastest, " + chosen.knobs + " (" + ms(chosen.median_ms) + "), is within the noise (" +
                   percent(noise) + ") of the heuristic's " + ms(heuristic.median_ms)};
  return {winner, chosen.knobs + " (" + ms(chosen.median_ms) + ") beats the heuristic's " + ms(heuristic.median_ms) +
                      " by more than the noise (" + percent(noise) + ")"};
}

}  // namespace kiln::tune

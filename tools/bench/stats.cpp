#include "stats.h"

#include "src/base/check.h"

#include <kiln/error.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace kiln::tools::bench {

Summary summarize(std::span<const double> samples) {
  KILN_CHECK(!samples.empty(), ErrorKind::InvalidArgument, "cannot summarise an empty set of timings");
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  Summary s;
  s.count = sorted.size();
  // Summing in ascending order keeps the rounding error small for long runs.
  double sum = 0;
  for (double v : sorted) sum += v;
  s.mean = sum / static_cast<double>(s.count);
  const std::size_t mid = s.count / 2;
  s.median = (s.count % 2 == 1) ? sorted[mid] : 0.5 * (sorted[mid - 1] + sorted[mid]);
  s.min = sorted.front();
  s.max = sorted.back();
  return s;
}

double geometric_mean(std::span<const double> values) {
  KILN_CHECK(!values.empty(), ErrorKind::InvalidArgument, "cannot take the geometric mean of no values");
  double log_sum = 0;
  for (double v : values) {
    KILN_CHECK(v > 0 && std::isfinite(v), ErrorKind::InvalidArgument,
               "the geometric mean needs finite positive values, got " + std::to_string(v));
    log_sum += std::log(v);
  }
  return std::exp(log_sum / static_cast<double>(values.size()));
}

}  // namespace kiln::tools::bench

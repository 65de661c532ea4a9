// Summaries of repeated timings, as `kiln bench` reports them.
#pragma once

#include <cstddef>
#include <span>

namespace kiln::tools::bench {

struct Summary {
  std::size_t count = 0;
  double mean = 0;
  double median = 0;  // the mean of the two middle values for an even count
  double min = 0;
  double max = 0;
};

// Throws Error(InvalidArgument) for an empty sample.
Summary summarize(std::span<const double> samples);

// exp(mean(log x)): the mean of ratios such as speed-ups. Throws
// Error(InvalidArgument) for an empty sample or a value that is not > 0.
double geometric_mean(std::span<const double> values);

}  // namespace kiln::tools::bench

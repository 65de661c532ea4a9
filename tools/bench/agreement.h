// Does a compiled model's output match eager's? A benchmark of wrong answers
// is worthless, so every compiled cell is checked against eager's output on
// the same input.
#pragma once

#include <kiln/tensor.h>

#include <string>
#include <vector>

namespace kiln::tools::bench {

struct Agreement {
  bool matches = true;
  double max_abs_diff = 0;  // over every f32 output (infinity for a NaN where eager has a number)
  double scale = 0;         // the largest |reference| over every f32 output
  std::string problem;      // what differs, when !matches
};

// Outputs agree when counts, dtypes and shapes are equal, non-f32 outputs are
// bit-identical, and max |reference - candidate| <= relative_tolerance *
// scale + 1e-6 (the absolute floor keeps all-zero outputs from demanding
// exact equality).
Agreement compare_outputs(const std::vector<Tensor>& reference, const std::vector<Tensor>& candidate,
                          double relative_tolerance);

}  // namespace kiln::tools::bench

#include "agreement.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace kiln::tools::bench {
namespace {

constexpr double kAbsoluteFloor = 1e-6;

std::string describe(const Tensor& t) { return std::string(dtype_name(t.dtype())) + shape_str(t.shape()); }

}  // namespace

Agreement compare_outputs(const std::vector<Tensor>& reference, const std::vector<Tensor>& candidate,
                          double relative_tolerance) {
  Agreement a;
  if (reference.size() != candidate.size()) {
    a.matches = false;
    a.problem = std::to_string(candidate.size()) + " outputs where eager gives " + std::to_string(reference.size());
    return a;
  }
  std::string problems;
  auto note = [&](const std::string& text) { problems += (problems.empty() ? "" : "; ") + text; };
  for (std::size_t i = 0; i < reference.size(); ++i) {
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
    const auto rv = r.values<float>(), cv = c.values<float>();
    for (std::size_t k = 0; k < rv.size(); ++k) {
      const double expected = rv[k], got = cv[k];
      if (std::isfinite(expected)) a.scale = std::max(a.scale, std::fabs(expected));
      double diff = 0;
      if (expected != got && !(std::isnan(expected) && std::isnan(got))) {
        diff = std::fabs(expected - got);
        // NaN where eager has a number (or the reverse) is the worst disagreement.
        if (!std::isfinite(diff)) diff = std::numeric_limits<double>::infinity();
      }
      a.max_abs_diff = std::max(a.max_abs_diff, diff);
    }
  }
  const double allowed = relative_tolerance * a.scale + kAbsoluteFloor;
  if (a.max_abs_diff > allowed) {
    char text[160];
    std::snprintf(text, sizeof text, "max |eager - compiled| = %.3g exceeds %.3g (tolerance %.3g x largest |output| %.3g)",
                  a.max_abs_diff, allowed, relative_tolerance, a.scale);
    note(text);
  }
  a.matches = problems.empty();
  a.problem = problems;
  return a;
}

}  // namespace kiln::tools::bench

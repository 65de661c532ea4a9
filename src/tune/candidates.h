// The candidates of a tuning site: the template's knob space, filtered by
// the device's capability record, in search order (the heuristic's choice,
// each other family's head, the heuristic's neighbours, then the rest in a
// seeded order).
#pragma once

#include "backends/backend.h"
#include "src/tune/site.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::tune {

struct CandidateList {
  // Knob texts in search order; [0] is the heuristic's choice for the target.
  std::vector<std::string> knobs;
  // Knob texts the target cannot run, each with the reason.
  std::vector<std::pair<std::string, std::string>> filtered;
};

// Every configuration of the site's template that the target can run: the
// heuristic's space for the target plus the shared-memory GEMM tilings on GPUs (for
// pointwise and reduction sites, the workgroup sizes of
// lower::workgroup_size_space), kept only where they fit the target's limits (invocations per workgroup,
// shared memory, buffers: Backend::supports on the built kernel) and, for
// convolutions, where the algorithm applies. A family's head (search.h) is
// the heuristic's own knobs for that convolution algorithm, else the member
// nearest to the heuristic's. Neighbours are the knobs that
// differ from the heuristic's in one field; ties in the seeded order fall to
// the knob text, so the order is the same on every run. Throws
// Error(Unsupported) when one of the site's tensors exceeds the target's
// buffer limit (no knobs can help that).
CandidateList candidates(const Site& site, const backend::Backend& backend, const backend::TargetDesc& target,
                         std::uint64_t seed = 1);

// How many fields two knob texts differ in ("8x8_k4_p8_wg64_v4" and
// "8x4_k4_p8_wg64_v4": 1).
int knob_distance(const std::string& a, const std::string& b);

}  // namespace kiln::tune

// Picks template knobs from the problem's shape and the device's capability
// record. Deterministic and cheap (no benchmarking): eager and compiled code
// ask it the same question and get the same kernel. The *_space functions
// list every configuration it can return for a target, so tests can run them
// all.
#pragma once

#include "shaders/conv_template.h"
#include "shaders/knobs.h"
#include "src/lower/target.h"

#include <cstdint>
#include <vector>

namespace kiln::shaders {

// Knobs for `batch` independent M x N x K products.
GemmKnobs choose_gemm_knobs(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                            const lower::LowerTarget& target);

// The algorithm and knobs for a convolution.
ConvPlan choose_conv_plan(const ConvProblem& problem, const lower::LowerTarget& target);

// Every value choose_gemm_knobs / choose_conv_plan can return for `target`.
std::vector<GemmKnobs> gemm_knob_space(const lower::LowerTarget& target);
std::vector<ConvPlan> conv_plan_space(const lower::LowerTarget& target);

}  // namespace kiln::shaders

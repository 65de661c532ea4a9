// Picks template knobs from the problem's shape and the device's capability
// record. Deterministic and cheap (no benchmarking): eager and compiled code
// ask it the same question and get the same kernel. The *_space functions
// list every configuration it can return for a target, so tests can run them
// all.
#pragma once

#include "shaders/conv_template.h"
#include "shaders/knobs.h"
#include "shaders/target.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::shaders {

// Knobs for `batch` independent M x N x K products.
GemmKnobs choose_gemm_knobs(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                            const lower::LowerTarget& target);

// The algorithm and knobs for a convolution: gemm_1x1 where it applies, else
// implicit_gemm where prefers_implicit_gemm, else depthwise (one input
// channel per group), else direct.
ConvPlan choose_conv_plan(const ConvProblem& problem, const lower::LowerTarget& target);
// The heuristic's knobs for `algorithm` (which must apply to `problem`):
// what choose_conv_plan would pick had it chosen that algorithm. The
// autotuner measures these first for each algorithm it may try.
ConvPlan choose_conv_plan(const ConvProblem& problem, ConvAlgorithm algorithm, const lower::LowerTarget& target);

// The implicit GEMM's share, from the geometry alone (never the target): 1x1 convolutions
// that are not a plain GEMM (strided or padded, with more than one input
// channel per group) and have at least kMinImplicitGemmColumns output pixels:
// there it matches or beats the direct kernel; on smaller outputs, where
// 16-column blocks do not fit, and on every window with taps, the direct
// kernel's row-segment reuse wins (fewer loads per multiply-add). Figures:
// docs/benchmarks/template-thresholds.md.
inline constexpr std::int64_t kMinImplicitGemmColumns = 256;
bool prefers_implicit_gemm(const ConvProblem& problem);

// The multiple of a GEMM's column count N at which choose_gemm_knobs keeps
// its widest register tile on a CPU device (16 columns), where a last tile
// mostly of padding makes it fall back to narrow ones (ResNet's 14x14 maps
// as Winograd tiles: docs/benchmarks/pass-thresholds.md). A producer free
// to pad N (the winograd pass's tiles) pads to it. GPU devices get the same multiple, which their
// bounds-checked tiles take as they come, until their own is measured.
std::int64_t gemm_column_multiple(const lower::LowerTarget& target);

// Every value choose_gemm_knobs / choose_conv_plan can return for `target`,
// and the configurations an autotuner may try besides: subgroup-broadcast
// GEMMs (with texel loads where the target has texel buffers) where the
// target broadcasts within its subgroups.
std::vector<GemmKnobs> gemm_knob_space(const lower::LowerTarget& target);
// The GEMM space for one problem (`batch` products of M x N x K): the
// target's, less texel-load configurations whose operands exceed the
// target's largest texel buffer.
std::vector<GemmKnobs> gemm_knob_space(const lower::LowerTarget& target, std::int64_t batch, std::int64_t m,
                                       std::int64_t n, std::int64_t k);
std::vector<ConvPlan> conv_plan_space(const lower::LowerTarget& target);

// Why matrix-unit knobs (GemmKnobs::matrix_m > 0) do not fit `target` and
// the node being lowered: the target lacks the instruction, or its
// precision is not the node's 16-bit storage type (a tuning record or a
// forged database must not round an f32 GEMM's operands); nullopt where
// they fit or use no matrix units.
std::optional<std::string> matrix_knobs_unfit(const GemmKnobs& knobs, const lower::LowerTarget& target);

}  // namespace kiln::shaders

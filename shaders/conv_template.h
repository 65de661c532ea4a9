// The 2-D convolution templates (NCHW), written once in the kernel IR:
//
// - gemm_1x1: a 1x1, stride-1, unpadded convolution is, per image and group,
//   the GEMM W[Co/g, Ci/g] x X[Ci/g, H*W] (gemm_template.h);
// - implicit_gemm: any dense convolution, per image and group, as the GEMM
//   W[Co/g, Ci/g*kH*kW] x im2col(X)[Ci/g*kH*kW, out_h*out_w] on the same
//   register-blocked machinery, the im2col matrix gathered from X as it is
//   read (GemmGatherB: per column the input origin once, the kernel taps
//   unrolled inside the input-channel loop, bounds checked only for taps
//   that can leave the image);
// - direct: each invocation computes tile_channels output channels of one
//   group x tile_width adjacent output columns of one output row; per input
//   channel and kernel row it loads the input row segment those columns
//   cover once and reuses it for every kernel column (register blocking on
//   both operands, no window index arithmetic in the inner loop);
// - depthwise (one input channel per group): the direct kernel without the
//   input-channel loop, blocked along the output width.
//
// The direct kernel also reads weights pre-packed by the compiler
// (ConvProblem::packed_weights), 4 output channels per vector load.
//
// Padding, stride, dilation, groups, bias and the fused activation are all
// baked in as constants. Out-of-bounds input reads become zeros via clamped
// indices, and every output element is written once by a plain store.
#pragma once

#include "shaders/knobs.h"
#include "src/kernel/ir.h"

#include <cstdint>
#include <functional>
#include <optional>

namespace kiln::shaders {

// The version of this template's knobs: bump it when a change to the
// template makes the same knob text build a different kernel, or its knob
// space grows (a tuning record for another version is stale, so the new
// candidates get measured). 2: 1x1 GEMMs with swapped operands (_swap).
inline constexpr int kConvTemplateVersion = 2;

struct ConvProblem {
  std::int64_t batch = 1, in_channels = 0, out_channels = 0, groups = 1;
  std::int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  std::int64_t kernel_h = 1, kernel_w = 1;
  std::int64_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  std::int64_t pad_top = 0, pad_left = 0;  // the bottom/right pads only shape out_h/out_w
  kir::Buf x, w, y;
  // w is OIhw4o (graph/ops/conv.cpp, set by the pack_weights pass): per
  // group, blocks of 4 output channels, [ceil(cog/4)][C/g][kH][kW][4], zero
  // padded. The direct kernel then loads a tap of 4 channels as one vec4
  // (tile_channels 4 or 8; smaller tiles read it with scalar loads). Only
  // the direct algorithm reads it.
  bool packed_weights = false;
  // The spatial extents (in_h, in_w, out_h, out_w) vary from one dispatch
  // to another (LowerTarget::spatial_extents_vary): no choice may depend on
  // how they divide.
  bool spatial_extents_vary = false;
  std::optional<kir::Buf> bias;  // [out_channels], added before the activation
  // Applied to every output value after the bias. Unset: none.
  std::function<kir::Expr(kir::Expr)> activation;

  std::int64_t in_channels_per_group() const { return in_channels / groups; }
  std::int64_t out_channels_per_group() const { return out_channels / groups; }
};

// Which kernel computes a convolution, with that kernel's knobs.
struct ConvPlan {
  ConvAlgorithm algorithm = ConvAlgorithm::direct;
  GemmKnobs gemm;  // gemm_1x1, implicit_gemm
  ConvKnobs conv;  // direct, depthwise

  friend bool operator==(const ConvPlan&, const ConvPlan&) = default;
};

// Whether `algorithm` can compute `problem` (gemm_1x1 needs a 1x1 stride-1
// unpadded kernel; depthwise needs one input channel per group; packed
// weights need direct; implicit_gemm computes every other convolution).
bool conv_algorithm_applies(const ConvProblem& problem, ConvAlgorithm algorithm);

// Appends the convolution to `kernel` (whose buffers the caller added) and
// sets its global and workgroup sizes. Throws Error(Internal) when the plan's
// algorithm does not apply or its knobs are invalid.
void build_conv(kir::Kernel& kernel, const ConvProblem& problem, const ConvPlan& plan);

// Invocations build_conv launches.
std::int64_t conv_invocations(const ConvProblem& problem, const ConvPlan& plan);

}  // namespace kiln::shaders

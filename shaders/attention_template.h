// The attention template, written once in the kernel IR:
//   Y = softmax(scale * Q K^T + mask) V
// for a batch of independent heads, in one kernel: the scores never reach
// memory. Each invocation owns `rows` query rows and a block of `columns`
// output columns of one head. It holds its query rows (pre-multiplied by
// scale) and its accumulators in registers and walks the keys once, in blocks
// of `key_block`, with an online softmax: per block it computes the scores,
// raises the running max, rescales the accumulators and sums by
// exp(score - max), then adds the block's V rows weighted by those exps.
//
// Vector loads (vector_width 4): Q rows and K rows as vec4 along D when D is
// a multiple of 4 (K given as K^T is read with scalar loads); V rows as vec4
// along the output columns when Dv and `columns` are multiples of 4. Buffers
// must be bound at 16-byte aligned offsets.
//
// Edges: rows and columns past Lq or Dv compute on a clamped (valid) one and
// are not stored; keys past the last full block are taken one at a time.
// Every output element is written once, by a plain store of its final value
// at y[head * Lq * Dv + row * Dv + column].
#pragma once

#include "src/kernel/ir.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln::shaders {

// The version of this template's knobs: bump it when a change to the
// template makes the same knob text build a different kernel (a tuning
// record for another version is stale).
inline constexpr int kAttentionTemplateVersion = 1;

// The workgroup an attention kernel takes unless its knobs say otherwise
// ("wg<N>" in the text), and the workgroups a CPU device's is sized to give
// at least: a workgroup runs on one thread there, its invocations in SIMD
// lanes, so a decode step's few invocations in one workgroup leave all
// threads but one idle, and one invocation per workgroup leaves the lanes
// idle. Two is the floor (the capability record has no thread count;
// docs/benchmarks/generation.md has the measurements).
inline constexpr std::uint32_t kDefaultAttentionWorkgroup = 64;
inline constexpr std::int64_t kCpuAttentionWorkgroups = 2;

struct AttentionKnobs {
  std::uint32_t rows = 2;        // query rows per invocation
  std::uint32_t columns = 64;    // output columns per invocation (of Dv)
  std::uint32_t key_block = 4;   // keys per online-softmax step
  std::uint32_t vector_width = 4;  // 4: vec4 loads where they fit; 1: scalar only
  std::uint32_t workgroup_size = kDefaultAttentionWorkgroup;
  bool operator==(const AttentionKnobs&) const = default;
};

// "r2c64k4v4", "r2c64k4v4wg1" (the workgroup when it is not the default)
std::string to_string(const AttentionKnobs& knobs);

struct AttentionProblem {
  std::int64_t heads = 1;  // independent problems ([B, H] flattened)
  std::int64_t lq = 0, lk = 0, d = 0, dv = 0;
  double scale = 1.0;
  // Q [heads, Lq, D]; K [heads, Lk, D], or K^T [heads, D, Lk] when
  // k_transposed; V [heads, Lk, Dv]; Y [heads, Lq, Dv].
  bool k_transposed = false;
  kir::Buf q, k, v, y;
  // The optional additive mask: element (row, key) of head `head` is
  // mask[base + row * mask_row_stride + key * mask_key_stride], where
  // `mask_base` declares what it needs into `body` and returns `base` for
  // `head` (an i32 in [0, heads)). Unset: no mask.
  kir::Buf mask;
  std::function<kir::Expr(std::vector<kir::Stmt>& body, kir::Expr head)> mask_base;
  std::int64_t mask_row_stride = 0, mask_key_stride = 0;
};

// The knobs for a problem: every output column of a head in one invocation
// (no score is computed twice) up to 64 columns, and as many query rows (up
// to 4) as keep the rows' queries and accumulators near 256 registers, so
// that each K and V load serves several rows. On a CPU device the workgroup
// shrinks until there are kCpuAttentionWorkgroups of them (or it is 1).
AttentionKnobs choose_attention_knobs(const AttentionProblem& problem, bool cpu_device = false);

// Appends the attention kernel to `kernel` (whose buffers the caller added)
// and sets its global and workgroup sizes. Throws Error(Internal) for invalid
// knobs or an empty problem.
void build_attention(kir::Kernel& kernel, const AttentionProblem& problem, const AttentionKnobs& knobs);

// Invocations build_attention launches.
std::int64_t attention_invocations(const AttentionProblem& problem, const AttentionKnobs& knobs);

// The largest head dimension D the template holds in registers.
inline constexpr std::int64_t kMaxAttentionHeadDim = 256;

}  // namespace kiln::shaders

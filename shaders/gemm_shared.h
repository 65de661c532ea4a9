// The GEMM template's shared-memory path (GemmKnobs::shared_k_tile > 0),
// for GPUs: one workgroup computes a block_m x block_n block of Y.
//
// The workgroup's invocations form split_k K slices of slice = workgroup_size
// / split_k invocations, each slice arranged as threads_m x threads_n
// (threads_n = workgroup_n, or the squarest power-of-two split) with a
// tile_m x tile_n register block per invocation: block_m = threads_m *
// tile_m, block_n = threads_n * tile_n. Each step of the K loop covers
// k_step = shared_k_tile * split_k values of K:
//   1. every invocation of the group loads its share of the A tile
//      (block_m x k_step) and the B tile (k_step x block_n) from global into
//      shared memory, consecutive invocations reading consecutive addresses
//      of whichever operand dimension is contiguous (as vec4 where
//      knobs.vector_width is 4 and the operand's shape and strides allow);
//      rows and columns past the edge read a clamped valid element, K past
//      the end stores zero;
//   2. barrier;
//   3. slice s multiplies its rows [s * shared_k_tile, (s + 1) *
//      shared_k_tile) of the tiles into its register blocks;
//   4. barrier (the next step overwrites the tiles).
// With shared_stages 2 the tiles are double-buffered: the first step's are
// loaded before the loop, and each step loads the next step's tiles into
// the other set (step 1, into the set not being read), multiplies out of
// its own (step 3) and synchronises once: a set is written only after the
// barrier that ends every read of it.
// With split_k > 1 the slices 1.. then write their partial blocks to shared
// memory (reusing the tiles' space), barrier, and slice 0 adds them up. Slice
// 0 applies the epilogue and stores: every output element is written once, by
// a plain store. The kernel's global size is a whole number of workgroups.
//
// With matrix units (GemmKnobs::matrix_m > 0) step 3 is the subgroups':
// the workgroup's subgroups of matrix_lanes lanes form subgroups_m x
// subgroups_n (the squarest power-of-two split, wider along N), each
// multiplying tile_m x tile_n instruction tiles (matrix fragments loaded from
// the shared tiles, column-major for A, row-major for B) into its
// accumulators: block_m = subgroups_m * tile_m * matrix_m, block_n likewise.
// After the K loop the accumulators are stored to shared memory (the tiles'
// space), and every invocation applies the epilogue to its share of the
// block, consecutive invocations taking consecutive columns.
#pragma once

#include "shaders/gemm_template.h"

#include <cstdint>

namespace kiln::shaders::detail {

struct SharedGemmLayout {
  std::int64_t slice = 0;               // invocations per K slice
  std::int64_t threads_m = 0, threads_n = 0;
  std::int64_t block_m = 0, block_n = 0;
  std::int64_t k_step = 0;              // K values per step: shared_k_tile * split_k
  std::int64_t a_elements = 0;          // A tile: block_m * k_step, at offset 0 of a set
  std::int64_t b_elements = 0;          // B tile: k_step * block_n, after A's
  std::int64_t stage_elements = 0;      // one set of tiles, A's and B's; set s at s * stage_elements
  std::int64_t reduce_elements = 0;     // split_k partial blocks: (split_k - 1) * slice * tile_m * tile_n
  std::int64_t subgroups_m = 0, subgroups_n = 0;  // matrix units: the subgroups' arrangement
  std::int64_t output_elements = 0;     // matrix units: the block, block_m x block_n, at offset 0
  std::int64_t shared_elements = 0;     // one f32 array holding either
};

// The layout `knobs` (checked, with shared_k_tile > 0) give.
SharedGemmLayout shared_gemm_layout(const GemmKnobs& knobs);

// Bytes of shared memory the shared path needs with `knobs`.
std::uint64_t shared_gemm_bytes(const GemmKnobs& knobs);

std::int64_t shared_gemm_invocations(const GemmProblem& problem, const GemmKnobs& knobs);

// Appends the shared-memory GEMM to `kernel` and sets its sizes (the
// problem is checked by build_gemm).
void build_shared_gemm(kir::Kernel& kernel, const GemmProblem& problem, const GemmKnobs& knobs);

}  // namespace kiln::shaders::detail

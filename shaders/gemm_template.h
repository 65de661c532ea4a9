// The GEMM template, written once in the kernel IR: Y = epilogue(op(A) op(B))
// over a batch of independent products, each invocation computing a
// tile_m x tile_n block of Y in registers (the accumulators are unrolled at
// IR-build time), with the K loop unrolled k_unroll times. Operands are
// described by strides, so transposed operands, batched MatMul and 1x1
// convolutions (W [Co, Ci] times X [Ci, H*W]) are all this one kernel; a
// gathered B (GemmGatherB) makes it the implicit GEMM of any convolution.
// knobs.swap_operands builds Y^T = op(B)^T op(A)^T from the same problem
// (A and B trade places and strides; the epilogue still sees Y's row and
// column), so every path can also run along Y's other side.
//
// Vector loads (knobs.vector_width 4): A is read as vec4 along K when
// a_k_stride is 1, a_row_stride and a's bases are multiples of 4 and k_unroll
// is a multiple of 4; B as vec4 along N when b_col_stride is 1, b_k_stride, N,
// tile_n and b's bases are multiples of 4. Otherwise that operand falls back to
// scalar loads. Buffers must be bound at 16-byte aligned offsets.
//
// Edges: rows and columns past M or N load a clamped (valid) element and
// are not stored, so no shape needs to be a multiple of the tiles. The clamps
// are emitted for every shape, so GEMMs that differ only in their sizes have
// one structure (and share a kernel through runtime parameters,
// src/kernel/parameterise.h); a store guard is left out where M or N is a
// multiple of the tile, so sizes of one divisibility share a kernel. Every
// output element is written once, by a plain store of its final value: a
// vec4 store of four neighbours along N (knobs.vector_width 4) when
// y_col_stride is 1 and N, y_row_stride, tile_n and y's bases are multiples
// of 4. Epilogue loads that several elements of a row share (a per-row bias)
// are read once per row.
//
// The output stage is where a CPU Vulkan driver spends most of its compile
// time on this kernel (each buffer access becomes a loop over SIMD lanes):
// vec4 stores and one bias load per row cut that compile time severalfold
// (docs/benchmarks/template-thresholds.md).
//
// Shared-memory tiling (knobs.shared_k_tile > 0, for GPUs; gemm_shared.h):
// the workgroup stages tiles of A and B in shared memory and may split K
// among its invocations (knobs.split_k). A gathered B with taps > 1 takes
// it where the gather loads at run-time K indices (GemmGatherB::load_at),
// else keeps the register path (the shared knobs are then ignored).
#pragma once

#include "shaders/knobs.h"
#include "src/kernel/ir.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kiln::shaders {

// The version of this template's knobs: bump it when a change to the
// template makes the same knob text build a different kernel, or its knob
// space grows (a tuning record for another version is stale, so the new
// candidates get measured). 2: swapped operands (_swap).
inline constexpr int kGemmTemplateVersion = 2;

// Base offsets of one batch entry's operands (i32 expressions).
struct GemmBases {
  kir::Expr a, b, y;
};

// B gathered instead of strided (implicit GEMM: a convolution's im2col matrix,
// never materialised). K is split as k = outer * taps + tap: the K loop runs
// over `outer` with the `taps` steps unrolled, so `load` sees each tap as a
// constant and needs no division in the loop. B is read with scalar loads
// (vector_width applies to A only; A's vec4 loads need taps == 1).
struct GemmGatherB {
  std::int64_t taps = 1;  // must divide K
  // Declares, once per invocation before the K loop, what column `col` (a
  // valid column, i32) of batch entry base `b_base` needs; `slot` (0 ..
  // tile_n - 1) tells the block's columns apart in variable names.
  std::function<void(std::vector<kir::Stmt>& body, kir::Expr col, kir::Expr b_base, std::uint32_t slot)> prepare;
  // Appends to `out` the statements that declare the f32 variable `name` =
  // element (outer * taps + tap, column in `slot`) of B. Statements, not an
  // expression, so a guarded load can read first and zero the value after
  // (a load under a select may become a branch).
  std::function<void(std::vector<kir::Stmt>& out, const std::string& name, kir::Expr outer, std::int64_t tap,
                     std::uint32_t slot)>
      load;
  // The same for a K index known only at run time (`k`, a valid index of
  // K): the shared-memory path's tile loads walk K, not outer and tap. Unset
  // with taps > 1: the register path only.
  std::function<void(std::vector<kir::Stmt>& out, const std::string& name, kir::Expr k, std::uint32_t slot)> load_at;
};

struct GemmProblem {
  std::int64_t batch = 1;  // independent products
  std::int64_t m = 0, n = 0, k = 0;
  // Element (row, k) of op(A) is a[a_base + row * a_row_stride + k * a_k_stride];
  // (k, col) of op(B) is b[b_base + k * b_k_stride + col * b_col_stride];
  // (row, col) of Y is y[y_base + row * y_row_stride + col * y_col_stride].
  std::int64_t a_row_stride = 0, a_k_stride = 0;
  std::int64_t b_k_stride = 0, b_col_stride = 0;
  std::int64_t y_row_stride = 0, y_col_stride = 1;
  kir::Buf a, b, y;
  // Every base of A (B, Y) that `bases` returns is a multiple of this many
  // elements; vector loads and stores need multiples of 4. Ignored when bases
  // is unset.
  std::int64_t a_base_multiple = 1, b_base_multiple = 1, y_base_multiple = 1;
  // Declares what it needs into `body` and returns the bases of batch entry
  // `batch` (an i32 in [0, batch)). Unset: every base is 0 (batch must be 1).
  std::function<GemmBases(std::vector<kir::Stmt>& body, kir::Expr batch)> bases;
  // The value stored for element (row, col) of batch entry `batch`, given the
  // dot product `acc` (bias, alpha/beta, activation). Unset: acc itself.
  std::function<kir::Expr(kir::Expr acc, kir::Expr row, kir::Expr col, kir::Expr batch)> epilogue;
  // Set: B is gathered (b_k_stride and b_col_stride are ignored). Unset: strided.
  std::optional<GemmGatherB> gather_b;
  // N varies from one dispatch to another (a convolution's output plane at
  // varying extents): no choice may depend on how it divides.
  bool n_varies = false;

  // Whether N is a multiple of `d` at every extent it may take.
  bool n_multiple_of(std::int64_t d) const { return !n_varies && n % d == 0; }
};

// Appends the GEMM to `kernel` (whose buffers the caller added) and sets its
// global and workgroup sizes. Throws Error(Internal) for invalid knobs or an
// empty problem.
void build_gemm(kir::Kernel& kernel, const GemmProblem& problem, const GemmKnobs& knobs);

// Invocations build_gemm launches for `problem` with `knobs`.
std::int64_t gemm_invocations(const GemmProblem& problem, const GemmKnobs& knobs);

}  // namespace kiln::shaders

// The kernel IR's executable definition: runs a kir::Kernel on host memory.
//
// Semantics every renderer must match:
// - the body runs once per linear index in [0, global_size), in any order;
// - f32 arithmetic and math functions are computed in float (not double):
//   min/max follow fminf/fmaxf, rsqrt is 1/sqrt, erf/tanh/exp/... are the
//   C library's float functions;
// - i32, u32 and i64 add/sub/mul/neg/abs wrap around (two's complement);
//   integer division truncates toward zero;
// - select, && and || evaluate only the operand they need (as in C and GLSL),
//   so a select may guard an out-of-bounds load;
// - casts follow C: f32 -> integer truncates toward zero, numbers -> bool
//   are "!= 0", bool -> number is 0 or 1, i32 <-> u32 keep the bits, i64 ->
//   i32/u32 keeps the low 32 bits;
// - a loop's end bound is re-evaluated before every iteration;
// - load_vector reads `width` consecutive elements starting at a multiple of
//   the width, as one aligned vector (so buffers must be bound at offsets
//   aligned to 16 bytes; the executor aligns every binding to >= 16).
// - a kernel with shared arrays runs one workgroup at a time; its
//   invocations run statement stretches between barriers one invocation
//   after another (one valid interleaving), a loop containing a barrier runs
//   each iteration for the whole group together (its bounds must agree
//   across the group), and a barrier ends the stretch. Shared arrays start
//   uninitialised in every workgroup; a partial last workgroup (possible only
//   without barriers) runs just its invocations below global_size;
// - local_index() is global_index() % workgroup_size and workgroup_index()
//   is global_index() / workgroup_size;
// - subgroups are Kernel::subgroup_size consecutive local indices:
//   subgroup_lane() is local_index() % subgroup_size, subgroup_id() is
//   local_index() / subgroup_size. A kernel with broadcasts runs a workgroup
//   at a time; a statement with broadcasts runs in lockstep: every lane
//   evaluates each broadcast's operand (inner broadcasts first), then every
//   lane runs the statement, a broadcast giving what its source lane
//   evaluated; a branch or loop around broadcasts runs for the whole group
//   (its condition or bounds must agree across the group);
// - a texel buffer of width 4 holds only its whole texels: elements past the
//   last multiple of 4 are out of bounds;
// - matrix fragments (ir.h) are held per subgroup; a kernel with them runs a
//   workgroup at a time, and each fragment statement runs for the whole
//   group, once per subgroup, its operands (index, stride, rows, cols, fill
//   value) the same in every lane, its memory accesses made by the
//   subgroup's first lane; fragment_mma sums the exact products in double
//   and rounds once to f32.
// Results that are undefined on GPUs are errors here (Error(Internal), naming
// the kernel and the invocation): an out-of-bounds load or store, a vector
// load not wholly inside its buffer, integer division by zero, `mod` with a
// negative operand, an f32 -> integer cast of NaN or of a value out of range,
// a loop variable overflowing i32; and in shared memory: an out-of-bounds
// access, a read of an element no invocation of the workgroup has written,
// and a race (two accesses of one element by different invocations, at least
// one a write, with no barrier between them); a fragment statement whose
// operands differ between the lanes of a subgroup.
#pragma once

#include <cstddef>
#include <span>

#include "src/kernel/ir.h"

namespace kiln::kir {

// Runs `kernel` on `buffers` (one per Kernel::buffers entry, in order; each a
// whole number of its elements: kir::element_bytes). Verifies the kernel first. Slow by design.
void interpret(const Kernel& kernel, std::span<const std::span<std::byte>> buffers);

}  // namespace kiln::kir

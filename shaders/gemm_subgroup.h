// The GEMM template's subgroup path (GemmKnobs::subgroup_broadcast = S > 0),
// for CPU Vulkan drivers such as lavapipe, where a buffer load costs an
// instruction per lane and registers spill cheaply.
//
// A subgroup of S lanes computes a tile_m x (S * tile_n) block of Y: every
// lane the same tile_m rows, lane l the tile_n consecutive columns from
// l * tile_n. Blocks are ordered as the register path's invocations are
// (panels of panel_width column blocks, then row blocks, then batch), one
// block per subgroup; the kernel runs whole workgroups, and subgroups past
// the last block store nothing.
//
// K advances in chunks of S values (4S where A is read as vec4: a_k_stride
// 1, a_row_stride and A's bases multiples of 4, vector_width 4): at the top
// of a chunk each lane reads, for each of the tile_m rows, the chunk's
// stretch of K that falls to it (lane l: k0 + l, or the vec4 at k0 + 4l);
// then every K step of the chunk takes A's value for that step by a
// subgroup broadcast from the lane that read it, and reads B as the
// register path does (vec4 along N where B allows), or else as vec4 along K
// every 4 steps where each column's K run is contiguous and aligned (a
// swapped problem's B: a row-major weight). K past the last whole chunk is
// read directly, one step at a time.
//
// Everything an invocation computes derives from its workgroup, subgroup
// and lane indices, never from its global or local index, so the kernel is
// right wherever subgroups are whole and have S lanes, however a device
// lays them out in the workgroup.
#pragma once

#include "shaders/gemm_template.h"

#include <cstdint>

namespace kiln::shaders::detail {

// Invocations (whole workgroups) the subgroup path launches.
std::int64_t subgroup_gemm_invocations(const GemmProblem& problem, const GemmKnobs& knobs);

// Appends the subgroup GEMM to `kernel` and sets its sizes and subgroup
// size (the problem is checked by build_gemm; B is not gathered).
void build_subgroup_gemm(kir::Kernel& kernel, const GemmProblem& problem, const GemmKnobs& knobs);

}  // namespace kiln::shaders::detail

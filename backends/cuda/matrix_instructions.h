// NVIDIA's warp-level matrix instructions (tensor cores) as kir fragments
// render them: PTX mma.sync through inline assembly, which NVRTC compiles
// without cuda_fp16.h or a GPU.
#pragma once

#include "backends/language.h"

#include <vector>

namespace kiln::backend::cuda {

// mma.sync m16n8k8 (TF32) and m16n8k16 (f16, bf16) with f32 accumulators,
// in the fragment layouts of the PTX ISA ("Matrix Fragments for mma.m16n8k8"
// and "... m16n8k16").
std::vector<MatrixInstruction> mma_sync_instructions();

// The shapes compute capability `sm` (80 for sm_80) runs: all three from
// sm_80 (Ampere) on; none before.
std::vector<MatrixShape> matrix_shapes(int sm);

}  // namespace kiln::backend::cuda

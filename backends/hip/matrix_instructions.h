// AMD's wave-level matrix instructions (MFMA, CDNA) as kir fragments render
// them: clang's __builtin_amdgcn_mfma_* builtins, which hiprtc compiles
// without a GPU.
#pragma once

#include "backends/language.h"

#include <string>
#include <vector>

namespace kiln::backend::hip {

// 64-lane MFMA with f32 accumulators on 16x16 tiles: f16 and bf16 inputs
// 16x16x16 (v_mfma_f32_16x16x16f16, v_mfma_f32_16x16x16bf16_1k), and TF32
// inputs 16x16x4 through the f32 instruction (v_mfma_f32_16x16x4f32): CDNA
// has no TF32 type, but products of values rounded to TF32 are exact in
// f32, so only the summation differs from a TF32 unit's.
std::vector<MatrixInstruction> mfma_instructions();

// The shapes processor `arch` ("gfx90a", "gfx90a:sramecc+:xnack-") runs:
// gfx90a and gfx94x all three; gfx908 (CDNA1, no bf16_1k) f16 and TF32;
// RDNA (wave32; its WMMA needs gfx11 targets ROCm 5.2 lacks) none.
std::vector<MatrixShape> matrix_shapes(const std::string& arch);

}  // namespace kiln::backend::hip

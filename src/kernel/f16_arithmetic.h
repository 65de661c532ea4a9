// f16 arithmetic for kernels that store f16 results (the f16_arithmetic
// setting): each value a kernel stores into an f16 buffer is computed in f16
// (kir's f16 values, ir.h) rather than in f32 and rounded once, which is
// what mobile GPUs run at twice the f32 rate. Only the stored expression
// changes: its operands (loads, variables, constants, parameters) are
// rounded to f16 where it reads them and its pointwise ops compute in f16,
// so accumulations in variables (a GEMM's or a convolution's sums, a
// reduction's, normalisation statistics) stay f32. Values outside f16's
// range (65504) overflow to infinity in between, as they do on such GPUs.
#pragma once

#include "src/kernel/ir.h"

namespace kiln::kir {

// Rewrites `kernel` so; returns the number of stored values that now
// compute in f16 (0: the kernel is unchanged).
int use_f16_arithmetic(Kernel& kernel);

// Whether `kernel` computes with f16 values.
bool uses_f16_arithmetic(const Kernel& kernel);

}  // namespace kiln::kir

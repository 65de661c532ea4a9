// Weight layouts that compile passes choose and kernels read, named by the
// weight_layout attribute (outer dimensions in capitals, then the inner
// block: "NK16n" is [N / 16, K, 16]). Shared by the ops' reference
// implementations (graph/ops), the passes that pack (graph/passes) and the
// lowerings that read packed weights (src/lower).
#pragma once

#include <cstdint>

namespace kiln::graph {

// MatMul's B [K, N] in blocks of 16 columns, each block contiguous along K,
// so a GEMM invocation computing 16 columns streams one contiguous slab of
// B instead of one 64-byte piece per row of B (N % 16 == 0).
inline constexpr const char* kMatMulPackedLayout = "NK16n";
inline constexpr std::int64_t kMatMulPackedBlock = 16;

}  // namespace kiln::graph

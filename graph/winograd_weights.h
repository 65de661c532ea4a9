// The filter transform of Winograd F(m x m, 3x3), U = G g G^T, shared by the
// winograd pass (graph/passes/winograd.cpp: at compile time, into a
// constant), the WinogradWeight op's reference (graph/ops/winograd.cpp: the
// same double-precision code) and its kernel (src/lower/lower_winograd.cpp:
// the same coefficients in fp32, every call: eager's honest cost).
#pragma once

#include <kiln/tensor.h>

#include <array>
#include <cstdint>
#include <span>

namespace kiln::graph {

// G of F(m x m, 3x3) (U = G g G^T), n x 3 with n = m + 2: row j evaluates the
// filter polynomial at interpolation point p_j, scaled by 1 / prod_{l != j}
// (p_j - p_l) over the finite points (F(2x2)'s row 0 with the opposite sign,
// which its B^T row 0 carries); the points (0, +-1, inf for F(2x2); 0, +-1,
// +-2, inf for F(4x4)) and their order match B^T and A^T in
// graph/ops/winograd.cpp.
inline constexpr std::array<std::array<double, 3>, 4> kWinogradG2 = {
    {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}}};
inline constexpr std::array<std::array<double, 3>, 6> kWinogradG4 = {{{1.0 / 4, 0, 0},
                                                                      {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                                                      {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                                                      {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                                                      {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                                                      {0, 0, 1}}};

// G's n rows for output tile m = 2 or 4 (throws InvalidArgument otherwise).
std::span<const std::array<double, 3>> winograd_filter_transform(std::int64_t output_tile);

// OIHW [K, C, 3, 3] f32 -> U [n*n, K, C], U[xi*n+nu][k][c] = (G g G^T)[xi][nu]
// of filter (k, c), accumulated in double and rounded once.
Tensor winograd_transform_weight(const Tensor& weight, std::int64_t output_tile);

}  // namespace kiln::graph

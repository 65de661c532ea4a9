#include "shaders/knobs.h"

#include <kiln/error.h>

namespace kiln::shaders {

namespace {

constexpr std::uint32_t kMaxGemmTile = 16;  // GEMM register blocks: 16 columns on CPU devices
constexpr std::uint32_t kMaxConvTile = 8;
constexpr std::uint32_t kMaxUnroll = 8;
constexpr std::uint32_t kMaxWorkgroup = 1024;
constexpr std::uint32_t kMaxPanel = 64;

void check_range(const char* what, std::uint32_t value, std::uint32_t max, const std::string& knobs) {
  KILN_CHECK(value >= 1 && value <= max, ErrorKind::Internal,
             std::string("template knob ") + what + " = " + std::to_string(value) + " is outside [1, " +
                 std::to_string(max) + "] (knobs " + knobs + ")");
}

}  // namespace

const char* conv_algorithm_name(ConvAlgorithm algorithm) {
  switch (algorithm) {
    case ConvAlgorithm::gemm_1x1: return "gemm_1x1";
    case ConvAlgorithm::direct: return "direct";
    case ConvAlgorithm::implicit_gemm: return "implicit_gemm";
    case ConvAlgorithm::depthwise: return "depthwise";
  }
  return "unknown";
}

std::string to_string(const GemmKnobs& knobs) {
  return std::to_string(knobs.tile_m) + "x" + std::to_string(knobs.tile_n) + "_k" + std::to_string(knobs.k_unroll) +
         "_p" + std::to_string(knobs.panel_width) + "_wg" + std::to_string(knobs.workgroup_size) + "_v" +
         std::to_string(knobs.vector_width);
}

std::string to_string(const ConvKnobs& knobs) {
  return "c" + std::to_string(knobs.tile_channels) + "_w" + std::to_string(knobs.tile_width) + "_wg" +
         std::to_string(knobs.workgroup_size);
}

void check_knobs(const GemmKnobs& knobs) {
  const std::string text = to_string(knobs);
  check_range("tile_m", knobs.tile_m, kMaxGemmTile, text);
  check_range("tile_n", knobs.tile_n, kMaxGemmTile, text);
  check_range("k_unroll", knobs.k_unroll, kMaxUnroll, text);
  check_range("workgroup_size", knobs.workgroup_size, kMaxWorkgroup, text);
  check_range("panel_width", knobs.panel_width, kMaxPanel, text);
  KILN_CHECK(knobs.vector_width == 1 || knobs.vector_width == 4, ErrorKind::Internal,
             "template knob vector_width = " + std::to_string(knobs.vector_width) + " is not 1 or 4 (knobs " + text +
                 ")");
}

void check_knobs(const ConvKnobs& knobs) {
  const std::string text = to_string(knobs);
  check_range("tile_channels", knobs.tile_channels, kMaxConvTile, text);
  check_range("tile_width", knobs.tile_width, kMaxConvTile, text);
  check_range("workgroup_size", knobs.workgroup_size, kMaxWorkgroup, text);
}

}  // namespace kiln::shaders

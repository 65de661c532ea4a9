#include "shaders/knobs.h"

#include <kiln/error.h>

#include <bit>

namespace kiln::shaders {

namespace {

constexpr std::uint32_t kMaxGemmTile = 16;  // GEMM register blocks: 16 columns on CPU devices
constexpr std::uint32_t kMaxConvTile = 8;
constexpr std::uint32_t kMaxUnroll = 8;
constexpr std::uint32_t kMaxWorkgroup = 1024;
constexpr std::uint32_t kMaxPanel = 64;
constexpr std::uint32_t kMaxSharedKTile = 32;
// A lane of a subgroup GEMM may own 64 columns: lavapipe's fastest SGEMM
// keeps an 8 x 64 block per lane (its registers spill cheaply to L1).
constexpr std::uint32_t kMaxSubgroupGemmTileN = 64;
constexpr std::uint32_t kMaxSubgroupLanes = 64;

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
  std::string text = std::to_string(knobs.tile_m) + "x" + std::to_string(knobs.tile_n) + "_k" +
                     std::to_string(knobs.k_unroll) + "_p" + std::to_string(knobs.panel_width) + "_wg" +
                     std::to_string(knobs.workgroup_size) + "_v" + std::to_string(knobs.vector_width);
  if (knobs.shared_k_tile != 0) text += "_s" + std::to_string(knobs.shared_k_tile);
  if (knobs.split_k != 1) text += "_sk" + std::to_string(knobs.split_k);
  if (knobs.workgroup_n != 0) text += "_wn" + std::to_string(knobs.workgroup_n);
  if (knobs.subgroup_broadcast != 0) text += "_sg" + std::to_string(knobs.subgroup_broadcast);
  if (knobs.texel_loads) text += "_tex";
  return text;
}

std::string to_string(const ConvKnobs& knobs) {
  return "c" + std::to_string(knobs.tile_channels) + "_w" + std::to_string(knobs.tile_width) + "_wg" +
         std::to_string(knobs.workgroup_size);
}

void check_knobs(const GemmKnobs& knobs) {
  const std::string text = to_string(knobs);
  check_range("tile_m", knobs.tile_m, kMaxGemmTile, text);
  check_range("tile_n", knobs.tile_n, knobs.subgroup_broadcast != 0 ? kMaxSubgroupGemmTileN : kMaxGemmTile, text);
  check_range("k_unroll", knobs.k_unroll, kMaxUnroll, text);
  check_range("workgroup_size", knobs.workgroup_size, kMaxWorkgroup, text);
  check_range("panel_width", knobs.panel_width, kMaxPanel, text);
  KILN_CHECK(knobs.vector_width == 1 || knobs.vector_width == 4, ErrorKind::Internal,
             "template knob vector_width = " + std::to_string(knobs.vector_width) + " is not 1 or 4 (knobs " + text +
                 ")");
  if (knobs.subgroup_broadcast != 0)
    KILN_CHECK(std::has_single_bit(knobs.subgroup_broadcast) && knobs.subgroup_broadcast <= kMaxSubgroupLanes &&
                   knobs.workgroup_size % knobs.subgroup_broadcast == 0 && knobs.shared_k_tile == 0,
               ErrorKind::Internal,
               "template knob subgroup_broadcast = " + std::to_string(knobs.subgroup_broadcast) +
                   " must be a power of two up to " + std::to_string(kMaxSubgroupLanes) +
                   " dividing the workgroup, without shared tiling (knobs " + text + ")");
  KILN_CHECK(!knobs.texel_loads || knobs.shared_k_tile == 0, ErrorKind::Internal,
             "template knob texel_loads needs the register or subgroup path, not shared tiling (knobs " + text + ")");
  if (knobs.shared_k_tile == 0) {
    KILN_CHECK(knobs.split_k == 1 && knobs.workgroup_n == 0, ErrorKind::Internal,
               "template knobs split_k and workgroup_n need shared tiling (shared_k_tile > 0) (knobs " + text + ")");
    return;
  }
  check_range("shared_k_tile", knobs.shared_k_tile, kMaxSharedKTile, text);
  check_range("split_k", knobs.split_k, kMaxWorkgroup, text);
  const std::uint32_t slice = knobs.workgroup_size / knobs.split_k;
  KILN_CHECK(std::has_single_bit(knobs.split_k) && knobs.workgroup_size % knobs.split_k == 0 &&
                 std::has_single_bit(slice),
             ErrorKind::Internal,
             "template knob split_k = " + std::to_string(knobs.split_k) +
                 " must be a power of two splitting the workgroup into power-of-two slices (knobs " + text + ")");
  KILN_CHECK(knobs.workgroup_n == 0 || (std::has_single_bit(knobs.workgroup_n) && slice % knobs.workgroup_n == 0),
             ErrorKind::Internal,
             "template knob workgroup_n = " + std::to_string(knobs.workgroup_n) +
                 " must be 0 or a power of two dividing the K slice's " + std::to_string(slice) +
                 " invocations (knobs " + text + ")");
}

void check_knobs(const ConvKnobs& knobs) {
  const std::string text = to_string(knobs);
  check_range("tile_channels", knobs.tile_channels, kMaxConvTile, text);
  check_range("tile_width", knobs.tile_width, kMaxConvTile, text);
  check_range("workgroup_size", knobs.workgroup_size, kMaxWorkgroup, text);
}

}  // namespace kiln::shaders

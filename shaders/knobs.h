// The knobs of the GEMM and convolution templates, as data: the heuristic
// (heuristic.h) picks them from the shape and the device, tests enumerate
// every configuration it can emit, and a later autotuner can search them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::shaders {

// One invocation computes a tile_m x tile_n block of C in registers.
struct GemmKnobs {
  std::uint32_t tile_m = 4;            // rows of C per invocation (register block)
  std::uint32_t tile_n = 4;            // columns of C per invocation
  std::uint32_t k_unroll = 4;          // K steps per loop iteration (a remainder loop takes the rest)
  std::uint32_t workgroup_size = 64;   // invocations per workgroup
  // Column blocks that neighbouring invocations span before moving to the
  // next row block: a raster order in panels of B, so invocations that run
  // one after another (lavapipe runs a workgroup's subgroups in turn) reuse
  // the same columns of B from cache instead of streaming all of B per row
  // block. 1: row blocks vary fastest.
  std::uint32_t panel_width = 8;
  // 4: load A along K and B along N as vec4 where the problem's strides and
  // alignment allow (build_gemm falls back to scalar loads per operand);
  // 1: scalar loads only. Devices that scalarise buffer loads (lavapipe) pay
  // per load instruction, so vec4 loads cut a GEMM's loads per FMA by 4.
  std::uint32_t vector_width = 4;
  // Shared-memory tiling (GPUs): 0 is off (the register path above). Else the
  // workgroup computes a block of C together: each K step its invocations
  // load a (block_m x shared_k_tile * split_k) tile of A and the matching
  // tile of B into shared memory, synchronise, and each computes its
  // tile_m x tile_n register block from shared memory. k_unroll and
  // panel_width do not apply; vector_width does not either (shared loads are
  // coalesced scalar loads). See gemm_shared.h.
  std::uint32_t shared_k_tile = 0;
  // Sliced K inside the workgroup (shared tiling only): the invocations form
  // split_k groups, each taking shared_k_tile rows of every K step; the
  // partial blocks are reduced through shared memory before the epilogue.
  // 1: off.
  std::uint32_t split_k = 1;
  // Invocations of one K slice along N (shared tiling only; a power of two
  // dividing the slice): 0 picks the squarest arrangement, 1 makes one column
  // of register blocks (matrix-vector products).
  std::uint32_t workgroup_n = 0;
  // Subgroup broadcast (register path; for CPU Vulkan drivers such as
  // lavapipe): 0 is off; else the lanes S of the target's subgroups, which
  // then compute a tile_m x (S * tile_n) block of Y together, each lane
  // tile_n consecutive columns of the same rows. The lanes load A's rows
  // once for S (4S with vec4 loads) K steps, each lane a different stretch
  // of K, and broadcast every value to the others: A costs a load per S (4S)
  // steps instead of one per step. panel_width counts subgroup blocks;
  // tile_n may be up to 64. See gemm_subgroup.h.
  std::uint32_t subgroup_broadcast = 0;
  // Read A and B through texel buffers (register and subgroup paths): RGBA32
  // texels where the operand is read as vec4, R32 ones otherwise. lavapipe
  // keeps texel fetches vectorised where it scalarises storage-buffer loads.
  bool texel_loads = false;
  // Compute Y^T = op(B)^T op(A)^T instead (every path; not with a gathered
  // B): the kernel's rows are Y's columns, so a path that spreads its lanes
  // along N (the subgroup path) spreads them along M. For products whose
  // columns are few and rows many (a late-stage 1x1 convolution at batch 1:
  // 2048 channels x 49 pixels), whose N leaves most lanes idle or
  // most vec4 groups short. tile_m and tile_n tile the swapped product.
  bool swap_operands = false;
  // Matrix units (shared tiling only; kir matrix fragments, tensor cores,
  // MFMA): matrix_m 0 is off. Else the instruction's shape (matrix_m x
  // matrix_n x matrix_k), the lanes of the subgroup that runs it and its
  // inputs' precision (kir::MatrixPrecision: what the products' operands are
  // rounded to). Each subgroup of the workgroup multiplies tile_m x tile_n
  // instruction tiles out of the shared tiles (tile_m and tile_n count
  // instructions, not elements) and the block is stored through shared
  // memory, where the epilogue reads it. matrix_lanes 1 is the one-lane
  // emulation every target runs (the cpu backend's matrix units); a target
  // runs wider ones where TargetDesc::matrix_shapes lists the shape.
  std::uint32_t matrix_m = 0, matrix_n = 0, matrix_k = 0, matrix_lanes = 0;
  std::uint8_t matrix_precision = 0;  // a kir::MatrixPrecision
  // Tiles staged in shared memory at once (shared tiling only): 1 loads a
  // step's tiles, synchronises, multiplies and synchronises again; 2 keeps
  // two sets of tiles and loads the next step's into one while the
  // invocations multiply out of the other, with one barrier per step (the
  // loads' latency hides behind the multiplies on a GPU). See gemm_shared.h.
  std::uint32_t shared_stages = 1;

  friend bool operator==(const GemmKnobs&, const GemmKnobs&) = default;
};

// How a convolution is computed.
enum class ConvAlgorithm : std::uint8_t {
  gemm_1x1,   // 1x1, stride 1, no padding: a GEMM of W [Co, Ci] and X [Ci, H*W] (GemmKnobs)
  direct,     // register-blocked direct convolution: output channels x output columns per invocation
  // any dense convolution as a GEMM of W [Co, Ci*kH*kW] and the im2col matrix,
  // gathered from X as it is read, never stored (GemmKnobs)
  implicit_gemm,
  depthwise,  // one input channel per group: output columns per invocation, no channel loop
};
const char* conv_algorithm_name(ConvAlgorithm algorithm);

// Knobs of the direct and depthwise convolutions. An invocation computes
// tile_channels output channels (of one group) x tile_width adjacent output
// columns of one output row; for each input channel and kernel row it loads
// the input row segment those columns need once and reuses it for every tap.
struct ConvKnobs {
  std::uint32_t tile_channels = 4;
  std::uint32_t tile_width = 4;
  std::uint32_t workgroup_size = 64;

  friend bool operator==(const ConvKnobs&, const ConvKnobs&) = default;
};

// "4x4_k4_p8_wg64_v4", "c4_w4_wg64": part of kernel names and logs. Shared
// tiling adds "_s8" (shared_k_tile), "_sk4" (split_k > 1), "_st2"
// (shared_stages > 1) and "_wn1" (workgroup_n set), only when on; subgroup broadcast "_sg8", texel loads
// "_tex", swapped operands "_swap" and matrix units "_mma16x8x8tf32l32"
// (shape, precision, lanes), only when on.
std::string to_string(const GemmKnobs& knobs);
std::string to_string(const ConvKnobs& knobs);

struct ConvPlan;        // conv_template.h
struct AttentionKnobs;  // attention_template.h (to_string there: "r2c64k4v4")

// A convolution plan as text: the algorithm, a colon, its knobs
// ("direct:c8_w8_wg64", "implicit_gemm:8x8_k4_p8_wg64_v4").
std::string to_string(const ConvPlan& plan);

// The inverse of to_string: throws Error(InvalidArgument) naming the field
// (or the unknown one) when `text` is malformed or a value is out of the
// templates' range. Fields are "_"-separated, each a prefix and a number (the
// GEMM's first is "MxN"); fields left out of the text keep their defaults
// where to_string leaves them out (shared tiling off, split_k 1, ...).
GemmKnobs parse_gemm_knobs(std::string_view text);
ConvKnobs parse_conv_knobs(std::string_view text);
ConvPlan parse_conv_plan(std::string_view text);
ConvAlgorithm parse_conv_algorithm(std::string_view name);
// "r2c64k4v4": fields without separators, each a letter and a number (the
// workgroup size is not part of the text: it keeps its default).
AttentionKnobs parse_attention_knobs(std::string_view text);

// Throws Error(Internal) naming the knob when a value is out of the range the
// templates support (tiles 1..8, k_unroll 1..8, panel 1..64, workgroup 1..1024,
// vector width 1 or 4; with shared tiling: shared_k_tile 1..32, split_k a power
// of two dividing the workgroup, whose slices are powers of two, workgroup_n
// a power of two dividing a slice; without: split_k 1 and workgroup_n 0;
// subgroup_broadcast 0 or a power of two up to 64 dividing the workgroup,
// only without shared tiling, which texel_loads also excludes; tile_n up to
// 64 with subgroup_broadcast, else 16; matrix units: shared tiling without
// split_k or workgroup_n, shapes 1..64 with shared_k_tile a multiple of
// matrix_k, lanes a power of two up to 64 dividing the workgroup, tiles of
// instructions 1..4, a known precision).
void check_knobs(const GemmKnobs& knobs);
void check_knobs(const ConvKnobs& knobs);

}  // namespace kiln::shaders

// The register path's parts that the subgroup path (gemm_subgroup.h) shares:
// the K step, the block coordinates and the output stage.
#pragma once

#include "shaders/gemm_template.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::shaders::detail {

// Vector index bases, set for each operand loaded as vec4: A's row r starts
// at vec4 a_vrows[r]; columns 4q..4q+3 of B's block start at b_vcols[q].
// b_loaded: B's elements were declared by the caller as b<suffix>_<j>
// (the subgroup path's vec4 loads along K).
struct VectorBases {
  std::vector<kir::Expr> a_vrows, b_vcols;
  bool b_loaded = false;
};

// Where a gathered B (p.gather_b) is read in one K step: element
// (outer * taps + tap, column).
struct GatherStep {
  kir::Expr outer;
  std::int64_t tap = 0;
};

// Declares `names` from one vec4 at vector index `at` of `buffer`.
void append_vector_load(std::vector<kir::Stmt>& out, kir::Buf buffer, kir::Expr at, std::vector<std::string> names);

// One K step at k = kk + offset: load tile_m elements of A and tile_n of B,
// then tile_m * tile_n multiply-adds into the accumulators acc<i>_<j>. With
// vector bases, B's elements come as vec4 along N; A's were declared by the
// caller as a<suffix>_<i> (a_loaded). A gathered B is read at `gather`.
void append_k_step(std::vector<kir::Stmt>& out, const GemmProblem& p, const GemmKnobs& knobs,
                   const std::vector<kir::Expr>& a_rows, const std::vector<kir::Expr>& b_cols,
                   const VectorBases& vec, kir::Expr kk, std::int64_t offset, const std::string& suffix,
                   bool a_loaded, const GatherStep& gather = {});

// The block coordinates {batch, panel, row block, column block in the panel}
// of block `linear`. Unlike detail::split_index, extents of 1 keep their
// division and remainder: the structure depends only on whether the GEMM is
// batched, not on its shape.
std::vector<kir::Expr> split_blocks(std::vector<kir::Stmt>& body, const kir::Expr& linear, std::int64_t batch,
                                    std::int64_t panels, std::int64_t m_blocks, std::int64_t panel);

// Where the output stage writes: the tile's rows and columns (unclamped),
// the condition for storing anything (false past the last block of a
// partial panel), Y's base and the batch entry.
struct OutputTile {
  std::vector<kir::Expr> rows, cols;
  kir::Expr in_tile;
  kir::Expr y_base, batch;
};

// Stores the tile: each row's values (p.epilogue of its accumulators), as
// vec4 stores along N where the layout allows (see gemm_template.h), under
// guards only for the edges the shape has: a row guard unless M is a
// multiple of tile_m, a column-group guard unless N is one of tile_n.
void append_output_stage(kir::Kernel& kernel, const GemmProblem& p, const GemmKnobs& knobs, const OutputTile& t);

// Declares A and B texel buffers (knobs.texel_loads): RGBA32 where the
// operand is read as vec4 and holds whole texels, R32 where it is read with
// scalar loads; a storage buffer otherwise, or when A and B are one buffer.
// b_along_k: B is read as vec4 along K (the subgroup path).
void use_texel_buffers(kir::Kernel& kernel, const GemmProblem& p, bool a_vector, bool b_vector,
                       bool b_along_k = false);

}  // namespace kiln::shaders::detail

// Models whose node count grows while their arithmetic stays small, for
// measuring how compile time scales with graph size (compile_scaling.cpp)
// and for the compile_scaling test suite. Written with kiln::Builder only.
#pragma once

#include <kiln/model.h>

#include <cstdint>

namespace kiln::tools::bench {

// `nodes` Relu nodes one after another on an input "x" of `shape`; output "y".
Model relu_chain(std::int64_t nodes, const Shape& shape = {4, 64});

// The sizes of one pre-LN transformer block; small, so that the node count,
// not the arithmetic, grows with the number of blocks.
struct TransformerShape {
  std::int64_t tokens = 8;
  std::int64_t hidden = 16;
  std::int64_t heads = 2;
  std::int64_t mlp = 32;  // the MLP's inner width
};

// Nodes one block adds (LayerNorm, Q/K/V projections with biases,
// Reshape/Transpose into heads, scaled Softmax attention, the output
// projection, the GELU MLP as two Gemms, two residual Adds).
inline constexpr std::int64_t kTransformerBlockNodes = 27;

// `blocks` pre-LN transformer blocks on an input "x" [tokens, hidden],
// output "y"; weights from a fixed seed, scaled by 1/sqrt(fan-in).
Model transformer_stack(std::int64_t blocks, const TransformerShape& shape = {});

}  // namespace kiln::tools::bench

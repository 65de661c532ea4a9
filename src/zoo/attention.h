// Internal to src/zoo: multi-head scaled dot-product attention as
// torch.onnx.export writes it (Reshape, Transpose, MatMul, Mul, Softmax),
// shared by the transformer models of the segmentation and detection zoo.
#pragma once

#include <kiln/builder.h>

#include <cstdint>

namespace kiln::models {

class LayerWriter;

// Token-major layouts: [B, N, C] <-> [B, C, H, W].
Builder::Value tokens_from_map(Builder& b, Builder::Value map);  // flatten(2).transpose(1, 2)
Builder::Value map_from_tokens(Builder& b, Builder::Value tokens, std::int64_t height, std::int64_t width);

// softmax(q k^T / sqrt(d)) v over `heads` heads of d = C / heads channels,
// for already projected q [B, Nq, C], k and v [B, Nk, C]; returns [B, Nq, C].
// The 1/sqrt(d) factor is a constant "scale" in the writer's current scope.
Builder::Value scaled_dot_product_attention(LayerWriter& w, Builder::Value q, Builder::Value k, Builder::Value v,
                                            std::int64_t heads);

}  // namespace kiln::models

#include "src/zoo/attention.h"

#include <kiln/error.h>

#include "src/base/check.h"
#include "src/zoo/layers.h"

#include <cmath>

namespace kiln::models {

using Value = Builder::Value;

Value tokens_from_map(Builder& b, Value map) {
  const Shape s = b.shape(map);
  KILN_ASSERT(s.size() == 4);
  return b.transpose(b.reshape(map, {s[0], s[1], s[2] * s[3]}), {0, 2, 1});
}

Value map_from_tokens(Builder& b, Value tokens, std::int64_t height, std::int64_t width) {
  const Shape s = b.shape(tokens);
  KILN_CHECK(s.size() == 3 && s[1] == height * width, ErrorKind::ShapeMismatch,
             "map_from_tokens: tokens " + shape_str(s) + " do not form a " + std::to_string(height) + "x" +
                 std::to_string(width) + " map");
  return b.reshape(b.transpose(tokens, {0, 2, 1}), {s[0], s[2], height, width});
}

Value scaled_dot_product_attention(LayerWriter& w, Value q, Value k, Value v, std::int64_t heads) {
  Builder& b = w.builder();
  const Shape q_shape = b.shape(q);
  const Shape k_shape = b.shape(k);
  KILN_CHECK(q_shape.size() == 3 && k_shape.size() == 3 && b.shape(v) == k_shape && q_shape[2] == k_shape[2] &&
                 q_shape[0] == k_shape[0],
             ErrorKind::ShapeMismatch,
             "attention: expected q [B, Nq, C] and k, v [B, Nk, C], got q " + shape_str(q_shape) + ", k " +
                 shape_str(k_shape) + ", v " + shape_str(b.shape(v)));
  const std::int64_t batch = q_shape[0];
  const std::int64_t channels = q_shape[2];
  KILN_CHECK(heads >= 1 && channels % heads == 0, ErrorKind::InvalidArgument,
             "attention: " + std::to_string(channels) + " channels do not split into " + std::to_string(heads) +
                 " heads");
  const std::int64_t head_dim = channels / heads;
  auto split_heads = [&](Value x, std::vector<std::int64_t> perm) {
    return b.transpose(b.reshape(x, {batch, b.shape(x)[1], heads, head_dim}), std::move(perm));
  };
  Value qh = split_heads(q, {0, 2, 1, 3});  // [B, h, Nq, d]
  Value kt = split_heads(k, {0, 2, 3, 1});  // [B, h, d, Nk]
  Value vh = split_heads(v, {0, 2, 1, 3});  // [B, h, Nk, d]
  Value scores = b.mul(b.matmul(qh, kt), w.scalar("scale", static_cast<float>(1.0 / std::sqrt(head_dim))));
  Value context = b.matmul(b.softmax(scores, -1), vh);  // [B, h, Nq, d]
  return b.reshape(b.transpose(context, {0, 2, 1, 3}), {batch, q_shape[1], channels});
}

}  // namespace kiln::models

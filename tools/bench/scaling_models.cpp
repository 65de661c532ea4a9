#include "scaling_models.h"

#include <kiln/builder.h>

#include <cmath>
#include <random>
#include <string>

namespace kiln::tools::bench {
namespace {

using V = Builder::Value;

Tensor filled(const Shape& shape, float value) {
  Tensor t(DType::f32, shape);
  for (float& v : t.values<float>()) v = value;
  return t;
}

// Uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)): activations keep their scale through many blocks.
Tensor weight(const Shape& shape, std::int64_t fan_in, std::mt19937& rng) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
  std::uniform_real_distribution<float> dist(-bound, bound);
  Tensor t(DType::f32, shape);
  for (float& v : t.values<float>()) v = dist(rng);
  return t;
}

// x [tokens, in] @ W [in, out] + bias: a MatMul and an Add.
V linear(Builder& b, V x, std::int64_t in, std::int64_t out, const std::string& name, std::mt19937& rng) {
  V w = b.constant(name + ".weight", weight({in, out}, in, rng));
  V bias = b.constant(name + ".bias", weight({out}, in, rng));
  return b.add(b.matmul(x, w), bias);
}

V layer_norm(Builder& b, V x, std::int64_t hidden, const std::string& name) {
  return b.layer_norm(x, b.constant(name + ".weight", filled({hidden}, 1.0f)),
                      b.constant(name + ".bias", filled({hidden}, 0.0f)));
}

// [tokens, hidden] -> [heads, tokens, head_dim], or [heads, head_dim, tokens] for keys.
V split_heads(Builder& b, V x, const TransformerShape& s, bool keys) {
  V heads = b.reshape(x, {s.tokens, s.heads, s.hidden / s.heads});
  return b.transpose(heads, keys ? std::vector<std::int64_t>{1, 2, 0} : std::vector<std::int64_t>{1, 0, 2});
}

V attention(Builder& b, V x, const TransformerShape& s, std::mt19937& rng) {
  b.push_scope("attn");
  V q = split_heads(b, linear(b, x, s.hidden, s.hidden, "q", rng), s, false);
  V k = split_heads(b, linear(b, x, s.hidden, s.hidden, "k", rng), s, true);
  V v = split_heads(b, linear(b, x, s.hidden, s.hidden, "v", rng), s, false);
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.hidden / s.heads));
  V scores = b.mul(b.matmul(q, k), b.constant("scale", Tensor::scalar_f32(scale)));
  V context = b.matmul(b.softmax(scores, -1), v);
  V merged = b.reshape(b.transpose(context, {1, 0, 2}), {s.tokens, s.hidden});
  V out = linear(b, merged, s.hidden, s.hidden, "out", rng);
  b.pop_scope();
  return out;
}

V mlp(Builder& b, V x, const TransformerShape& s, std::mt19937& rng) {
  b.push_scope("mlp");
  V fc1 = b.gemm(x, b.constant("fc1.weight", weight({s.hidden, s.mlp}, s.hidden, rng)),
                 b.constant("fc1.bias", weight({s.mlp}, s.hidden, rng)));
  V fc2 = b.gemm(b.gelu(fc1), b.constant("fc2.weight", weight({s.mlp, s.hidden}, s.mlp, rng)),
                 b.constant("fc2.bias", weight({s.hidden}, s.mlp, rng)));
  b.pop_scope();
  return fc2;
}

}  // namespace

Model relu_chain(std::int64_t nodes, const Shape& shape) {
  Builder b("relu_chain_" + std::to_string(nodes));
  V x = b.input("x", DType::f32, shape);
  for (std::int64_t i = 0; i < nodes; ++i) x = b.relu(x);
  b.set_name(x, "y");
  return b.build({x});
}

Model transformer_stack(std::int64_t blocks, const TransformerShape& shape) {
  Builder b("transformer_" + std::to_string(blocks));
  std::mt19937 rng(1234);
  V x = b.input("x", DType::f32, {shape.tokens, shape.hidden});
  for (std::int64_t i = 0; i < blocks; ++i) {
    b.push_scope("block" + std::to_string(i));
    x = b.add(x, attention(b, layer_norm(b, x, shape.hidden, "ln1"), shape, rng));
    x = b.add(x, mlp(b, layer_norm(b, x, shape.hidden, "ln2"), shape, rng));
    b.pop_scope();
  }
  b.set_name(x, "y");
  return b.build({x});
}

}  // namespace kiln::tools::bench

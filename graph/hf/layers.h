// The pieces decoder architectures are made of, written as transformers'
// eager implementations compute them (the same ops in the same order and
// type, so that 16-bit models round where PyTorch rounds).
#pragma once

#include <kiln/builder.h>
#include <kiln/tensor.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::hf {

using Value = Builder::Value;

// A scalar constant of `dtype` (value rounded to it), broadcasting against anything.
Value scalar(Builder& b, const std::string& name, double value, DType dtype);
Value cast(Builder& b, Value x, DType to);

// torch.nn.Linear (weight [out, in], y = x W^T + bias) on x [..., in];
// `in_out` for GPT-2's Conv1D (weight [in, out], y = x W + bias).
Value linear(Builder& b, Value x, Value weight, std::optional<Value> bias, bool in_out = false);

// RMSNorm as Llama computes it: in f32, x * rsqrt(mean(x^2) + eps), back to
// x's type, then times the weight (in x's type).
Value rms_norm(Builder& b, Value x, Value weight, double epsilon);
// Gemma's: in f32 throughout, times (1 + weight) (`one_plus_weight`, f32),
// then back to x's type.
Value rms_norm_one_plus(Builder& b, Value x, Value one_plus_weight, double epsilon);

// An activation by transformers' ACT2FN name: silu, gelu (erf), gelu_new,
// gelu_pytorch_tanh (tanh approximation), relu. Throws Unsupported naming it otherwise.
Value activation(Builder& b, Value x, const std::string& name);
bool is_known_activation(const std::string& name);

// Rotary position embedding tables cos, sin [max_positions, head_dim] for
// RoPE with base `theta` (transformers' default rope: inv_freq in f32,
// emb = cat(freqs, freqs)), in `dtype`.
struct RotaryTables {
  Tensor cos, sin;
};
// Llama 3.1's rope_scaling ("rope_type": "llama3"): frequencies whose
// wavelength exceeds original / low_freq_factor divided by `factor`, those
// below original / high_freq_factor kept, a blend between.
struct Llama3RopeScaling {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_positions = 8192.0;
};
RotaryTables rotary_tables(std::int64_t max_positions, std::int64_t head_dim, double theta, DType dtype,
                           const std::optional<Llama3RopeScaling>& scaling = std::nullopt);
// x [B, H, L, D] rotated at the positions whose rows cos, sin [L, D] hold:
// x * cos + rotate_half(x) * sin.
Value apply_rotary(Builder& b, Value x, Value cos, Value sin);

// Causal additive mask [1, 1, L, L] of `dtype`: 0 where a query may attend
// (key <= query, and with a sliding window W, key >= query - W, as
// transformers' mask for Mistral), the type's lowest finite value elsewhere.
Tensor causal_mask(std::int64_t length, DType dtype, std::optional<std::int64_t> sliding_window = std::nullopt);

// ---- steps over a static key/value cache ----------------------------------
// A step model's interface (CausalLM::step_model): the inputs input_ids,
// position, position_ids, attention_mask and past.<i>.key/value, and the
// outputs logits and present.<i>.key/value, which write() makes as each
// layer writes its new keys and values.
class StepCache {
 public:
  StepCache(Builder& b, std::int64_t batch, std::int64_t query_length, std::int64_t cache_length,
            std::int64_t layers, std::int64_t kv_heads, std::int64_t head_dim, DType dtype);
  Value ids, position, position_ids, attention_mask;
  // The cache slots of the queries: position + [0, Lq) (i64 [Lq]).
  Value slots() const { return slots_; }
  // Layer `layer`'s caches with k, v [B, Hkv, Lq, D] written: what attention reads.
  std::pair<Value, Value> write(std::int64_t layer, Value k, Value v);
  // The model: `logits` [B, Lq, V] at the last query, then the written caches.
  Model build(Value logits);

 private:
  Builder& b_;
  Value slots_;
  Value write_indices_;  // i64 [B]: position, where each prompt's rows go
  std::vector<Value> past_, present_;
};

// A step's queries fill cache slots position + [0, Lq), where `position`
// (i64 [1]) is a run-time input: one compiled step serves every position.
Value step_positions(Builder& b, Value position, std::int64_t query_length);
// Rows `positions` (i64, any shape P) of `table` [N, D]: P + [D].
Value gather_rows(Builder& b, Value table, Value positions);
// The cache `past` [B, H, C, D] with rows write_indices[b] + [0, Lq) of each
// prompt b replaced by `update` [B, H, Lq, D] (transformers' StaticCache
// index_copy_): a TensorScatter, which writes those rows in place when the
// cache is a step's input that nothing else reads, as here.
Value write_cache(Builder& b, Value past, Value update, Value write_indices);
// The additive mask [B, 1, Lq, C] of a step: 0 where a cache slot is at or
// before the query's slot (`slots`, i64 [Lq]) and holds a token
// (`attention_mask` i64 [B, C] not 0: left padding is 0), the type's lowest
// value elsewhere (slots not yet written among them).
Value step_mask(Builder& b, Value slots, Value attention_mask, DType dtype,
                std::optional<std::int64_t> sliding_window = std::nullopt);
// The last position's row of x [B, L, V]: [B, V].
Value last_position(Builder& b, Value x);

// [B, L, H*D] -> [B, H, L, D].
Value split_heads(Builder& b, Value x, std::int64_t heads, std::int64_t head_dim);
// [B, H, L, D] -> [B, L, H*D].
Value merge_heads(Builder& b, Value x);

// softmax(Q K^T / divisor + mask) V over [B, H, L, D], the softmax in f32
// when `softmax_in_f32` (transformers' Llama family upcasts; GPT-2 does not).
// A `divisor` of the scores' type divides them as they are; an f32 one
// divides 16-bit scores in f32, rounding once, as PyTorch divides a tensor by
// a Python float.
Value attention(Builder& b, Value q, Value k, Value v, Value mask, Value divisor, bool softmax_in_f32);
// attention() with grouped-query heads: q [B, H, Lq, D] and k, v [B, Hkv, L,
// D], each key/value head serving H / Hkv query heads (transformers'
// repeat_kv), computed without repeating the keys and values: the query
// heads of a group become one head of H / Hkv x Lq rows, so the cache is
// read once per step, not copied per query head.
Value grouped_attention(Builder& b, Value q, Value k, Value v, Value mask, Value divisor, bool softmax_in_f32);

}  // namespace kiln::hf

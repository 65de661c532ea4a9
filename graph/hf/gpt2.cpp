// GPT2LMHeadModel: learned position embeddings, pre-LayerNorm blocks,
// attention from one fused c_attn projection, Conv1D weights ([in, out]),
// the head tied to the token embeddings.
#include "graph/hf/architecture.h"
#include "graph/hf/layers.h"

#include <kiln/error.h>

#include <climits>
#include <cmath>
#include <functional>

namespace kiln::hf {
namespace {

struct Gpt2 {
  CausalLMConfig common;
  double epsilon = 1e-5;
  std::string activation = "gelu_new";
  bool scale_attention = true;      // divide scores by sqrt(head_dim)
  bool scale_by_layer = false;      // and by layer index + 1
};

class Gpt2Decoder final : public Decoder {
 public:
  explicit Gpt2Decoder(Gpt2 spec) : s_(std::move(spec)) {}

  Model forward(WeightSet& weights, const ForwardShape& shape) const override {
    Builder b(s_.common.architecture);
    Value ids = b.input("input_ids", DType::i64, {shape.batch, shape.length});
    std::vector<std::int64_t> positions(static_cast<std::size_t>(shape.length));
    for (std::int64_t p = 0; p < shape.length; ++p) positions[p] = p;
    Attend attend{.positions = b.constant("position_ids", Tensor::from_i64({shape.length}, positions)),
                  .mask = b.constant("causal_mask", causal_mask(shape.length, weights.dtype())),
                  .keys_values = [](std::int64_t, Value k, Value v) { return std::pair(k, v); }};
    Value logits = body(b, weights, ids, attend);
    b.set_name(logits, "logits");
    weights.finish();
    return b.build({logits});
  }

  Model step(WeightSet& weights, const StepShape& shape) const override {
    const CausalLMConfig& c = s_.common;
    const DType dtype = weights.dtype();
    Builder b(c.architecture);
    StepCache step(b, shape.batch, shape.query_length, shape.cache_length, c.num_layers, c.num_kv_heads, c.head_dim,
                   dtype);
    Attend attend{.positions = step.position_ids,
                  .mask = step_mask(b, step.slots(), step.attention_mask, dtype),
                  .keys_values = [&](std::int64_t layer, Value k, Value v) { return step.write(layer, k, v); }};
    Value logits = body(b, weights, step.ids, attend);
    weights.finish();
    return step.build(logits);
  }

 private:
  // How attention sees positions, keys and values: the whole sequence or a step over a cache.
  struct Attend {
    Value positions;  // i64 [Lq] or [B, Lq]
    Value mask;       // [1 or B, 1, Lq, Lk]
    std::function<std::pair<Value, Value>(std::int64_t layer, Value k, Value v)> keys_values;
  };

  // The decoder from token ids [B, Lq] to logits (f32 [B, Lq, V]).
  Value body(Builder& b, WeightSet& weights, Value ids, const Attend& attend) const {
    const CausalLMConfig& c = s_.common;
    const DType dtype = weights.dtype();
    const std::int64_t h = c.hidden_size;
    // Checkpoints of GPT2LMHeadModel name the body "transformer."; those of
    // GPT2Model (openai-community/gpt2 itself) do not.
    const std::string root = weights.has("transformer.wte.weight") ? "transformer." : "";
    const auto weight = [&](const std::string& module, const std::string& name, Shape s) {
      return b.constant(module + "." + name, weights.take(root + module + "." + name, s));
    };
    Value wte = weight("wte", "weight", {c.vocab_size, h});
    Value wpe = weight("wpe", "weight", {c.max_positions, h});
    Attributes axis;
    axis.set("axis", std::int64_t{0});
    Value x = b.add(b.op("Gather", {wte, ids}, axis).at(0), gather_rows(b, wpe, attend.positions));
    const std::int64_t head_dim = c.head_dim;

    for (std::int64_t layer = 0; layer < c.num_layers; ++layer) {
      const std::string block = "h." + std::to_string(layer);
      const auto layer_norm = [&](const std::string& name, Value input) {
        return b.layer_norm(input, weight(block + "." + name, "weight", {h}), weight(block + "." + name, "bias", {h}), -1,
                            static_cast<float>(s_.epsilon));
      };
      // Masks cached by old checkpoints: the mask is made here.
      weights.ignore(root + block + ".attn.bias");
      weights.ignore(root + block + ".attn.masked_bias");
      Value a = layer_norm("ln_1", x);
      Value qkv = linear(b, a, weight(block + ".attn.c_attn", "weight", {h, 3 * h}),
                         weight(block + ".attn.c_attn", "bias", {3 * h}), true);
      const auto part = [&](std::int64_t i) {
        Attributes slice;
        slice.set("starts", std::vector<std::int64_t>{i * h});
        slice.set("ends", std::vector<std::int64_t>{(i + 1) * h});
        slice.set("axes", std::vector<std::int64_t>{-1});
        return split_heads(b, b.op("Slice", {qkv}, slice).at(0), c.num_heads, head_dim);
      };
      Value q = part(0);
      auto [k, v] = attend.keys_values(layer, part(1), part(2));
      // transformers divides by torch.full([], sqrt(head_dim), dtype=scores' type).
      double divisor = s_.scale_attention ? std::sqrt(static_cast<double>(head_dim)) : 1.0;
      if (s_.scale_by_layer) divisor *= static_cast<double>(layer + 1);
      Value o = merge_heads(b, attention(b, q, k, v, attend.mask,
                                         scalar(b, block + ".attn.divisor", divisor, dtype), false));
      x = b.add(x, linear(b, o, weight(block + ".attn.c_proj", "weight", {h, h}),
                          weight(block + ".attn.c_proj", "bias", {h}), true));
      Value m = layer_norm("ln_2", x);
      m = linear(b, m, weight(block + ".mlp.c_fc", "weight", {h, c.intermediate_size}),
                 weight(block + ".mlp.c_fc", "bias", {c.intermediate_size}), true);
      m = activation(b, m, s_.activation);
      x = b.add(x, linear(b, m, weight(block + ".mlp.c_proj", "weight", {c.intermediate_size, h}),
                          weight(block + ".mlp.c_proj", "bias", {h}), true));
    }
    x = b.layer_norm(x, weight("ln_f", "weight", {h}), weight("ln_f", "bias", {h}), -1, static_cast<float>(s_.epsilon));
    return cast(b, linear(b, x, wte, std::nullopt), DType::f32);
  }


  Gpt2 s_;
};

}  // namespace

std::unique_ptr<Decoder> make_gpt2(ConfigReader& config, CausalLMConfig& common) {
  Gpt2 s;
  common.vocab_size = config.positive_integer("vocab_size");
  common.hidden_size = config.positive_integer("n_embd");
  if (common.hidden_size > INT32_MAX / 4)
    config.unsupported("n_embd", "past 2^29, where 4 x n_embd (the MLP's width) passes the largest size kiln indexes");
  common.num_layers = config.positive_integer("n_layer");
  common.num_heads = config.positive_integer("n_head");
  common.num_kv_heads = common.num_heads;
  if (common.hidden_size % common.num_heads != 0)
    config.unsupported("n_head", "must divide n_embd (" + std::to_string(common.hidden_size) + ")");
  common.head_dim = common.hidden_size / common.num_heads;
  common.intermediate_size = config.optional_positive_integer("n_inner").value_or(4 * common.hidden_size);
  common.max_positions = config.positive_integer("n_positions");
  for (const std::int64_t size : {common.vocab_size, common.hidden_size, common.intermediate_size, common.max_positions,
                                  3 * common.hidden_size})
    if (size > INT32_MAX)
      config.unsupported("n_embd", "a size of " + std::to_string(size) + " is past 2^31 - 1, the largest kiln indexes");
  common.dtype = config.torch_dtype();
  common.tie_word_embeddings = true;  // GPT2LMHeadModel's head is always the token embeddings
  config.ignore({"tie_word_embeddings", "n_ctx"});
  const std::vector<std::int64_t> bos = config.token_ids("bos_token_id");
  if (!bos.empty()) common.bos_token_id = bos[0];
  common.eos_token_ids = config.token_ids("eos_token_id");
  const std::vector<std::int64_t> pad = config.token_ids("pad_token_id");
  if (!pad.empty()) common.pad_token_id = pad[0];
  s.epsilon = config.number_or("layer_norm_epsilon", 1e-5);
  s.activation = config.string_or("activation_function", "gelu_new");
  if (!is_known_activation(s.activation)) config.unsupported("activation_function", "not an activation kiln has");
  s.scale_attention = config.flag_or("scale_attn_weights", true);
  s.scale_by_layer = config.flag_or("scale_attn_by_inverse_layer_idx", false);
  if (config.flag_or("reorder_and_upcast_attn", false))
    config.unsupported("reorder_and_upcast_attn", "kiln computes GPT-2's attention in the model's type");
  // Dropout (inference has none) and the sequence-summary head of GPT2DoubleHeadsModel.
  config.ignore({"attn_pdrop", "embd_pdrop", "resid_pdrop", "summary_activation", "summary_first_dropout",
                 "summary_proj_to_labels", "summary_type", "summary_use_proj"});
  s.common = common;
  return std::make_unique<Gpt2Decoder>(s);
}

}  // namespace kiln::hf

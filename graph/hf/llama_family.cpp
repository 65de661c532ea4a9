#include "graph/hf/llama_family.h"

#include "graph/hf/layers.h"

#include <kiln/error.h>

#include <climits>
#include <cmath>
#include <functional>
#include <tuple>

namespace kiln::hf {
namespace {

// Pushes the scopes of a dotted module path ("model.layers.3") and pops them.
class Scope {
 public:
  Scope(Builder& b, const std::string& path) : b_(b) {
    std::size_t begin = 0;
    while (begin <= path.size()) {
      const std::size_t dot = std::min(path.find('.', begin), path.size());
      b_.push_scope(path.substr(begin, dot - begin));
      ++depth_;
      begin = dot + 1;
    }
  }
  ~Scope() {
    while (depth_-- > 0) b_.pop_scope();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Builder& b_;
  int depth_ = 0;
};

// How a layer's attention sees positions, keys and values: the whole
// sequence (forward) or a step over a static cache.
struct Attend {
  Value cos, sin;  // rows of the rotary tables at the queries' positions: [Lq, D] or [B, 1, Lq, D]
  Value mask;      // [1 or B, 1, Lq, Lk]
  // The keys and values attention reads, given the layer's new ones [B, Hkv, Lq, D].
  std::function<std::pair<Value, Value>(std::int64_t layer, Value k, Value v)> keys_values;
};

class LlamaDecoder final : public Decoder {
 public:
  explicit LlamaDecoder(LlamaFamily family) : f_(std::move(family)) {}

  Model forward(WeightSet& weights, const ForwardShape& shape) const override {
    check_sizes(weights);
    const DType dtype = weights.dtype();
    Builder b(f_.common.architecture);
    Value ids = b.input("input_ids", DType::i64, {shape.batch, shape.length});
    const RotaryTables tables = rotary_tables(shape.length, f_.common.head_dim, f_.rope_theta, dtype, f_.rope_scaling);
    Attend attend{.cos = b.constant("rotary.cos", tables.cos),
                  .sin = b.constant("rotary.sin", tables.sin),
                  .mask = b.constant("causal_mask", causal_mask(shape.length, dtype, f_.sliding_window)),
                  .keys_values = [](std::int64_t, Value k, Value v) { return std::pair(k, v); }};
    Value logits = body(b, weights, ids, attend);
    b.set_name(logits, "logits");
    weights.finish();
    return b.build({logits});
  }

  Model step(WeightSet& weights, const StepShape& shape) const override {
    check_sizes(weights);
    const CausalLMConfig& c = f_.common;
    const DType dtype = weights.dtype();
    Builder b(c.architecture);
    StepCache step(b, shape.batch, shape.query_length, shape.cache_length, c.num_layers, c.num_kv_heads, c.head_dim,
                   dtype);
    const RotaryTables tables = rotary_tables(shape.cache_length, c.head_dim, f_.rope_theta, dtype, f_.rope_scaling);
    // Each row's rotary angles at its own positions: [B, 1, Lq, D] against q, k [B, H, Lq, D].
    const Shape rows = {shape.batch, 1, shape.query_length, c.head_dim};
    Attend attend{.cos = b.reshape(gather_rows(b, b.constant("rotary.cos", tables.cos), step.position_ids), rows),
                  .sin = b.reshape(gather_rows(b, b.constant("rotary.sin", tables.sin), step.position_ids), rows),
                  .mask = step_mask(b, step.slots(), step.attention_mask, dtype, f_.sliding_window),
                  .keys_values = [&](std::int64_t layer, Value k, Value v) { return step.write(layer, k, v); }};
    Value logits = body(b, weights, step.ids, attend);
    weights.finish();
    return step.build(logits);
  }

 private:
  // The config's sizes against the weights that hold them, before any table
  // is made from them (a config can say anything).
  void check_sizes(WeightSet& weights) const {
    const CausalLMConfig& c = f_.common;
    weights.take("model.embed_tokens.weight", {c.vocab_size, c.hidden_size});
    weights.take("model.layers.0.self_attn.q_proj.weight", {c.num_heads * c.head_dim, c.hidden_size});
  }

  // The decoder from token ids [B, Lq] to logits (f32 [B, Lq, V]).
  Value body(Builder& b, WeightSet& weights, Value ids, const Attend& attend) const {
    const CausalLMConfig& c = f_.common;
    const DType dtype = weights.dtype();
    const auto weight = [&](const std::string& module, const std::string& name, Shape s) {
      return b.constant(name, weights.take(module + "." + name, s));
    };
    Value embed_tokens;
    Value x;
    {
      Scope scope(b, "model.embed_tokens");
      embed_tokens = weight("model.embed_tokens", "weight", {c.vocab_size, c.hidden_size});
      Attributes axis;
      axis.set("axis", std::int64_t{0});
      x = b.op("Gather", {embed_tokens, ids}, axis).at(0);
      if (f_.scale_embeddings) x = b.mul(x, scalar(b, "normalizer", std::sqrt(static_cast<double>(c.hidden_size)), dtype));
    }
    Value divisor = scalar(b, "attention_divisor", std::sqrt(static_cast<double>(c.head_dim)), DType::f32);

    for (std::int64_t layer = 0; layer < c.num_layers; ++layer) {
      const std::string prefix = "model.layers." + std::to_string(layer);
      Scope scope(b, prefix);
      Value h = norm(b, weights, x, prefix + ".input_layernorm");
      Value attended;
      {
        const std::string module = prefix + ".self_attn";
        Scope attn(b, "self_attn");
        const auto projection = [&](const std::string& name, std::int64_t heads, bool bias) {
          Scope proj(b, name);
          const std::int64_t out = heads * c.head_dim;
          return linear(b, h, weight(module + "." + name, "weight", {out, c.hidden_size}),
                        bias ? std::optional(weight(module + "." + name, "bias", {out})) : std::nullopt);
        };
        Value q = split_heads(b, projection("q_proj", c.num_heads, f_.qkv_bias), c.num_heads, c.head_dim);
        Value k = split_heads(b, projection("k_proj", c.num_kv_heads, f_.qkv_bias), c.num_kv_heads, c.head_dim);
        Value v = split_heads(b, projection("v_proj", c.num_kv_heads, f_.qkv_bias), c.num_kv_heads, c.head_dim);
        q = apply_rotary(b, q, attend.cos, attend.sin);
        k = apply_rotary(b, k, attend.cos, attend.sin);
        std::tie(k, v) = attend.keys_values(layer, k, v);
        Value o = merge_heads(b, grouped_attention(b, q, k, v, attend.mask, divisor, true));
        Scope proj(b, "o_proj");
        attended = linear(b, o, weight(module + ".o_proj", "weight", {c.hidden_size, c.num_heads * c.head_dim}),
                          f_.output_bias ? std::optional(weight(module + ".o_proj", "bias", {c.hidden_size}))
                                         : std::nullopt);
      }
      x = b.add(x, attended);
      h = norm(b, weights, x, prefix + ".post_attention_layernorm");
      {
        const std::string module = prefix + ".mlp";
        Scope mlp(b, "mlp");
        const auto projection = [&](const std::string& name, std::int64_t out, std::int64_t in, Value input) {
          Scope proj(b, name);
          return linear(b, input, weight(module + "." + name, "weight", {out, in}),
                        f_.mlp_bias ? std::optional(weight(module + "." + name, "bias", {out})) : std::nullopt);
        };
        Value gate = activation(b, projection("gate_proj", c.intermediate_size, c.hidden_size, h), f_.activation);
        Value up = projection("up_proj", c.intermediate_size, c.hidden_size, h);
        x = b.add(x, projection("down_proj", c.hidden_size, c.intermediate_size, b.mul(gate, up)));
      }
    }
    x = norm(b, weights, x, "model.norm");
    Scope scope(b, "lm_head");
    Value head = c.tie_word_embeddings ? embed_tokens : weight("lm_head", "weight", {c.vocab_size, c.hidden_size});
    return cast(b, linear(b, x, head, std::nullopt), DType::f32);
  }

  Value norm(Builder& b, WeightSet& weights, Value x, const std::string& module) const {
    Scope scope(b, module.substr(module.rfind('.') + 1));
    const Shape s = {f_.common.hidden_size};
    if (!f_.gemma_norm) return rms_norm(b, x, b.constant("weight", weights.take(module + ".weight", s)), f_.norm_epsilon);
    // (1 + weight) in f32, as Gemma's RMSNorm computes it.
    Tensor w = weights.take(module + ".weight", s, DType::f32);
    Tensor one_plus(DType::f32, s);
    for (std::int64_t i = 0; i < s[0]; ++i) one_plus.values<float>()[i] = 1.0f + w.values<float>()[i];
    return rms_norm_one_plus(b, x, b.constant("one_plus_weight", one_plus), f_.norm_epsilon);
  }

  LlamaFamily f_;
};

}  // namespace

namespace {
// Sizes kiln's kernels index with 32 bits, and whose products (checked
// against the weights later) do not overflow.
void check_size(const ConfigReader& config, const std::string& what, std::int64_t a, std::int64_t b) {
  if (a > INT32_MAX || b > INT32_MAX || a * b > INT32_MAX)
    config.unsupported(what.substr(0, what.find(' ')), what + " = " + std::to_string(a) + " x " + std::to_string(b) +
                                                           " is past 2^31 - 1, the largest size kiln indexes");
}
}  // namespace

namespace {
Llama3RopeScaling read_rope_scaling(const ConfigReader& config, const nlohmann::json& scaling) {
  const auto kind = scaling.is_object() ? scaling.find(scaling.contains("rope_type") ? "rope_type" : "type") : scaling.end();
  if (kind == scaling.end() || !kind->is_string() || kind->get<std::string>() != "llama3")
    config.unsupported("rope_scaling", "kiln implements Llama 3.1's (\"rope_type\": \"llama3\") only so far");
  Llama3RopeScaling s;
  for (const auto& [key, value] : scaling.items()) {
    if (key == "rope_type" || key == "type") continue;
    double* field = key == "factor"                              ? &s.factor
                    : key == "low_freq_factor"                   ? &s.low_freq_factor
                    : key == "high_freq_factor"                  ? &s.high_freq_factor
                    : key == "original_max_position_embeddings" ? &s.original_max_positions
                                                                 : nullptr;
    if (field == nullptr) config.unsupported("rope_scaling", "its field \"" + key + "\" is not one kiln implements");
    if (!value.is_number() || value.get<double>() <= 0)
      config.unsupported("rope_scaling", "its field \"" + key + "\" must be a positive number");
    *field = value.get<double>();
  }
  if (s.high_freq_factor <= s.low_freq_factor)
    config.unsupported("rope_scaling", "high_freq_factor must exceed low_freq_factor");
  return s;
}
}  // namespace

LlamaFamily read_llama_family(ConfigReader& config, CausalLMConfig& common, bool tie_by_default) {
  LlamaFamily f;
  common.vocab_size = config.positive_integer("vocab_size");
  common.hidden_size = config.positive_integer("hidden_size");
  common.intermediate_size = config.positive_integer("intermediate_size");
  common.num_layers = config.positive_integer("num_hidden_layers");
  common.num_heads = config.positive_integer("num_attention_heads");
  common.num_kv_heads = config.optional_positive_integer("num_key_value_heads").value_or(common.num_heads);
  if (common.num_heads % common.num_kv_heads != 0)
    config.unsupported("num_key_value_heads", "must divide num_attention_heads (" + std::to_string(common.num_heads) + ")");
  common.head_dim = config.optional_positive_integer("head_dim").value_or(common.hidden_size / common.num_heads);
  common.max_positions = config.positive_integer("max_position_embeddings");
  check_size(config, "num_attention_heads x head_dim", common.num_heads, common.head_dim);
  for (const char* key : {"vocab_size", "hidden_size", "intermediate_size", "max_position_embeddings"})
    check_size(config, key, config.take(key).get<std::int64_t>(), 1);
  common.dtype = config.torch_dtype();
  common.tie_word_embeddings = config.flag_or("tie_word_embeddings", tie_by_default);
  const std::vector<std::int64_t> bos = config.token_ids("bos_token_id");
  if (!bos.empty()) common.bos_token_id = bos[0];
  common.eos_token_ids = config.token_ids("eos_token_id");
  const std::vector<std::int64_t> pad = config.token_ids("pad_token_id");
  if (!pad.empty()) common.pad_token_id = pad[0];
  f.rope_theta = config.number_or("rope_theta", 10000.0);
  f.norm_epsilon = config.number_or("rms_norm_eps", 1e-6);
  if (const nlohmann::json& scaling = config.take("rope_scaling"); !scaling.is_null())
    f.rope_scaling = read_rope_scaling(config, scaling);
  // Pretraining's tensor-parallel split of the projections: the same products.
  config.ignore({"pretraining_tp"});
  return f;
}

std::unique_ptr<Decoder> make_llama_family(const LlamaFamily& family) { return std::make_unique<LlamaDecoder>(family); }

}  // namespace kiln::hf

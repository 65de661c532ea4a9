// The Llama family: pre-norm decoder blocks of grouped-query attention with
// rotary embeddings and a gated MLP, RMSNorm, as LlamaForCausalLM computes
// them; Mistral, Qwen2 and Gemma are this with other switches.
#pragma once

#include "graph/hf/architecture.h"
#include "graph/hf/layers.h"

#include <optional>

namespace kiln::hf {

struct LlamaFamily {
  CausalLMConfig common;
  double rope_theta = 10000.0;
  std::optional<Llama3RopeScaling> rope_scaling;
  // Mistral: a query attends to the keys at most this many positions back (and itself).
  std::optional<std::int64_t> sliding_window;
  double norm_epsilon = 1e-6;
  std::string activation = "silu";
  bool qkv_bias = false;   // q_proj, k_proj, v_proj have biases (Qwen2; Llama's attention_bias)
  bool output_bias = false;  // o_proj too (Llama's attention_bias)
  bool mlp_bias = false;
  // Gemma: RMSNorm in f32 times (1 + weight), embeddings times sqrt(hidden_size).
  bool gemma_norm = false;
  bool scale_embeddings = false;
};

// Reads the fields every member shares (sizes, rope_theta, rms_norm_eps,
// torch_dtype, token ids; tie_word_embeddings with the member's default) into
// `common` and the returned spec; rope_scaling: none or Llama 3.1's
// ("llama3"), any other kind refused.
LlamaFamily read_llama_family(ConfigReader& config, CausalLMConfig& common, bool tie_by_default);
std::unique_ptr<Decoder> make_llama_family(const LlamaFamily& family);

}  // namespace kiln::hf

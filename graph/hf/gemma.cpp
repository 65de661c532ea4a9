// GemmaForCausalLM: Llama's blocks with multi-query attention, a GeGLU MLP,
// RMSNorm times (1 + weight) in f32, embeddings scaled by sqrt(hidden_size)
// and the head tied to the embeddings.
#include "graph/hf/llama_family.h"

#include "graph/hf/layers.h"

namespace kiln::hf {

std::unique_ptr<Decoder> make_gemma(ConfigReader& config, CausalLMConfig& common) {
  LlamaFamily f = read_llama_family(config, common, true);
  // transformers 4.40 takes hidden_activation, else the tanh GELU (whatever hidden_act says).
  config.ignore({"hidden_act"});
  f.activation = config.string_or("hidden_activation", "gelu_pytorch_tanh");
  if (!is_known_activation(f.activation)) config.unsupported("hidden_activation", "not an activation kiln has");
  f.qkv_bias = f.output_bias = config.flag_or("attention_bias", false);
  f.gemma_norm = true;
  f.scale_embeddings = true;
  f.common = common;
  return make_llama_family(f);
}

}  // namespace kiln::hf

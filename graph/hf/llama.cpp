// LlamaForCausalLM (Llama 2 and 3, and the many checkpoints that reuse it).
#include "graph/hf/llama_family.h"

#include "graph/hf/layers.h"

namespace kiln::hf {

std::unique_ptr<Decoder> make_llama(ConfigReader& config, CausalLMConfig& common) {
  LlamaFamily f = read_llama_family(config, common, false);
  f.activation = config.string_or("hidden_act", "silu");
  if (!is_known_activation(f.activation)) config.unsupported("hidden_act", "not an activation kiln has");
  f.qkv_bias = f.output_bias = config.flag_or("attention_bias", false);
  f.mlp_bias = config.flag_or("mlp_bias", false);
  f.common = common;
  return make_llama_family(f);
}

}  // namespace kiln::hf

// Qwen2ForCausalLM: Llama's blocks with biases on q_proj, k_proj and v_proj.
#include "graph/hf/llama_family.h"

#include "graph/hf/layers.h"

namespace kiln::hf {

std::unique_ptr<Decoder> make_qwen2(ConfigReader& config, CausalLMConfig& common) {
  LlamaFamily f = read_llama_family(config, common, false);
  f.activation = config.string_or("hidden_act", "silu");
  if (!is_known_activation(f.activation)) config.unsupported("hidden_act", "not an activation kiln has");
  f.qkv_bias = true;
  if (config.flag_or("use_sliding_window", false))
    config.unsupported("use_sliding_window", "kiln does not implement sliding-window attention yet");
  // Only read with use_sliding_window.
  config.ignore({"sliding_window", "max_window_layers"});
  f.common = common;
  return make_llama_family(f);
}

}  // namespace kiln::hf

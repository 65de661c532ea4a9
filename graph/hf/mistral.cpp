// MistralForCausalLM: Llama's blocks; sliding-window attention where the
// window is shorter than the longest sequence.
#include "graph/hf/llama_family.h"

#include "graph/hf/layers.h"

namespace kiln::hf {

std::unique_ptr<Decoder> make_mistral(ConfigReader& config, CausalLMConfig& common) {
  LlamaFamily f = read_llama_family(config, common, false);
  f.activation = config.string_or("hidden_act", "silu");
  if (!is_known_activation(f.activation)) config.unsupported("hidden_act", "not an activation kiln has");
  if (const std::optional<std::int64_t> window = config.optional_positive_integer("sliding_window");
      window && *window < common.max_positions)
    config.unsupported("sliding_window", "a window shorter than max_position_embeddings (" +
                                             std::to_string(common.max_positions) +
                                             "): kiln does not implement sliding-window attention yet");
  f.common = common;
  return make_llama_family(f);
}

}  // namespace kiln::hf

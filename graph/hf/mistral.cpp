// MistralForCausalLM: Llama's blocks with sliding-window attention (a query
// sees itself and the sliding_window keys before it, as transformers 4.40's
// mask has it) where the window is shorter than the longest sequence.
#include "graph/hf/llama_family.h"

#include "graph/hf/layers.h"

namespace kiln::hf {

std::unique_ptr<Decoder> make_mistral(ConfigReader& config, CausalLMConfig& common) {
  LlamaFamily f = read_llama_family(config, common, false);
  f.activation = config.string_or("hidden_act", "silu");
  if (!is_known_activation(f.activation)) config.unsupported("hidden_act", "not an activation kiln has");
  // A window as long as the model's positions changes nothing.
  if (const std::optional<std::int64_t> window = config.optional_positive_integer("sliding_window");
      window && *window < common.max_positions)
    f.sliding_window = window;
  f.common = common;
  return make_llama_family(f);
}

}  // namespace kiln::hf

#include "graph/hf/architecture.h"
#include "src/base/check.h"

#include <kiln/error.h>

namespace kiln::hf {

const std::map<std::string, DecoderFactory>& architectures() {
  static const std::map<std::string, DecoderFactory> kArchitectures = {
      {"LlamaForCausalLM", make_llama},   {"MistralForCausalLM", make_mistral}, {"Qwen2ForCausalLM", make_qwen2},
      {"GemmaForCausalLM", make_gemma},   {"GPT2LMHeadModel", make_gpt2},
  };
  return kArchitectures;
}

WeightSet::WeightSet(std::map<std::string, Tensor> tensors, DType dtype, std::string folder)
    : tensors_(std::move(tensors)), dtype_(dtype), folder_(std::move(folder)) {}

Tensor WeightSet::take(const std::string& name, const Shape& shape) { return take(name, shape, dtype_); }

Tensor WeightSet::take(const std::string& name, const Shape& shape, DType as) {
  const auto it = tensors_.find(name);
  KILN_CHECK(it != tensors_.end(), ErrorKind::InvalidArgument,
             folder_ + ": the checkpoint has no weight '" + name + "', which the architecture needs");
  const Tensor& tensor = it->second;
  KILN_CHECK(tensor.shape() == shape, ErrorKind::Corrupt,
             folder_ + ": weight '" + name + "' is " + std::string(dtype_name(tensor.dtype())) + shape_str(tensor.shape()) +
                 "; config.json makes it " + shape_str(shape));
  KILN_CHECK(is_float(tensor.dtype()), ErrorKind::Corrupt,
             folder_ + ": weight '" + name + "' is " + std::string(dtype_name(tensor.dtype())) + ", not a float type");
  taken_.insert(name);
  return tensor.dtype() == as ? tensor : tensor.to(as);
}

void WeightSet::finish() const {
  std::string unused;
  std::size_t count = 0;
  for (const auto& [name, tensor] : tensors_)
    if (!taken_.contains(name) && ++count <= 8) unused += (unused.empty() ? "" : ", ") + name;
  if (count > 8) unused += ", ... (" + std::to_string(count - 8) + " more)";
  KILN_CHECK(count == 0, ErrorKind::InvalidArgument,
             folder_ + ": the checkpoint has weights the architecture does not use (another architecture's, or a "
                       "config.json that does not match them): " + unused);
}

}  // namespace kiln::hf

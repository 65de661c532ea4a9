// What an architecture file provides: a Decoder made from the checkpoint's
// config (CausalLMConfig's shared fields filled, its own kept), which builds
// models from the checkpoint's weights. Adding an architecture is one file
// with a make_<name>() and one row in architectures.cpp.
#pragma once

#include <kiln/builder.h>
#include <kiln/causal_lm.h>
#include <kiln/model.h>
#include <kiln/tensor.h>

#include "graph/hf/config.h"

#include <map>
#include <memory>
#include <set>
#include <string>

namespace kiln::hf {

// A checkpoint's tensors as the architecture takes them: by name, checked
// against the shape it expects, converted to the model's type.
class WeightSet {
 public:
  WeightSet(std::map<std::string, Tensor> tensors, DType dtype, std::string folder);
  bool has(const std::string& name) const { return tensors_.contains(name); }
  // The tensor named `name`, of `shape`, in the model's type (or `as`).
  // Throws InvalidArgument if the checkpoint lacks it, Corrupt for another shape.
  Tensor take(const std::string& name, const Shape& shape);
  Tensor take(const std::string& name, const Shape& shape, DType as);
  // Tensors a checkpoint may hold that no model reads (cached masks and rotary frequencies).
  void ignore(const std::string& name) { taken_.insert(name); }
  // Throws InvalidArgument naming the tensors nothing took.
  void finish() const;
  DType dtype() const { return dtype_; }

 private:
  std::map<std::string, Tensor> tensors_;
  std::set<std::string> taken_;
  DType dtype_;
  std::string folder_;
};

// The whole-sequence forward pass (CausalLM::forward_model).
struct ForwardShape {
  std::int64_t batch = 1;
  std::int64_t length = 1;
};

// A step over a static key/value cache (CausalLM::step_model).
struct StepShape {
  std::int64_t batch = 1;
  std::int64_t query_length = 1;
  std::int64_t cache_length = 1;
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Builds the model; reads its weights from `weights` (every call reads all).
  virtual Model forward(WeightSet& weights, const ForwardShape& shape) const = 0;
  virtual Model step(WeightSet& weights, const StepShape& shape) const = 0;
};

// Reads the architecture's fields of `config` (the shared ones into
// `common`), refusing any it does not implement.
using DecoderFactory = std::unique_ptr<Decoder> (*)(ConfigReader& config, CausalLMConfig& common);

// Architecture name (config.json "architectures") -> factory.
const std::map<std::string, DecoderFactory>& architectures();

std::unique_ptr<Decoder> make_llama(ConfigReader& config, CausalLMConfig& common);
std::unique_ptr<Decoder> make_mistral(ConfigReader& config, CausalLMConfig& common);
std::unique_ptr<Decoder> make_qwen2(ConfigReader& config, CausalLMConfig& common);
std::unique_ptr<Decoder> make_gemma(ConfigReader& config, CausalLMConfig& common);
std::unique_ptr<Decoder> make_gpt2(ConfigReader& config, CausalLMConfig& common);

}  // namespace kiln::hf

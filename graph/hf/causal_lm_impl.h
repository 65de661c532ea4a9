// What a kiln::CausalLM holds: a checkpoint's architecture and tensors, or
// an ONNX export run as it is.
#pragma once

#include <kiln/causal_lm.h>
#include <kiln/tensor.h>

#include "graph/hf/architecture.h"

#include <map>
#include <memory>
#include <optional>
#include <string>

namespace kiln {

struct CausalLM::Impl {
  CausalLMConfig config;
  DType dtype = DType::f32;
  std::string folder;  // the checkpoint's folder, or the export's file
  std::unique_ptr<hf::Decoder> decoder;
  // The checkpoint's tensors, each converted to dtype once (on first use).
  std::map<std::string, Tensor> tensors;
  std::optional<Model> onnx_export;
  std::string load_summary;  // CausalLM::explain()
};

}  // namespace kiln

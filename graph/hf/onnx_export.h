// A decoder exported to ONNX with its key/value cache as inputs and outputs,
// as Optimum and torch.onnx lay one out: inputs input_ids [batch, sequence],
// attention_mask [batch, past + sequence], optionally position_ids [batch,
// sequence], and per layer i past_key_values.<i>.key / .value [batch,
// kv_heads, past, head_dim]; outputs logits [batch, sequence, vocab] and
// present.<i>.key / .value [batch, kv_heads, past + sequence, head_dim]. The
// cache grows by concatenation, so the file runs as it is (a new past length
// each step, served by the compiled model's dynamic dims).
#pragma once

#include <kiln/causal_lm.h>
#include <kiln/model.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace kiln::hf {

// Where each of the layout's tensors sits in the model's inputs and outputs.
struct ExportLayout {
  std::size_t input_ids = 0;
  std::size_t attention_mask = 0;
  std::optional<std::size_t> position_ids;
  std::vector<std::size_t> past;     // per layer: key, value
  std::size_t logits = 0;
  std::vector<std::size_t> present;  // per layer: key, value
  std::int64_t vocab_size = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  DType cache_dtype = DType::f32;
};

// Finds the layout in `model` (read from `path`); throws Unsupported naming
// an input the layout does not have, InvalidArgument naming a missing
// input or output or one of the wrong type or rank.
ExportLayout export_layout(const Model& model, const std::string& path);

// Loads the export at `path` (an .onnx file) with the generic fields of a
// config.json beside it, if there is one (architectures, token ids, positions).
CausalLM load_onnx_export(const std::string& path, const CausalLMOptions& options);

}  // namespace kiln::hf

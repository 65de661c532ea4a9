// Causal language models from Hugging Face checkpoints, built with kiln's
// own ops from the checkpoint's config.json and safetensors weights:
//
//   kiln::CausalLM lm = kiln::load_causal_lm("gemma-2b");   // a Hugging Face model folder
//   kiln::Model forward = lm.forward_model(1, 7);           // input_ids [1, 7] -> logits [1, 7, vocab]
//   auto logits = kiln::compile(forward)({input_ids})[0];
//
// Architectures (config.json "architectures"): LlamaForCausalLM,
// MistralForCausalLM, Qwen2ForCausalLM, GemmaForCausalLM and
// GPT2LMHeadModel; each computes as the transformers library's eager
// implementation does, op for op, in the checkpoint's type (16-bit models
// round after each op as PyTorch does; norms and softmax in f32 where
// transformers upcasts). A config field kiln does not implement is an error
// naming it, never a silently different model.
//
// A decoder exported to ONNX with its cache as inputs and outputs (Optimum's
// and torch.onnx's layout: input_ids, attention_mask, optionally
// position_ids, past_key_values.<i>.key/.value in; logits and
// present.<i>.key/.value out) loads too, and runs as it is: see onnx_export().
#pragma once

#include <kiln/dtype.h>
#include <kiln/export.h>
#include <kiln/model.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

// What every architecture shares, read from config.json.
struct KILN_API CausalLMConfig {
  std::string architecture;  // "LlamaForCausalLM", ...
  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t num_layers = 0;
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0;  // grouped-query attention: fewer than num_heads
  std::int64_t head_dim = 0;
  std::int64_t max_positions = 0;  // the longest sequence the model takes (an export without config.json: 0, unknown)
  DType dtype = DType::f32;        // torch_dtype: the checkpoint's type
  bool tie_word_embeddings = false;
  std::optional<std::int64_t> bos_token_id;
  std::vector<std::int64_t> eos_token_ids;
  std::optional<std::int64_t> pad_token_id;
};

struct KILN_API CausalLMOptions {
  // The type the model computes and stores its weights in: f32, f16 or bf16.
  // Unset: the checkpoint's (config.json's torch_dtype). Weights of another
  // type are converted once, at load.
  std::optional<DType> dtype;
};

class KILN_API CausalLM {
 public:
  const CausalLMConfig& config() const;
  // The type the models compute in (CausalLMOptions::dtype, else the checkpoint's).
  DType dtype() const;
  // For an ONNX export, the file as loaded (converted to dtype() if that
  // was asked), which kiln::Generator runs with the cache growing a step at a
  // time on the device; forward_model and step_model then throw Unsupported.
  // Unset for a checkpoint.
  const std::optional<Model>& onnx_export() const;
  // What load_causal_lm found and did: the checkpoint's tensor types and
  // sizes, the type the models compute in, and how many tensors it
  // converted (once, at load) to get there.
  const std::string& explain() const;
  // The whole-sequence forward pass: input "input_ids" (i64 [batch, length],
  // token ids at positions 0 .. length-1, attending causally), output
  // "logits" (f32 [batch, length, vocab_size]; computed in dtype() and
  // widened, as transformers returns them). Throws InvalidArgument if length
  // is outside [1, max_positions] or batch below 1.
  Model forward_model(std::int64_t batch, std::int64_t length) const;
  // One step of generation over a static key/value cache of `cache_length`
  // slots (transformers' StaticCache). Inputs:
  //   "input_ids"       i64 [batch, query_length]: the tokens, which fill
  //                     cache slots position .. position + query_length - 1;
  //   "position"        i64 [1]: the first query's slot, a run-time value
  //                     (one compiled step serves every position);
  //   "position_ids"    i64 [batch, query_length]: each token's position in
  //                     its own sequence (rotary or learned positions); with
  //                     left padding, fewer than its slot; in [0, cache_length);
  //   "attention_mask"  i64 [batch, cache_length]: 0 for slots that hold
  //                     padding, else 1 (slots after the queries do not matter);
  //   "past.<i>.key", "past.<i>.value" per layer i: dtype() [batch,
  //                     num_kv_heads, cache_length, head_dim].
  // Outputs "logits" (f32 [batch, vocab_size], at the last query) and
  // "present.<i>.key", "present.<i>.value": the caches with the queries'
  // slots written, the next step's past. A slot after a query's is never
  // attended to, so the first step may take zero caches. Throws
  // InvalidArgument for a cache_length outside [query_length, max_positions].
  Model step_model(std::int64_t batch, std::int64_t query_length, std::int64_t cache_length) const;

  struct Impl;
  explicit CausalLM(std::shared_ptr<const Impl> impl);

 private:
  std::shared_ptr<const Impl> impl_;
};

// Loads a Hugging Face model folder: config.json and model.safetensors (or
// its shards and model.safetensors.index.json); or an ONNX export: an .onnx
// file, or a folder with model.onnx and no safetensors, with the generic
// fields (token ids, max positions) of a config.json beside it. Throws Error(NotFound) for a
// missing file, Error(Unsupported) naming an architecture or config field
// kiln does not implement, Error(Corrupt) for a malformed file or a weight
// of the wrong shape, Error(InvalidArgument) for a checkpoint without a
// weight the architecture needs or with weights it does not use.
KILN_API CausalLM load_causal_lm(const std::string& folder, const CausalLMOptions& options = {});

// The architectures load_causal_lm() builds, as config.json names them.
KILN_API std::vector<std::string> causal_lm_architectures();

}  // namespace kiln

// Decoders exported to ONNX with their cache (graph/hf/onnx_export.h).
#include "graph/hf/onnx_export.h"

#include <kiln/error.h>
#include <kiln/onnx.h>

#include "graph/hf/causal_lm_impl.h"
#include "graph/hf/config.h"
#include "src/base/check.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>

namespace kiln::hf {
namespace {

// "past_key_values.3.value" -> {3, "value"}; nullopt for any other name.
std::optional<std::pair<std::int64_t, std::string>> cache_name(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0) return std::nullopt;
  const std::string rest = name.substr(prefix.size());
  const std::size_t dot = rest.find('.');
  if (dot == std::string::npos || dot == 0 || dot > 6) return std::nullopt;
  const std::string layer = rest.substr(0, dot), kind = rest.substr(dot + 1);
  if (layer.find_first_not_of("0123456789") != std::string::npos || (kind != "key" && kind != "value")) return std::nullopt;
  return std::pair(std::stoll(layer), kind);
}

// Per layer, key then value, from names like prefix<i>.key; throws naming a gap.
std::vector<std::size_t> per_layer(const std::map<std::pair<std::int64_t, std::string>, std::size_t>& found,
                                   const std::string& prefix, const std::string& where, const std::string& path) {
  const auto layers = static_cast<std::int64_t>(found.size() / 2);
  std::vector<std::size_t> order;
  for (std::int64_t i = 0; i < layers; ++i)
    for (const char* kind : {"key", "value"}) {
      const auto it = found.find({i, kind});
      KILN_CHECK(it != found.end(), ErrorKind::InvalidArgument,
                 path + ": the export has no " + where + " " + prefix + std::to_string(i) + "." + kind + " (it has " +
                     std::to_string(found.size()) + " " + prefix + "* " + where + "s; a decoder export has a key and a value per layer)");
      order.push_back(it->second);
    }
  KILN_CHECK(2 * static_cast<std::size_t>(layers) == found.size(), ErrorKind::InvalidArgument,
             path + ": the export's " + prefix + "* " + where + "s are not a key and a value per layer");
  return order;
}

}  // namespace

ExportLayout export_layout(const Model& model, const std::string& path) {
  ExportLayout layout;
  const std::vector<TensorSpec> inputs = model.inputs();
  std::optional<std::size_t> input_ids, attention_mask;
  std::map<std::pair<std::int64_t, std::string>, std::size_t> past, present;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const TensorSpec& in = inputs[i];
    if (in.name == "input_ids") {
      input_ids = i;
    } else if (in.name == "attention_mask") {
      attention_mask = i;
    } else if (in.name == "position_ids") {
      layout.position_ids = i;
    } else if (const auto layer = cache_name(in.name, "past_key_values.")) {
      past[*layer] = i;
    } else {
      throw_error(ErrorKind::Unsupported,
                  path + ": input '" + in.name +
                      "' is not one a decoder export's generation loop feeds (input_ids, attention_mask, position_ids, "
                      "past_key_values.<i>.key and .value; Optimum's merged decoder with use_cache_branch is not "
                      "supported: export it with --no-post-process)");
    }
  }
  KILN_CHECK(input_ids && attention_mask, ErrorKind::InvalidArgument,
             path + ": a decoder export takes input_ids and attention_mask; this one has " +
                 (input_ids ? "no attention_mask" : "no input_ids"));
  KILN_CHECK(!past.empty(), ErrorKind::InvalidArgument,
             path + ": the export has no past_key_values.<i>.key/.value inputs (export it with its cache: Optimum's "
                    "text-generation-with-past task, or torch.onnx with past_key_values)");
  layout.input_ids = *input_ids;
  layout.attention_mask = *attention_mask;
  for (std::size_t i : {*input_ids, *attention_mask})
    KILN_CHECK(inputs[i].dtype == DType::i64 && inputs[i].shape.size() == 2, ErrorKind::InvalidArgument,
               path + ": input '" + inputs[i].name + "' is " + std::string(dtype_name(inputs[i].dtype)) + " of rank " +
                   std::to_string(inputs[i].shape.size()) + "; a decoder export's is i64 [batch, length]");
  layout.past = per_layer(past, "past_key_values.", "input", path);

  const TensorSpec& first = inputs[layout.past[0]];
  KILN_CHECK(first.shape.size() == 4 && is_float(first.dtype), ErrorKind::InvalidArgument,
             path + ": input '" + first.name + "' is " + std::string(dtype_name(first.dtype)) + " of rank " +
                 std::to_string(first.shape.size()) + "; a cache is floats [batch, kv_heads, past, head_dim]");
  KILN_CHECK(first.symbolic_dims.size() == 4 && !first.symbolic_dims[2].empty(), ErrorKind::InvalidArgument,
             path + ": input '" + first.name +
                 "' has a fixed past length; the cache grows a step at a time, so export it with a dynamic past axis");
  KILN_CHECK(first.symbolic_dims[1].empty() && first.symbolic_dims[3].empty(), ErrorKind::InvalidArgument,
             path + ": input '" + first.name + "' has a symbolic number of heads or head size; a decoder's are fixed");
  layout.num_kv_heads = first.shape[1];
  layout.head_dim = first.shape[3];
  layout.cache_dtype = first.dtype;
  for (std::size_t i : layout.past)
    KILN_CHECK(inputs[i].dtype == first.dtype && inputs[i].shape.size() == 4 && inputs[i].shape[1] == first.shape[1] &&
                   inputs[i].shape[3] == first.shape[3],
               ErrorKind::InvalidArgument,
               path + ": input '" + inputs[i].name + "' differs from '" + first.name + "' in type, heads or head size");

  const std::vector<TensorSpec> outputs = model.outputs();
  std::optional<std::size_t> logits;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].name == "logits") logits = i;
    else if (const auto layer = cache_name(outputs[i].name, "present.")) present[*layer] = i;
  }
  KILN_CHECK(logits.has_value(), ErrorKind::InvalidArgument, path + ": the export has no output 'logits'");
  layout.logits = *logits;
  const TensorSpec& l = outputs[*logits];
  KILN_CHECK(l.shape.size() == 3 && is_float(l.dtype), ErrorKind::InvalidArgument,
             path + ": output 'logits' is " + std::string(dtype_name(l.dtype)) + " of rank " + std::to_string(l.shape.size()) +
                 "; a decoder export's is floats [batch, sequence, vocab]");
  layout.vocab_size = l.shape[2];
  layout.present = per_layer(present, "present.", "output", path);
  KILN_CHECK(layout.present.size() == layout.past.size(), ErrorKind::InvalidArgument,
             path + ": the export has " + std::to_string(layout.past.size() / 2) + " layers of past_key_values but " +
                 std::to_string(layout.present.size() / 2) + " of present");
  return layout;
}

CausalLM load_onnx_export(const std::string& path, const CausalLMOptions& options) {
  namespace fs = std::filesystem;
  auto impl = std::make_shared<CausalLM::Impl>();
  impl->folder = path;
  Model model = load_onnx(path);
  const ExportLayout layout = export_layout(model, path);
  CausalLMConfig& c = impl->config;
  c.architecture = "ONNX export";
  c.vocab_size = layout.vocab_size;
  c.num_layers = static_cast<std::int64_t>(layout.past.size() / 2);
  c.num_kv_heads = layout.num_kv_heads;
  c.head_dim = layout.head_dim;
  c.dtype = layout.cache_dtype;

  // config.json beside the file (Optimum writes it): only what a generation
  // loop needs, as the model itself is the file.
  const fs::path config_path = fs::path(path).parent_path() / "config.json";
  std::error_code ec;
  if (fs::exists(config_path, ec)) {
    std::ifstream in(config_path);
    KILN_CHECK(in.good(), ErrorKind::Io, "cannot read '" + config_path.string() + "'");
    nlohmann::json json = nlohmann::json::parse(in, nullptr, false);
    KILN_CHECK(!json.is_discarded() && json.is_object(), ErrorKind::Corrupt, config_path.string() + ": not a JSON object");
    ConfigReader config(std::move(json), config_path.string());
    const nlohmann::json& names = config.take("architectures");
    if (names.is_array() && names.size() == 1 && names[0].is_string())
      c.architecture = names[0].get<std::string>() + " (ONNX export)";
    for (const char* key : {"max_position_embeddings", "n_positions"})
      if (const auto positions = config.optional_positive_integer(key)) c.max_positions = *positions;
    const std::vector<std::int64_t> bos = config.token_ids("bos_token_id");
    if (!bos.empty()) c.bos_token_id = bos[0];
    c.eos_token_ids = config.token_ids("eos_token_id");
    const std::vector<std::int64_t> pad = config.token_ids("pad_token_id");
    if (!pad.empty()) c.pad_token_id = pad[0];
  }

  impl->dtype = options.dtype.value_or(c.dtype);
  if (impl->dtype != c.dtype) {
    KILN_CHECK(c.dtype == DType::f32 && (impl->dtype == DType::f16 || impl->dtype == DType::bf16), ErrorKind::Unsupported,
               path + ": an export with a " + std::string(dtype_name(c.dtype)) + " cache runs in that type, not " +
                   std::string(dtype_name(impl->dtype)));
    model = model.with_float_type(impl->dtype);
  }
  impl->load_summary = c.architecture + " from '" + path + "': " + std::to_string(c.num_layers) +
                       " layers, a " + std::string(dtype_name(c.dtype)) + " cache" +
                       (impl->dtype != c.dtype ? "; computing in " + std::string(dtype_name(impl->dtype)) +
                                                     " (Model::with_float_type: weights converted once, at compile)"
                                               : "; run as exported");
  impl->onnx_export = std::move(model);
  return CausalLM(std::move(impl));
}

}  // namespace kiln::hf

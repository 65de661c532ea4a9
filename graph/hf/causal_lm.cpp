// kiln::load_causal_lm and kiln::CausalLM (include/kiln/causal_lm.h).
#include <kiln/causal_lm.h>
#include <kiln/error.h>
#include <kiln/safetensors.h>

#include "graph/hf/architecture.h"
#include "graph/hf/causal_lm_impl.h"
#include "graph/hf/onnx_export.h"
#include "src/base/check.h"

#include <filesystem>
#include <fstream>
#include <mutex>

namespace kiln {

CausalLM::CausalLM(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

const CausalLMConfig& CausalLM::config() const { return impl_->config; }

DType CausalLM::dtype() const { return impl_->dtype; }

const std::optional<Model>& CausalLM::onnx_export() const { return impl_->onnx_export; }

const std::string& CausalLM::explain() const { return impl_->load_summary; }

namespace {

// forward_model and step_model build the architecture; an export has none.
void check_built(const CausalLM::Impl& impl, const char* what) {
  KILN_CHECK(!impl.onnx_export, ErrorKind::Unsupported,
             std::string("CausalLM::") + what + ": '" + impl.folder +
                 "' is an ONNX export, whose cache grows by concatenation: kiln runs the file as it is "
                 "(CausalLM::onnx_export(), as kiln::Generator does)");
}

}  // namespace

Model CausalLM::forward_model(std::int64_t batch, std::int64_t length) const {
  check_built(*impl_, "forward_model");
  const CausalLMConfig& c = impl_->config;
  KILN_CHECK(batch >= 1, ErrorKind::InvalidArgument, "CausalLM::forward_model: batch " + std::to_string(batch) + " < 1");
  KILN_CHECK(length >= 1 && length <= c.max_positions, ErrorKind::InvalidArgument,
             "CausalLM::forward_model: length " + std::to_string(length) + " is outside [1, " +
                 std::to_string(c.max_positions) + "], the positions " + c.architecture + " '" + impl_->folder +
                 "' takes");
  hf::WeightSet weights(impl_->tensors, impl_->dtype, impl_->folder);
  return impl_->decoder->forward(weights, {.batch = batch, .length = length});
}

Model CausalLM::step_model(std::int64_t batch, std::int64_t query_length, std::int64_t cache_length) const {
  check_built(*impl_, "step_model");
  const CausalLMConfig& c = impl_->config;
  KILN_CHECK(batch >= 1 && query_length >= 1, ErrorKind::InvalidArgument,
             "CausalLM::step_model: batch " + std::to_string(batch) + " and query_length " +
                 std::to_string(query_length) + " must be at least 1");
  KILN_CHECK(cache_length >= query_length && cache_length <= c.max_positions, ErrorKind::InvalidArgument,
             "CausalLM::step_model: cache_length " + std::to_string(cache_length) + " is outside [" +
                 std::to_string(query_length) + " (query_length), " + std::to_string(c.max_positions) +
                 " (the positions " + c.architecture + " takes)]");
  hf::WeightSet weights(impl_->tensors, impl_->dtype, impl_->folder);
  return impl_->decoder->step(weights, {.batch = batch, .query_length = query_length, .cache_length = cache_length});
}

CausalLM load_causal_lm(const std::string& folder, const CausalLMOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // An ONNX export: the file, or a folder with model.onnx and no checkpoint.
  if (fs::is_regular_file(folder, ec) && fs::path(folder).extension() == ".onnx")
    return hf::load_onnx_export(folder, options);
  if (fs::is_regular_file(fs::path(folder) / "model.onnx", ec) &&
      !fs::exists(fs::path(folder) / "model.safetensors", ec) &&
      !fs::exists(fs::path(folder) / "model.safetensors.index.json", ec))
    return hf::load_onnx_export((fs::path(folder) / "model.onnx").string(), options);
  const fs::path config_path = fs::path(folder) / "config.json";
  KILN_CHECK(fs::is_directory(folder, ec), ErrorKind::NotFound,
             "'" + folder + "' is not a folder (load_causal_lm takes a Hugging Face model folder or an ONNX export)");
  KILN_CHECK(fs::exists(config_path, ec), ErrorKind::NotFound, "'" + folder + "' has no config.json");
  std::ifstream in(config_path);
  KILN_CHECK(in.good(), ErrorKind::Io, "cannot read '" + config_path.string() + "'");
  nlohmann::json json = nlohmann::json::parse(in, nullptr, false);
  KILN_CHECK(!json.is_discarded(), ErrorKind::Corrupt, config_path.string() + ": not valid JSON");
  hf::ConfigReader config(std::move(json), config_path.string());

  const nlohmann::json& names = config.take("architectures");
  KILN_CHECK(names.is_array() && names.size() == 1 && names[0].is_string(), ErrorKind::Corrupt,
             config_path.string() + ": \"architectures\" is " + names.dump() + ", not a list of one name");
  const std::string architecture = names[0].get<std::string>();
  const auto factory = hf::architectures().find(architecture);
  if (factory == hf::architectures().end()) {
    std::string known;
    for (const auto& [name, make] : hf::architectures()) known += (known.empty() ? "" : ", ") + name;
    throw_error(ErrorKind::Unsupported,
                config_path.string() + ": architecture " + architecture + " is not one kiln builds (" + known + ")");
  }
  auto impl = std::make_shared<CausalLM::Impl>();
  impl->folder = folder;
  impl->config.architecture = architecture;
  impl->decoder = factory->second(config, impl->config);
  config.finish();
  impl->dtype = options.dtype.value_or(impl->config.dtype);
  KILN_CHECK(is_float(impl->dtype), ErrorKind::InvalidArgument,
             "CausalLMOptions::dtype must be f32, f16 or bf16, not " + std::string(dtype_name(impl->dtype)));
  // Converted once here, so that every model built shares them.
  std::map<std::string, std::pair<std::size_t, std::uint64_t>> stored;  // type -> tensors, bytes
  std::size_t converted = 0;
  for (auto& [name, tensor] : load_safetensors_checkpoint(folder)) {
    auto& [count, bytes] = stored[std::string(dtype_name(tensor.dtype()))];
    ++count, bytes += tensor.nbytes();
    const bool convert = is_float(tensor.dtype()) && tensor.dtype() != impl->dtype;
    converted += convert ? 1 : 0;
    impl->tensors.emplace(name, convert ? tensor.to(impl->dtype) : tensor);
  }
  std::string types;
  for (const auto& [type, sum] : stored)
    types += (types.empty() ? "" : ", ") + std::to_string(sum.first) + " " + type + " (" +
             std::to_string(sum.second / (1024 * 1024)) + " MiB)";
  impl->load_summary = architecture + " from '" + folder + "': checkpoint tensors " + types + "; computing in " +
                       std::string(dtype_name(impl->dtype)) +
                       (converted == 0 ? ", the weights as stored"
                                       : ": " + std::to_string(converted) + " tensor(s) converted once, at load" +
                                             (options.dtype ? " (CausalLMOptions::dtype)" : ""));
  // A model built now checks the weights against the config (names, shapes, none unused).
  hf::WeightSet check(impl->tensors, impl->dtype, folder);
  impl->decoder->forward(check, {.batch = 1, .length = 1});
  return CausalLM(std::move(impl));
}

std::vector<std::string> causal_lm_architectures() {
  std::vector<std::string> names;
  for (const auto& [name, make] : hf::architectures()) names.push_back(name);
  return names;
}

}  // namespace kiln

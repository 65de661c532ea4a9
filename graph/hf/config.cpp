#include "graph/hf/config.h"

#include "src/base/check.h"

#include <kiln/error.h>

namespace kiln::hf {
namespace {

// PretrainedConfig's generic fields (generation defaults, heads for other
// tasks, export switches) and the fields every causal LM config carries that
// do not change inference: none of them changes the logits.
const std::set<std::string>& generic_fields() {
  static const std::set<std::string> kFields = {
      "_name_or_path", "add_cross_attention", "architectures", "bad_words_ids", "begin_suppress_tokens",
      "chunk_size_feed_forward", "cross_attention_hidden_size", "decoder_start_token_id", "diversity_penalty",
      "do_sample", "early_stopping", "encoder_no_repeat_ngram_size", "exponential_decay_length_penalty",
      "finetuning_task", "forced_bos_token_id", "forced_eos_token_id", "id2label", "is_decoder",
      "is_encoder_decoder", "label2id", "length_penalty", "max_length", "min_length", "model_type",
      "no_repeat_ngram_size", "num_beam_groups", "num_beams", "num_return_sequences", "output_attentions",
      "output_hidden_states", "output_scores", "prefix", "problem_type", "pruned_heads", "remove_invalid_values",
      "repetition_penalty", "return_dict", "return_dict_in_generate", "sep_token_id", "suppress_tokens",
      "task_specific_params", "temperature", "tf_legacy_loss", "tie_encoder_decoder", "tokenizer_class", "top_k",
      "top_p", "torchscript", "transformers_version", "typical_p", "use_bfloat16",
      // Training-only and cache switches.
      "initializer_range", "use_cache", "attention_dropout", "gradient_checkpointing"};
  return kFields;
}

}  // namespace

ConfigReader::ConfigReader(nlohmann::json config, std::string path) : config_(std::move(config)), path_(std::move(path)) {
  KILN_CHECK(config_.is_object(), ErrorKind::Corrupt, path_ + ": not a JSON object");
}

const nlohmann::json& ConfigReader::take(const std::string& key) {
  static const nlohmann::json kNull;
  taken_.insert(key);
  const auto it = config_.find(key);
  return it == config_.end() ? kNull : *it;
}

bool ConfigReader::has(const std::string& key) const {
  const auto it = config_.find(key);
  return it != config_.end() && !it->is_null();
}

std::optional<std::int64_t> ConfigReader::optional_positive_integer(const std::string& key) {
  const nlohmann::json& value = take(key);
  if (value.is_null()) return std::nullopt;
  KILN_CHECK(value.is_number_integer() && value.get<std::int64_t>() > 0, ErrorKind::Corrupt,
             path_ + ": \"" + key + "\" is " + value.dump() + ", not a positive integer");
  return value.get<std::int64_t>();
}

std::int64_t ConfigReader::positive_integer(const std::string& key) {
  const std::optional<std::int64_t> value = optional_positive_integer(key);
  KILN_CHECK(value.has_value(), ErrorKind::Corrupt, path_ + ": no \"" + key + "\"");
  return *value;
}

double ConfigReader::number_or(const std::string& key, double fallback) {
  const nlohmann::json& value = take(key);
  if (value.is_null()) return fallback;
  KILN_CHECK(value.is_number(), ErrorKind::Corrupt, path_ + ": \"" + key + "\" is " + value.dump() + ", not a number");
  return value.get<double>();
}

bool ConfigReader::flag_or(const std::string& key, bool fallback) {
  const nlohmann::json& value = take(key);
  if (value.is_null()) return fallback;
  KILN_CHECK(value.is_boolean(), ErrorKind::Corrupt, path_ + ": \"" + key + "\" is " + value.dump() + ", not true or false");
  return value.get<bool>();
}

std::string ConfigReader::string_or(const std::string& key, const std::string& fallback) {
  const nlohmann::json& value = take(key);
  if (value.is_null()) return fallback;
  KILN_CHECK(value.is_string(), ErrorKind::Corrupt, path_ + ": \"" + key + "\" is " + value.dump() + ", not a string");
  return value.get<std::string>();
}

std::vector<std::int64_t> ConfigReader::token_ids(const std::string& key) {
  const nlohmann::json& value = take(key);
  std::vector<std::int64_t> ids;
  const auto add = [&](const nlohmann::json& id) {
    KILN_CHECK(id.is_number_integer() && id.get<std::int64_t>() >= 0, ErrorKind::Corrupt,
               path_ + ": \"" + key + "\" is " + value.dump() + ", not a token id or a list of them");
    ids.push_back(id.get<std::int64_t>());
  };
  if (value.is_array())
    for (const nlohmann::json& id : value) add(id);
  else if (!value.is_null())
    add(value);
  return ids;
}

DType ConfigReader::torch_dtype() {
  const std::string name = string_or("torch_dtype", "float32");
  if (name == "float32") return DType::f32;
  if (name == "float16") return DType::f16;
  if (name == "bfloat16") return DType::bf16;
  unsupported("torch_dtype", "kiln's models compute in float32, float16 or bfloat16");
}

void ConfigReader::ignore(std::initializer_list<const char*> keys) {
  for (const char* key : keys) taken_.insert(key);
}

void ConfigReader::unsupported(const std::string& key, const std::string& why) const {
  const auto it = config_.find(key);
  throw_error(ErrorKind::Unsupported, path_ + ": \"" + key + "\": " + (it == config_.end() ? "absent" : it->dump()) +
                                          ": " + why);
}

void ConfigReader::finish() const {
  std::string unknown;
  for (const auto& [key, value] : config_.items())
    if (!taken_.contains(key) && !generic_fields().contains(key)) unknown += (unknown.empty() ? "" : ", ") + key;
  KILN_CHECK(unknown.empty(), ErrorKind::Unsupported,
             path_ + ": fields kiln does not implement for this architecture (the model would compute something "
                     "else): " + unknown);
}

}  // namespace kiln::hf

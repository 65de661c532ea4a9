// config.json as an architecture reads it: every field it takes is marked,
// and finish() refuses the fields nobody took (a model kiln would build
// differently from the checkpoint's author), except the generic ones that do
// not change what a causal LM computes (dropout, generation defaults, ...).
#pragma once

#include <kiln/dtype.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kiln::hf {

class ConfigReader {
 public:
  ConfigReader(nlohmann::json config, std::string path);

  // A required positive integer; Corrupt naming the field if absent or not one.
  std::int64_t positive_integer(const std::string& key);
  // An optional positive integer (absent or null: nullopt).
  std::optional<std::int64_t> optional_positive_integer(const std::string& key);
  double number_or(const std::string& key, double fallback);
  bool flag_or(const std::string& key, bool fallback);
  std::string string_or(const std::string& key, const std::string& fallback);
  // A token id or a list of them (absent or null: empty).
  std::vector<std::int64_t> token_ids(const std::string& key);
  // The field's value (null where absent), marked as taken.
  const nlohmann::json& take(const std::string& key);
  bool has(const std::string& key) const;
  // torch_dtype: float32, float16 or bfloat16 (absent: float32).
  DType torch_dtype();
  // Fields that do not change the computation for this architecture.
  void ignore(std::initializer_list<const char*> keys);
  // Throws Unsupported naming `key`, its value and `why`.
  [[noreturn]] void unsupported(const std::string& key, const std::string& why) const;
  // Throws Unsupported naming every field not taken or ignored.
  void finish() const;

  const std::string& path() const { return path_; }

 private:
  nlohmann::json config_;
  std::string path_;
  std::set<std::string> taken_;
};

}  // namespace kiln::hf

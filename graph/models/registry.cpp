// The table of built-in models behind kiln::models::names() and build().
#include <kiln/error.h>
#include <kiln/models.h>

#include "graph/models/zoo.h"

#include <array>
#include <span>
#include <string_view>

namespace kiln::models {

namespace {

constexpr std::array kCoreModels{
    ModelEntry{"resnet18", &resnet18},
};

std::vector<ModelEntry> all_entries() {
  std::vector<ModelEntry> all(kCoreModels.begin(), kCoreModels.end());
  for (std::span<const ModelEntry> family : {classification_models(), segmentation_models(), detection_models()})
    all.insert(all.end(), family.begin(), family.end());
  return all;
}

}  // namespace

std::vector<std::string> names() {
  std::vector<std::string> result;
  for (const ModelEntry& e : all_entries()) result.emplace_back(e.name);
  return result;
}

Model build(const std::string& name, const ModelOptions& options) {
  const auto entries = all_entries();
  for (const ModelEntry& e : entries)
    if (e.name == name) return e.factory(options);
  std::string known;
  for (const ModelEntry& e : entries) known += (known.empty() ? "" : ", ") + std::string(e.name);
  throw_error(ErrorKind::NotFound, "unknown model '" + name + "'; built-in models: " + known);
}

}  // namespace kiln::models

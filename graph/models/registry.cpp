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

// Shorter names people use for a family (the issue tracker's and torch hub's
// habit), mapped to the canonical one that names() lists.
struct Alias {
  std::string_view alias;
  std::string_view name;
};
constexpr std::array kAliases{
    Alias{"deeplabv3_mobilenet_v3", "deeplabv3_mobilenet_v3_large"},
    Alias{"lraspp_mobilenet_v3", "lraspp_mobilenet_v3_large"},
    Alias{"ssdlite320_mobilenet_v3", "ssdlite320_mobilenet_v3_large"},
};

std::string_view canonical_name(std::string_view name) {
  for (const Alias& a : kAliases)
    if (a.alias == name) return a.name;
  return name;
}

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
  const std::string_view wanted = canonical_name(name);
  for (const ModelEntry& e : entries)
    if (e.name == wanted) return e.factory(options);
  std::string known;
  for (const ModelEntry& e : entries) known += (known.empty() ? "" : ", ") + std::string(e.name);
  throw_error(ErrorKind::NotFound, "unknown model '" + name + "'; built-in models: " + known);
}

}  // namespace kiln::models

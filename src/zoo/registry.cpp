// The table of built-in models behind kiln::models::names(), task_of() and build().
#include <kiln/error.h>
#include <kiln/models.h>

#include "src/zoo/zoo.h"

#include <array>
#include <span>
#include <string_view>
#include <utility>

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

// A model and its task, which the family table it is listed in decides.
struct TaskedEntry {
  ModelEntry entry;
  std::string_view task;
};

std::vector<TaskedEntry> all_entries() {
  std::vector<TaskedEntry> all;
  for (const ModelEntry& e : kCoreModels) all.push_back({e, "classification"});
  const std::pair<std::span<const ModelEntry>, std::string_view> families[] = {
      {classification_models(), "classification"},
      {segmentation_models(), "segmentation"},
      {detection_models(), "detection"},
  };
  for (const auto& [family, task] : families)
    for (const ModelEntry& e : family) all.push_back({e, task});
  return all;
}

const TaskedEntry& find_entry(const std::vector<TaskedEntry>& entries, const std::string& name) {
  const std::string_view wanted = canonical_name(name);
  for (const TaskedEntry& e : entries)
    if (e.entry.name == wanted) return e;
  std::string known;
  for (const TaskedEntry& e : entries) known += (known.empty() ? "" : ", ") + std::string(e.entry.name);
  throw_error(ErrorKind::NotFound, "unknown model '" + name + "'; built-in models: " + known);
}

}  // namespace

std::int64_t usual_image_size(const std::string& name) {
  const TaskedEntry& e = find_entry(all_entries(), name);
  return e.entry.name == "ssdlite320_mobilenet_v3_large" ? 320 : 224;
}

std::vector<std::string> names() {
  std::vector<std::string> result;
  for (const TaskedEntry& e : all_entries()) result.emplace_back(e.entry.name);
  return result;
}

std::string task_of(const std::string& name) {
  const auto entries = all_entries();
  return std::string(find_entry(entries, name).task);
}

Model build(const std::string& name, const ModelOptions& options) {
  const auto entries = all_entries();
  return find_entry(entries, name).entry.factory(options);
}

}  // namespace kiln::models

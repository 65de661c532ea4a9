// The table of built-in models behind kiln::models::names() and build().
#include <kiln/error.h>
#include <kiln/models.h>

#include <array>
#include <string_view>

namespace kiln::models {

namespace {

struct Entry {
  std::string_view name;
  Model (*factory)(const ModelOptions&);
};

constexpr std::array kModels{
    Entry{"resnet18", &resnet18},
};

}  // namespace

std::vector<std::string> names() {
  std::vector<std::string> result;
  for (const Entry& e : kModels) result.emplace_back(e.name);
  return result;
}

Model build(const std::string& name, const ModelOptions& options) {
  for (const Entry& e : kModels)
    if (e.name == name) return e.factory(options);
  std::string known;
  for (const Entry& e : kModels) known += (known.empty() ? "" : ", ") + std::string(e.name);
  throw_error(ErrorKind::NotFound, "unknown model '" + name + "'; built-in models: " + known);
}

}  // namespace kiln::models

#include "commands.h"

#include <algorithm>
#include <string_view>
#include <vector>

namespace kiln::tools {

namespace {

std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* command : app.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(command->get_name());
  return names;
}

// Levenshtein distance, for the nearest command to a typo.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

const CLI::App* find_command(const CLI::App& app, const std::string& name) {
  for (const CLI::App* command : app.get_subcommands([](const CLI::App*) { return true; }))
    if (command->check_name(name)) return command;
  return nullptr;
}

std::string command_list(const CLI::App& app) {
  std::string list;
  for (const std::string& name : command_names(app)) list += (list.empty() ? "" : ", ") + name;
  return list;
}

std::string suggest_command(const CLI::App& app, const std::string& typed) {
  std::string best;
  std::size_t best_distance = 3;  // at most two edits away
  for (const std::string& name : command_names(app)) {
    const std::size_t distance = edit_distance(typed, name);
    if (distance < best_distance) best = name, best_distance = distance;
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

}  // namespace kiln::tools

// `kiln settings`: the compiler's settings table, and the values a mode, the
// environment and --set give them.
#include "commands.h"
#include "model_args.h"

#include <kiln/kiln.h>

#include <iostream>
#include <memory>

namespace kiln::tools {
namespace {

struct SettingsArgs {
  std::string mode = "default";
  std::vector<std::string> settings;
};

}  // namespace

void add_settings_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "settings", "list every compiler setting: its value for the mode (after the environment and --set), where that "
                  "value came from, its environment variable and what it does");
  auto args = std::make_shared<SettingsArgs>();
  cmd->add_option("--mode", args->mode, "compile mode: default, reduce-overhead, max-autotune")->capture_default_str();
  cmd->add_option("--set", args->settings, "a setting, NAME=VALUE (repeatable)");
  cmd->callback([args] {
    const Settings settings = Settings::resolve(parse_mode(args->mode), parse_settings(args->settings));
    std::cout << "settings for mode " << mode_name(settings.mode()) << " (value, then where it came from):\n";
    for (const Settings::Entry& e : settings.entries()) {
      std::cout << "  " << e.def->name << " = " << (e.value.empty() ? "(empty)" : e.value) << "  [" << e.origin
                << "]\n      " << e.def->doc << "\n      default " << (e.def->default_value.empty() ? "(empty)" : e.def->default_value)
                << (e.def->choices.empty() ? "" : " (" + std::string(e.def->choices) + ")") << "; environment "
                << e.def->env << "\n";
    }
  });
}

}  // namespace kiln::tools

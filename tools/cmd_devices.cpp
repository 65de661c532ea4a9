// `kiln devices`: every backend built in, available or not, and its devices.
#include "commands.h"

#include <kiln/kiln.h>

#include <nlohmann/json.hpp>

#include <iomanip>
#include <iostream>
#include <memory>

namespace kiln::tools {

void add_devices_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("devices", "list backends (available or not, with the reason) and their devices");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "print JSON instead of text");
  cmd->callback([json] {
    if (*json) {
      nlohmann::json out = nlohmann::json::array();
      for (const BackendDescription& b : list_backends()) {
        nlohmann::json devices = nlohmann::json::array();
        for (const DeviceDescription& d : b.devices) {
          nlohmann::json limits = nlohmann::json::object();
          for (const auto& [key, value] : d.limits) limits[key] = value;
          devices.push_back({{"index", d.index}, {"name", d.name}, {"type", d.type}, {"driver", d.driver},
                             {"api", d.api_version}, {"limits", limits}});
        }
        out.push_back({{"backend", b.name}, {"available", b.available}, {"unavailable_reason", b.unavailable_reason},
                       {"compiler", b.compiler}, {"offline_targets", b.offline_targets}, {"devices", devices}});
      }
      std::cout << out.dump(2) << "\n";
      return;
    }
    for (const BackendDescription& b : list_backends()) {
      std::cout << b.name << ": " << (b.available ? "available" : "unavailable: " + b.unavailable_reason) << "\n";
      std::cout << "  compiler: " << b.compiler << "\n";
      if (!b.offline_targets.empty()) {
        std::cout << "  code generation targets:";
        for (const auto& t : b.offline_targets) std::cout << " " << t;
        std::cout << "\n";
      }
      for (const DeviceDescription& d : b.devices) {
        std::cout << "  [" << d.index << "] " << d.name << "\n";
        std::cout << "      type: " << d.type << "\n";
        std::cout << "      driver: " << d.driver << "\n";
        std::cout << "      api: " << d.api_version << "\n";
        for (const auto& [key, value] : d.limits)
          std::cout << "      " << std::left << std::setw(26) << (key + ":") << value << "\n";
      }
    }
  });
}

}  // namespace kiln::tools

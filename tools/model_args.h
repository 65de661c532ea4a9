// Options shared by the commands that load a model and pick a device.
#pragma once

#include <kiln/kiln.h>

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace kiln::tools {

struct ModelArgs {
  std::string model = "resnet18";
  std::int64_t image_size = 224;
  std::int64_t batch = 1;
  std::uint64_t seed = 0;
  std::string backend = "vulkan";
  std::string device;
  std::string mode = "default";
  bool fullgraph = false;
  std::string cache_dir;

  void add_to(CLI::App& command);
  Model load() const;
  CompileOptions compile_options() const;
};

}  // namespace kiln::tools

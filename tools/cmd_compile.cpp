// `kiln compile`: a model compiled ahead of time into one file (.kiln) holding
// the compiled plan and the kernel binaries for every target asked; `kiln
// run model.kiln` and kiln::load() run it without compiling anything.
#include "commands.h"
#include "model_args.h"

#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

namespace kiln::tools {

void add_compile_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "compile", "compile a model ahead of time into a compiled-model file (.kiln): the plan and the kernel binaries "
                 "for each --target; run it with `kiln run FILE.kiln` or kiln::load()");
  auto args = std::make_shared<ModelArgs>();
  auto output = std::make_shared<std::string>();
  auto targets = std::make_shared<std::vector<std::string>>();
  auto shape_sets = std::make_shared<std::vector<std::string>>();
  args->add_to(*cmd);
  cmd->add_option("-o,--output", *output, "the file to write (.kiln); written atomically")->required();
  cmd->add_option("--target", *targets,
                  "vulkan (the first Vulkan device; vulkan:NAME picks one by index or name), cuda:sm_80,sm_90 (CUBIN "
                  "and PTX per architecture, no GPU needed) or hip:gfx90a,gfx1030 (AMD code objects); repeatable "
                  "(default: vulkan)");
  cmd->add_option("--shape-set", *shape_sets,
                  "input shapes the file serves, NAME=DIMS of each input to set, ';' between inputs (e.g. "
                  "images=1x3x640x640); repeatable: a plan per set and target, the set picked by each call's shapes "
                  "(an ONNX file with symbolic dims; default: the shapes it is imported at)");
  cmd->callback([args, output, targets, shape_sets] {
    const Model model = args->load();
    AheadOfTimeOptions options;
    if (!targets->empty()) options.targets = *targets;
    for (const std::string& spec : *shape_sets) options.shape_sets.push_back(parse_shape_set(spec));
    options.mode = parse_mode(args->mode);
    options.settings = parse_settings(args->settings);
    options.cache_dir = args->cache_dir;
    const auto start = std::chrono::steady_clock::now();
    compile_to_file(model, *output, options);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("kiln compile: %s (mode %s) for %zu target spec(s) and %zu shape set(s) -> %s (%.1f MiB) in %.1f s\n",
                model.name().c_str(), args->mode.c_str(), options.targets.size(),
                std::max<std::size_t>(options.shape_sets.size(), 1), output->c_str(),
                static_cast<double>(std::filesystem::file_size(*output)) / 1048576.0, seconds);
  });
}

}  // namespace kiln::tools

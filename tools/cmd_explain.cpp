// `kiln explain`: compile a model (or load a compiled-model file) and print what the compiler did.
#include "commands.h"
#include "model_args.h"

#include <iostream>
#include <memory>

namespace kiln::tools {

void add_explain_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("explain", "compile a model and show its graph breaks, the ops per backend, the passes, the fusion groups (each kernel and the nodes fused into it) and the memory plan");
  auto args = std::make_shared<ModelArgs>();
  args->add_to(*cmd);
  cmd->callback([args] {
    // A compiled-model file: what its plan for this device holds.
    CompiledModel compiled =
        args->compiled_file()
            ? load(args->model_file, {.backend = args->backend, .device = args->device, .cache_dir = args->cache_dir})
            : compile(args->load(), args->compile_options());
    compiled.prepare();
    std::cout << compiled.explain();
  });
}

}  // namespace kiln::tools

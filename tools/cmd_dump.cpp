// `kiln dump`: write the source of every kernel compiled mode builds for a
// model (after fusion), for each target language, plus an index of which
// nodes went into which kernel. Needs no device.
#include "commands.h"
#include "model_args.h"
#include "output_files.h"
#include "src/base/atomic_write.h"
#include "src/base/check.h"

#include <kiln/error.h>
#include <kiln/sources.h>

#include <filesystem>
#include <iostream>
#include <memory>

namespace kiln::tools {
namespace {

namespace fs = std::filesystem;

struct DumpArgs {
  std::string output_dir;
  std::string target = "all";
};

void dump(const ModelArgs& model_args, const DumpArgs& args) {
  const std::vector<std::string> targets = args.target == "all" ? source_targets() : std::vector{args.target};
  const Model model = model_args.load();
  const Settings settings = model_args.resolved_settings();
  const fs::path root(args.output_dir);
  prepare_output_dir(args.output_dir);
  std::error_code ec;

  std::string index = "# kiln dump of model '" + model.name() + "': the kernels compiled mode builds, after fusion\n";
  for (const std::string& target : targets) {
    const KernelSources sources = kernel_sources(model, target, settings);
    const fs::path dir = root / sources.language;
    fs::create_directories(dir, ec);
    KILN_CHECK(!ec, ErrorKind::Io, "cannot create '" + dir.string() + "': " + ec.message());
    index += "\n## " + sources.backend + " (" + sources.language + ", planned for " + sources.target + "): " +
             std::to_string(sources.kernels.size()) + " kernels, " + std::to_string(sources.host_steps.size()) +
             " host steps\n";
    for (const KernelSourceFile& kernel : sources.kernels) {
      base::write_file_atomically(dir / kernel.file_name, kernel.source);
      index += sources.language + "/" + kernel.file_name + ":";
      for (const auto& [node, op] : kernel.nodes) index += " " + node + " (" + op + ")";
      index += "\n";
    }
    for (const std::string& host : sources.host_steps) index += "host step: " + host + "\n";
    std::cout << sources.backend << ": " << sources.kernels.size() << " kernels -> " << dir.string() << "\n";
  }
  base::write_file_atomically(root / "index.txt", index);
  std::cout << "index: " << (root / "index.txt").string() << "\n";
}

}  // namespace

void add_dump_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "dump", "write the source of every kernel compiled mode builds for a model (after fusion), per target language");
  auto model_args = std::make_shared<ModelArgs>();
  auto args = std::make_shared<DumpArgs>();
  model_args->add_to(*cmd);
  cmd->add_option("--output-dir", args->output_dir, "folder for the sources (one subfolder per language) and index.txt")
      ->required();
  std::vector<std::string> choices = source_targets();
  std::string listed;
  for (const std::string& target : choices) listed += target + ", ";
  choices.push_back("all");
  cmd->add_option("--target", args->target, "a backend's sources (" + listed + "or all)")
      ->capture_default_str()
      ->check(CLI::IsMember(choices));
  cmd->callback([model_args, args] { dump(*model_args, *args); });
}

}  // namespace kiln::tools

// `kiln tune`: the autotuner's command group. The tuning database's
// subcommands (merge, export, import, show) are in cmd_tune_db.cpp.
//
// The tuning run itself, `kiln tune MODEL ...`, becomes this group's own
// action: replace require_subcommand(1) below by a MODEL positional, its
// options and a callback. CLI11 matches subcommand names before positionals,
// so `kiln tune merge ...` stays the subcommand and `kiln tune model.onnx`
// reaches MODEL (a model file named "show" or "merge" needs "./show").
#include "commands.h"

namespace kiln::tools {

void add_tune_command(CLI::App& app) {
  auto* tune = app.add_subcommand("tune", "the tuning database: merge, export, import, show what the autotuner measured");
  tune->require_subcommand(1);
  add_tune_database_commands(*tune);
}

}  // namespace kiln::tools

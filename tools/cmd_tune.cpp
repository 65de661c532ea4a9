// `kiln tune`: the autotuner's command group. The tuning database's
// subcommands (merge, export, import, show) are in cmd_tune_db.cpp.
//
// The tuning run itself, `kiln tune MODEL ...`, becomes this group's own
// action: replace require_subcommand(1) below by a MODEL positional, its
// options and a callback. CLI11 (2.1.2, checked) matches subcommand names
// before positionals, so `kiln tune merge ...` stays the subcommand and
// `kiln tune model.onnx` reaches MODEL (a model file named "show" needs
// "./show"). The group's callback also runs after a subcommand's: it should
// act only when tune->get_subcommands() is empty, and require MODEL then.
#include "commands.h"

namespace kiln::tools {

void add_tune_command(CLI::App& app) {
  auto* tune = app.add_subcommand("tune", "the tuning database: merge, export, import, show what the autotuner measured");
  tune->require_subcommand(1);
  add_tune_database_commands(*tune);
}

}  // namespace kiln::tools

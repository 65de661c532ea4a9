// Each `kiln` subcommand registers itself on the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>

namespace kiln::tools {

void add_devices_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_explain_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_dump_command(CLI::App& app);
void add_profile_command(CLI::App& app);
void add_settings_command(CLI::App& app);
void add_tune_command(CLI::App& app);
void add_compile_command(CLI::App& app);
void add_check_command(CLI::App& app);
// `kiln tune`'s database subcommands, registered on the `tune` group.
void add_tune_database_commands(CLI::App& tune);

}  // namespace kiln::tools

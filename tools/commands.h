// Each `kiln` subcommand registers itself on the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

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
void add_cache_command(CLI::App& app);
void add_generate_command(CLI::App& app);
// `kiln tune`'s database subcommands, registered on the `tune` group.
void add_tune_database_commands(CLI::App& tune);

// The command `name` names, or nullptr (tools/command_names.cpp).
const CLI::App* find_command(const CLI::App& app, const std::string& name);
// "devices, run, explain, ...": every command, in the order registered.
std::string command_list(const CLI::App& app);
// " (did you mean 'run'?)" for a command at most two edits from `typed`, else "".
std::string suggest_command(const CLI::App& app, const std::string& typed);

}  // namespace kiln::tools

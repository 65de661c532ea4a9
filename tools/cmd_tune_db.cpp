// `kiln tune merge|export|import|show`: the tuning database from the command
// line, through the public API (include/kiln/tune.h).
#include "bench/format.h"
#include "commands.h"
#include "src/base/check.h"

#include <kiln/error.h>
#include <kiln/tune.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace kiln::tools {
namespace {

using bench::fixed;

// --db, or the default file beside the kernel cache.
std::string database_path(const std::string& option) {
  if (!option.empty()) return option;
  const std::string path = default_tuning_database();
  KILN_CHECK(!path.empty(), ErrorKind::InvalidArgument,
             "the kernel cache is off (KILN_CACHE_DIR=off), so there is no default tuning database: give --db FILE");
  return path;
}

void print_table(const std::vector<TuningRecord>& records) {
  const std::vector<std::string> header = {"kernel", "template", "device / driver", "heuristic -> winner",
                                           "speed-up", "ok/failed", "date"};
  std::vector<std::vector<std::string>> rows;
  for (const TuningRecord& r : records) {
    rows.push_back({r.kernel, r.template_name + "@" + std::to_string(r.template_version),
                    r.backend + ":" + r.device + " / " + r.driver,
                    r.heuristic_knobs + " (" + fixed(r.heuristic_ms, 3) + " ms) -> " + r.winner_knobs + " (" +
                        fixed(r.winner_ms, 3) + " ms)",
                    fixed(r.speedup, 2) + "x",
                    std::to_string(r.candidates_ok) + "/" + std::to_string(r.candidates_failed), r.date});
  }
  std::vector<std::size_t> width(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  auto print_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      std::string cell = row[c];
      if (c + 1 < row.size()) cell.resize(width[c] + 2, ' ');
      line += cell;
    }
    std::printf("%s\n", line.c_str());
  };
  print_row(header);
  for (const auto& row : rows) print_row(row);
}

}  // namespace

void add_tune_database_commands(CLI::App& tune) {
  {
    struct Options {
      std::vector<std::string> inputs;
      std::string output;
    };
    auto o = std::make_shared<Options>();
    auto* cmd = tune.add_subcommand(
        "merge", "merge tuning databases into one; where two hold a record for one kernel, the newer wins");
    cmd->add_option("inputs", o->inputs, "tuning databases to merge (read, never changed)")->required();
    cmd->add_option("-o,--output", o->output, "the merged database (written to a temporary file, then renamed)")
        ->required();
    cmd->callback([o] {
      const std::size_t records = merge_tuning_databases(o->inputs, o->output);
      std::printf("merged %zu databases: %zu records in %s\n", o->inputs.size(), records, o->output.c_str());
    });
  }
  {
    struct Options {
      std::string db, output;
    };
    auto o = std::make_shared<Options>();
    auto* cmd = tune.add_subcommand("export", "write every tuning record to a JSON file");
    cmd->add_option("--db", o->db, "the tuning database (default: tuning.db beside the kernel cache)");
    cmd->add_option("-o,--output", o->output, "the JSON file to write")->required();
    cmd->callback([o] {
      const std::string path = database_path(o->db);
      const std::size_t records = export_tuning_database(path, o->output);
      std::printf("exported %zu records from %s to %s\n", records, path.c_str(), o->output.c_str());
    });
  }
  {
    struct Options {
      std::string input, db;
    };
    auto o = std::make_shared<Options>();
    auto* cmd = tune.add_subcommand(
        "import", "add the records of a JSON export to a tuning database (a newer record already there stays)");
    cmd->add_option("input", o->input, "the JSON file (from kiln tune export)")->required();
    cmd->add_option("--db", o->db, "the tuning database (default: tuning.db beside the kernel cache; created if absent)");
    cmd->callback([o] {
      const std::string path = database_path(o->db);
      const TuningImport result = import_tuning_database(o->input, path);
      std::printf("imported %s: %zu records added or replaced, %zu in %s\n", o->input.c_str(), result.changed,
                  result.records, path.c_str());
    });
  }
  {
    auto db_option = std::make_shared<std::string>();
    auto* cmd = tune.add_subcommand("show", "list the tuning records: kernel, template, device, heuristic -> winner, "
                                            "speed-up, candidates ok/failed (not counting unmeasured), date");
    cmd->add_option("--db", *db_option, "the tuning database (default: tuning.db beside the kernel cache)");
    cmd->callback([db_option] {
      const std::string path = database_path(*db_option);
      if (db_option->empty() && !std::filesystem::exists(std::filesystem::symlink_status(path))) {
        std::printf("no tuning database at %s (nothing tuned yet)\n", path.c_str());
        return;
      }
      const std::vector<TuningRecord> records = tuning_records(path);
      std::printf("%s: %zu records\n", path.c_str(), records.size());
      if (!records.empty()) print_table(records);
    });
  }
}

}  // namespace kiln::tools

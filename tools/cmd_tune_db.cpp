// `kiln tune merge|export|import|show`: the tuning database from the command
// line. Uses src/tune/database.h (not yet public API; see README.md).
#include "atomic_file.h"
#include "commands.h"

#include "src/tune/database.h"

#include <kiln/error.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <sys/stat.h>

namespace kiln::tools {
namespace {

// An export of a very large database is tens of MB; a bigger file is not one.
constexpr std::uintmax_t kMaxImportBytes = 1ull << 30;

// --db, or the default file beside the kernel cache.
std::string database_path(const std::string& option) {
  if (!option.empty()) return option;
  const std::string path = tune::default_database_path("");
  KILN_CHECK(!path.empty(), ErrorKind::InvalidArgument,
             "the kernel cache is off (KILN_CACHE_DIR=off), so there is no default tuning database: give --db FILE");
  return path;
}

std::string read_json_file(const std::string& path) {
  struct stat info {};
  KILN_CHECK(::stat(path.c_str(), &info) == 0, ErrorKind::NotFound, "cannot find '" + path + "'");
  KILN_CHECK(S_ISREG(info.st_mode), ErrorKind::Io, "'" + path + "' is not a regular file");
  KILN_CHECK(static_cast<std::uintmax_t>(info.st_size) <= kMaxImportBytes, ErrorKind::InvalidArgument,
             "'" + path + "' is " + std::to_string(info.st_size) + " bytes, more than a tuning export can be");
  std::ifstream in(path, std::ios::binary);
  std::string text(std::istreambuf_iterator<char>(in), {});
  KILN_CHECK(!in.bad(), ErrorKind::Io, "cannot read '" + path + "'");
  return text;
}

std::string fixed(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

void print_table(const std::vector<tune::Record>& records) {
  const std::vector<std::string> header = {"kernel", "template", "device / driver", "heuristic -> winner",
                                           "speed-up", "ok/failed", "date"};
  std::vector<std::vector<std::string>> rows;
  for (const tune::Record& r : records) {
    std::size_t ok = 0, failed = 0;
    for (const tune::CandidateResult& c : r.candidates) {
      if (c.status == tune::CandidateStatus::ok) ++ok;
      else if (c.status != tune::CandidateStatus::not_measured) ++failed;
    }
    rows.push_back({r.key.kernel, r.key.template_name + "@" + std::to_string(r.key.template_version),
                    r.key.device.backend + ":" + r.key.device.device + " / " + r.key.device.driver,
                    r.heuristic_knobs + " (" + fixed(r.heuristic_ms, 3) + " ms) -> " + r.winner_knobs + " (" +
                        fixed(r.winner_ms, 3) + " ms)",
                    fixed(r.speedup(), 2) + "x", std::to_string(ok) + "/" + std::to_string(failed),
                    r.provenance.date});
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
      tune::Database merged = tune::Database::in_memory();
      for (const std::string& input : o->inputs) merged.merge_from(tune::Database::open_read_only(input));
      merged.save_as(o->output);
      std::printf("merged %zu databases: %zu records in %s\n", o->inputs.size(), merged.size(), o->output.c_str());
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
      const tune::Database db = tune::Database::open_read_only(database_path(o->db));
      write_file_atomically(o->output, db.export_json());
      std::printf("exported %zu records from %s to %s\n", db.size(), db.path().c_str(), o->output.c_str());
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
      const std::string text = read_json_file(o->input);
      tune::Database db = tune::Database::open(database_path(o->db));
      std::size_t changed = 0;
      try {
        changed = db.import_json(text);
      } catch (const Error& e) {
        throw_error(e.kind(), "'" + o->input + "': " + e.what());
      }
      std::printf("imported %s: %zu records added or replaced, %zu in %s\n", o->input.c_str(), changed, db.size(),
                  db.path().c_str());
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
      const tune::Database db = tune::Database::open_read_only(path);
      const std::vector<tune::Record> records = db.all();
      std::printf("%s: %zu records\n", db.path().c_str(), records.size());
      if (!records.empty()) print_table(records);
    });
  }
}

}  // namespace kiln::tools

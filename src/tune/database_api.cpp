// The public face of the tuning database (include/kiln/tune.h): the
// `kiln tune show|merge|export|import` operations as library calls.
#include "src/base/atomic_write.h"
#include "src/base/check.h"
#include "src/base/printable.h"
#include "src/tune/database.h"

#include <kiln/tune.h>

#include <fstream>
#include <iterator>

#include <sys/stat.h>

namespace kiln {
namespace {

// An export of a very large database is tens of MB; a bigger file is not one.
constexpr std::uintmax_t kMaxImportBytes = 1ull << 30;

std::string read_export(const std::string& path) {
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

TuningRecord public_record(const tune::Record& r) {
  TuningRecord out;
  out.kernel = r.key.kernel;
  out.template_name = r.key.template_name;
  out.template_version = r.key.template_version;
  out.backend = r.key.device.backend;
  out.device = r.key.device.device;
  out.driver = r.key.device.driver;
  out.heuristic_knobs = r.heuristic_knobs;
  out.winner_knobs = r.winner_knobs;
  out.heuristic_ms = r.heuristic_ms;
  out.winner_ms = r.winner_ms;
  out.speedup = r.speedup();
  for (const tune::CandidateResult& c : r.candidates) {
    if (c.status == tune::CandidateStatus::ok) ++out.candidates_ok;
    else if (c.status != tune::CandidateStatus::not_measured) ++out.candidates_failed;
  }
  out.date = r.provenance.date;
  return out;
}

}  // namespace

std::string default_tuning_database(const std::string& cache_dir) { return tune::default_database_path(cache_dir); }

std::vector<TuningRecord> tuning_records(const std::string& path) {
  std::vector<TuningRecord> out;
  for (const tune::Record& r : tune::Database::open_read_only(path).all()) out.push_back(public_record(r));
  return out;
}

std::size_t merge_tuning_databases(const std::vector<std::string>& inputs, const std::string& output) {
  tune::Database merged = tune::Database::in_memory();
  for (const std::string& input : inputs) merged.merge_from(tune::Database::open_read_only(input));
  merged.save_as(output);
  return merged.size();
}

std::size_t export_tuning_database(const std::string& path, const std::string& json_file) {
  const tune::Database db = tune::Database::open_read_only(path);
  std::size_t exported = 0;
  base::write_file_atomically(json_file, db.export_json(&exported));
  return exported;
}

TuningImport import_tuning_database(const std::string& json_file, const std::string& path) {
  const std::string text = read_export(json_file);
  // A file the user names that is something else is theirs: refused, never
  // set aside and replaced as a damaged default database is.
  struct stat info {};
  std::string head(16, '\0');
  if (::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && info.st_size > 0 &&
      std::ifstream(path, std::ios::binary).read(head.data(), 16).gcount() > 0)
    KILN_CHECK(head == std::string("SQLite format 3\0", 16), ErrorKind::InvalidArgument,
               "'" + base::printable(path) + "' is not a tuning database; it is left as it is (name a new file, or a "
               "database)");
  tune::Database db = tune::Database::open(path);
  TuningImport result;
  try {
    result.changed = db.import_json(text);
  } catch (const Error& e) {
    throw_error(e.kind(), "'" + json_file + "': " + e.what());
  }
  result.records = db.size();
  return result;
}

}  // namespace kiln

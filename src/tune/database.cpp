#include "src/tune/database.h"

#include "src/base/atomic_write.h"
#include "src/base/check.h"
#include "src/base/log.h"
#include "src/base/printable.h"
#include "src/cache/compile_cache.h"
#include "src/tune/database_file.h"
#include "src/tune/record_json.h"
#include "src/tune/sqlite.h"

#include <kiln/error.h>

#include <array>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <system_error>


namespace kiln::tune {
namespace {

// "KLTD" in the file header (PRAGMA application_id): tells a kiln tuning
// database from any other SQLite file.
constexpr std::int64_t kApplicationId = 0x4B4C5444;
constexpr char kExportFormat[] = "kiln-tuning-db";

// One row per record; its candidates are a JSON array in one column, not a
// table of their own: a record is measured, written, replaced and read as a
// whole (nothing queries one candidate), so a row keeps replace-by-key one
// statement with no orphaned candidate rows, and candidate fields can grow
// without a migration. The key is the primary key, ordered so that find()'s
// lookups (backend, device, kernel, template) are a prefix of it.
constexpr char kCreateSchema[] = R"sql(
CREATE TABLE records (
  backend TEXT NOT NULL,
  device TEXT NOT NULL,
  kernel TEXT NOT NULL,
  template TEXT NOT NULL,
  template_version INTEGER NOT NULL,
  driver TEXT NOT NULL,
  heuristic_knobs TEXT NOT NULL,
  heuristic_ms REAL NOT NULL,
  winner_knobs TEXT NOT NULL,
  winner_ms REAL NOT NULL,
  candidates TEXT NOT NULL,
  date TEXT NOT NULL,
  host TEXT NOT NULL,
  kiln_version TEXT NOT NULL,
  budget_s REAL NOT NULL,
  PRIMARY KEY (backend, device, kernel, template, template_version, driver)
);
)sql";

constexpr char kColumns[] =
    "backend, device, kernel, template, template_version, driver, heuristic_knobs, heuristic_ms, winner_knobs, "
    "winner_ms, candidates, date, host, kiln_version, budget_s";
constexpr char kKeyOrder[] = " ORDER BY kernel, template, template_version, backend, device, driver";

std::string display_path(const std::string& path) { return path.empty() ? "(in memory)" : path; }

// SQLite's failure as kiln's error, naming the file and what was being done.
[[noreturn]] void fail(const sql::Failure& f, const std::string& path, const std::string& doing) {
  const std::string message = "tuning database " + display_path(path) + ": " + doing + ": " + f.message;
  if (f.is_corruption()) throw_error(ErrorKind::Corrupt, message);
  throw_error(ErrorKind::Io, f.is_busy() ? message + " (other processes kept it locked)" : message);
}

// Throws Corrupt naming the record when a field is not what kiln writes
// (text that is not UTF-8, candidates that are not JSON).
Record read_row(const sql::Statement& s, const std::string& path) {
  static constexpr std::array<std::pair<int, const char*>, 11> kTextColumns = {{
      {0, "backend"}, {1, "device"}, {2, "kernel"}, {3, "template"}, {5, "driver"}, {6, "heuristic knobs"},
      {8, "winner knobs"}, {10, "candidates"}, {11, "date"}, {12, "host"}, {13, "kiln version"}}};
  for (const auto& [column, name] : kTextColumns)
    KILN_CHECK(base::is_valid_utf8(s.text(column)), ErrorKind::Corrupt,
               "tuning database " + display_path(path) + ", record for '" + base::printable(s.text(2).substr(0, 200)) +
                   "': its " + name + " is not UTF-8 text");
  Record r;
  r.key.device.backend = s.text(0);
  r.key.device.device = s.text(1);
  r.key.kernel = s.text(2);
  r.key.template_name = s.text(3);
  r.key.template_version = static_cast<int>(s.integer(4));
  r.key.device.driver = s.text(5);
  r.heuristic_knobs = s.text(6);
  r.heuristic_ms = s.real(7);
  r.winner_knobs = s.text(8);
  r.winner_ms = s.real(9);
  const std::string where =
      "tuning database " + display_path(path) + ", record for '" + base::printable(r.key.kernel.substr(0, 200)) + "'";
  nlohmann::json candidates = nlohmann::json::parse(s.text(10), nullptr, /*allow_exceptions=*/false);
  if (candidates.is_discarded()) throw_error(ErrorKind::Corrupt, where + ": its candidates are not JSON");
  r.candidates = candidates_from_json(candidates, where);
  r.provenance.date = s.text(11);
  r.provenance.host = s.text(12);
  r.provenance.kiln_version = s.text(13);
  r.provenance.budget_s = s.real(14);
  return r;
}

void bind_record(sql::Statement& s, const Record& r) {
  s.bind(1, r.key.device.backend)
      .bind(2, r.key.device.device)
      .bind(3, r.key.kernel)
      .bind(4, r.key.template_name)
      .bind(5, std::int64_t{r.key.template_version})
      .bind(6, r.key.device.driver)
      .bind(7, r.heuristic_knobs)
      .bind(8, r.heuristic_ms)
      .bind(9, r.winner_knobs)
      .bind(10, r.winner_ms)
      .bind(11, candidates_to_json(r.candidates).dump())
      .bind(12, r.provenance.date)
      .bind(13, r.provenance.host)
      .bind(14, r.provenance.kiln_version)
      .bind(15, r.provenance.budget_s);
}

const std::string kInsert =
    std::string("INSERT OR REPLACE INTO records (") + kColumns + ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
const std::string kSelectExact = std::string("SELECT ") + kColumns +
                                 " FROM records WHERE backend=? AND device=? AND kernel=? AND template=? AND "
                                 "template_version=? AND driver=?";

void insert(sql::Statement& s, const Record& r) {
  s.reset();
  bind_record(s, r);
  s.run();
}

// read_row, or for a damaged record a warning naming it and nullopt: one
// damaged record costs that record, never the database's other records.
std::optional<Record> read_row_or_skip(const sql::Statement& s, const std::string& path) {
  try {
    return read_row(s, path);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Corrupt) throw;
    base::log(base::LogLevel::warning, std::string(e.what()) + "; skipped");
    return std::nullopt;
  }
}

std::optional<Record> select_exact(sql::Statement& s, const RecordKey& k, const std::string& path) {
  s.reset();
  s.bind(1, k.device.backend).bind(2, k.device.device).bind(3, k.kernel).bind(4, k.template_name);
  s.bind(5, std::int64_t{k.template_version}).bind(6, k.device.driver);
  std::optional<Record> found;
  if (s.step()) found = read_row_or_skip(s, path);  // a damaged one is replaced
  s.reset();
  return found;
}

// Whether `a` wins over `b` for one key: the newer date, then the faster
// winner, then the smaller canonical text. A total order on distinct records,
// so the survivor of a merge does not depend on the order of the inputs.
bool preferred(const Record& a, const Record& b) {
  if (a.provenance.date != b.provenance.date) return a.provenance.date > b.provenance.date;
  if (a.winner_ms != b.winner_ms) return a.winner_ms < b.winner_ms;
  return canonical_text(a) < canonical_text(b);
}

// Stores records unless the one already there for their key wins, inside
// one write transaction (its statements prepared once).
class Merger {
 public:
  Merger(sql::Connection& db, const std::string& path) : select_(db, kSelectExact), insert_(db, kInsert), path_(path) {}
  // Whether it stored `incoming`.
  bool merge(const Record& incoming) {
    std::optional<Record> existing = select_exact(select_, incoming.key, path_);
    if (existing && (!preferred(incoming, *existing) || canonical_text(incoming) == canonical_text(*existing)))
      return false;
    insert(insert_, incoming);
    return true;
  }

 private:
  sql::Statement select_, insert_;
  const std::string& path_;
};

// What opening found in an existing file.
struct Verdict {
  bool usable = true;
  bool empty = false;     // no schema yet: a new file (or one another process is creating)
  std::string label;      // "corrupt", "schema-2": the set-aside name's tag
  std::string why;        // for the warning
};

Verdict examine_snapshot(sql::Connection& db) {
  const std::int64_t application_id = db.query_int("PRAGMA application_id");
  const std::int64_t version = db.query_int("PRAGMA user_version");
  const std::int64_t objects = db.query_int("SELECT count(*) FROM sqlite_schema");
  if (application_id == 0 && version == 0 && objects == 0) return {true, true, "", ""};
  if (application_id != kApplicationId) {
    std::ostringstream why;
    why << "an SQLite database of another application (application id 0x" << std::hex << application_id << ")";
    return {false, false, "corrupt", why.str()};
  }
  if (version > kSchemaVersion)
    return {false, false, "schema-" + std::to_string(version),
            "schema version " + std::to_string(version) + ", newer than this kiln's " + std::to_string(kSchemaVersion)};
  // Migrations from older schema versions go here as the layout changes.
  if (version < 1) return {false, false, "corrupt", "schema version " + std::to_string(version) + " is not valid"};
  std::string problems;
  {
    sql::Statement check(db, "PRAGMA quick_check");
    while (check.step() && problems.size() < 400) {
      const std::string line = check.text(0);
      if (line == "ok") break;
      problems += (problems.empty() ? "" : "; ") + line;
    }
  }
  if (!problems.empty()) return {false, false, "corrupt", "it fails SQLite's integrity check (" + problems + ")"};
  return {};
}

// One read transaction: another process may be creating the schema, and
// reading its application id before that commits and its tables after
// would look like another application's file.
Verdict examine(sql::Connection& db) {
  Verdict verdict;
  db.read_transaction([&] { verdict = examine_snapshot(db); });
  return verdict;
}

// Creates the schema in an empty file; a no-op when another process did it first.
void create_schema(sql::Connection& db) {
  db.write_transaction([&] {
    if (db.query_int("PRAGMA application_id") == kApplicationId) return;
    if (db.query_int("SELECT count(*) FROM sqlite_schema") != 0)
      throw sql::Failure{SQLITE_NOTADB, "another program wrote to the file while kiln created its tables"};
    db.exec(kCreateSchema);
    db.exec("PRAGMA application_id = " + std::to_string(kApplicationId));
    db.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion));
  });
}

// Runs `step` again while SQLite is busy outside a transaction (switching
// the journal mode needs a moment alone with the file).
template <typename Step>
auto retry_busy(Step step) {
  for (int attempt = 0;; ++attempt) {
    try {
      return step();
    } catch (const sql::Failure& f) {
      if (!f.is_busy() || attempt >= 200) throw;
      ::usleep(10000);
    }
  }
}

void warn(const std::string& message) { base::log(base::LogLevel::warning, message); }

}  // namespace

const char* candidate_status_name(CandidateStatus status) {
  switch (status) {
    case CandidateStatus::ok: return "ok";
    case CandidateStatus::wrong_result: return "wrong_result";
    case CandidateStatus::compile_failed: return "compile_failed";
    case CandidateStatus::crashed: return "crashed";
    case CandidateStatus::timed_out: return "timed_out";
    case CandidateStatus::out_of_memory: return "out_of_memory";
    case CandidateStatus::not_measured: return "not_measured";
  }
  return "?";
}

const char* applicability_name(Applicability status) {
  switch (status) {
    case Applicability::applies: return "applies";
    case Applicability::no_record: return "no record";
    case Applicability::other_driver: return "other driver";
    case Applicability::stale_template: return "stale template";
  }
  return "?";
}

double Record::speedup() const {
  if (winner_knobs == heuristic_knobs || !(winner_ms > 0)) return 1.0;
  return heuristic_ms / winner_ms;
}

std::string current_utc_date() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

std::string default_database_path(const std::string& cache_dir) {
  const std::string resolved = cache_dir.empty() ? cache::default_cache_dir() : cache_dir;
  if (resolved == "off") return "";
  return (std::filesystem::path(resolved) / "tuning.db").string();
}

struct Database::Impl {
  std::string path;  // "" in memory
  std::unique_ptr<sql::Connection> db;
  mutable std::mutex mutex;  // one transaction at a time on the connection

  template <typename Body>
  void write(const std::string& doing, Body body) {
    std::lock_guard lock(mutex);
    try {
      db->write_transaction(body);
    } catch (const sql::Failure& f) {
      fail(f, path, doing);
    }
  }
  template <typename Body>
  void read(const std::string& doing, Body body) const {
    std::lock_guard lock(mutex);
    try {
      db->read_transaction(body);
    } catch (const sql::Failure& f) {
      fail(f, path, doing);
    }
  }
};

Database::Database(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Database::Database(Database&&) noexcept = default;
Database& Database::operator=(Database&&) noexcept = default;
Database::~Database() = default;

Database Database::in_memory() {
  auto impl = std::make_unique<Impl>();
  try {
    impl->db = std::make_unique<sql::Connection>(":memory:", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    create_schema(*impl->db);
  } catch (const sql::Failure& f) {
    fail(f, "", "cannot create it");
  }
  return Database(std::move(impl));
}

Database Database::open(const std::string& path) {
  if (path.empty()) return in_memory();
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) throw_error(ErrorKind::Io, "cannot create the folder of tuning database " + path + ": " + ec.message());
  }
  // A bad file is set aside and the open tried again; a few rounds cover
  // other processes setting aside or recreating the same file meanwhile.
  for (int round = 0; round < 4; ++round) {
    std::optional<FileIdentity> identity = check_database_path(path);
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    Verdict verdict;
    try {
      impl->db = std::make_unique<sql::Connection>(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
      verdict = examine(*impl->db);
      if (verdict.usable) {
        // WAL: readers never block the one writer, and a writer does not block readers.
        retry_busy([&] { return impl->db->query_text("PRAGMA journal_mode=WAL"); });
        impl->db->exec("PRAGMA synchronous=NORMAL");
        if (verdict.empty) create_schema(*impl->db);
        return Database(std::move(impl));
      }
    } catch (const sql::Failure& f) {
      if (!f.is_corruption()) {
        // Another process set the file aside and made a new one while this
        // one opened it (SQLite then fails on the old file's I/O): open again
        // what the path holds now.
        if (check_database_path(path) != identity) continue;
        fail(f, path, "cannot open it");
      }
      verdict = {false, false, "corrupt", "SQLite: " + f.message};
    }
    impl->db.reset();  // close before renaming
    if (!identity) identity = check_database_path(path);
    if (!identity) continue;
    if (std::optional<std::string> aside = set_aside(path, *identity, verdict.label))
      warn("tuning database " + path + " is not usable (" + verdict.why + "); set it aside as " + *aside +
           " and started a new one");
  }
  throw_error(ErrorKind::Io, "tuning database " + path + " kept changing while it was opened (other processes?)");
}

Database Database::open_read_only(const std::string& path) {
  std::optional<FileIdentity> identity = check_database_path(path);
  KILN_CHECK(identity.has_value(), ErrorKind::NotFound, "tuning database " + path + " does not exist");
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  Verdict verdict;
  try {
    // Read-write where the file allows, so that closing the last connection
    // removes the -wal and -shm files (a read-only connection leaves them);
    // query_only makes SQLite refuse every write on this connection.
    const int mode = ::access(path.c_str(), W_OK) == 0 ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY;
    impl->db = std::make_unique<sql::Connection>(path, mode);
    impl->db->exec("PRAGMA query_only=1");
    verdict = examine(*impl->db);
  } catch (const sql::Failure& f) {
    if (!f.is_corruption()) fail(f, path, "cannot open it");
    verdict = {false, false, "corrupt", f.message};
  }
  if (verdict.empty) verdict = {false, false, "", "an empty file"};
  KILN_CHECK(verdict.usable, ErrorKind::Corrupt, "tuning database " + path + " is not usable: " + verdict.why);
  return Database(std::move(impl));
}

const std::string& Database::path() const { return impl_->path; }

Lookup Database::find(const RecordKey& key) const {
  std::vector<Record> same_kernel;
  impl_->read("looking up a record", [&] {
    same_kernel.clear();
    sql::Statement s(*impl_->db, std::string("SELECT ") + kColumns +
                                     " FROM records WHERE backend=? AND device=? AND kernel=? AND template=?");
    s.bind(1, key.device.backend).bind(2, key.device.device).bind(3, key.kernel).bind(4, key.template_name);
    while (s.step())
      if (std::optional<Record> r = read_row_or_skip(s, impl_->path)) same_kernel.push_back(std::move(*r));
  });

  Lookup out;
  const std::string device = key.device.device + " (" + key.device.backend + ")";
  // The nearest record that does not apply: one that only needs the driver
  // it was measured under, then one for this driver, then any; the newest first.
  auto rank = [&](const Record& r) {
    if (r.key.template_version == key.template_version) return 0;
    if (r.key.device.driver == key.device.driver) return 1;
    return 2;
  };
  const Record* nearest = nullptr;
  for (const Record& r : same_kernel) {
    if (r.key == key) {
      out.status = Applicability::applies;
      out.record = r;
      char speedup[32];
      std::snprintf(speedup, sizeof speedup, "%.2fx", r.speedup());
      out.reason = "record of " + r.provenance.date + ": " + r.winner_knobs + ", " + speedup +
                   " over the heuristic (" + r.heuristic_knobs + ")";
      return out;
    }
    if (!nearest || rank(r) < rank(*nearest) || (rank(r) == rank(*nearest) && preferred(r, *nearest))) nearest = &r;
  }
  if (!nearest) {
    out.reason = "no record for this kernel on " + device;
    return out;
  }
  out.record = *nearest;
  const Record& r = *nearest;
  if (r.key.template_version == key.template_version) {
    out.status = Applicability::other_driver;
    out.reason = "record for driver " + r.key.device.driver + ", this is " + key.device.driver;
  } else {
    out.status = Applicability::stale_template;
    out.reason = "record for " + r.key.template_name + " version " + std::to_string(r.key.template_version) +
                 ", the template is at version " + std::to_string(key.template_version);
    if (r.key.device.driver != key.device.driver) out.reason += " (and driver " + r.key.device.driver + ")";
  }
  return out;
}

void Database::put(const Record& record) {
  check_record(record);
  impl_->write("storing a record", [&] {
    sql::Statement s(*impl_->db, kInsert);
    insert(s, record);
  });
}

std::vector<Record> Database::all() const {
  std::vector<Record> records;
  impl_->read("reading its records", [&] {
    records.clear();
    sql::Statement s(*impl_->db, std::string("SELECT ") + kColumns + " FROM records" + kKeyOrder);
    while (s.step())
      if (std::optional<Record> r = read_row_or_skip(s, impl_->path)) records.push_back(std::move(*r));
  });
  return records;
}

std::size_t Database::size() const {
  std::int64_t count = 0;
  impl_->read("counting its records", [&] { count = impl_->db->query_int("SELECT count(*) FROM records"); });
  return static_cast<std::size_t>(count);
}

std::size_t Database::merge_from(const Database& other) {
  if (&other == this) return 0;
  const std::vector<Record> incoming = other.all();
  std::size_t changed = 0;
  impl_->write("merging records into it", [&] {
    changed = 0;
    Merger merger(*impl_->db, impl_->path);
    for (const Record& r : incoming) changed += merger.merge(r) ? 1 : 0;
  });
  return changed;
}

std::string Database::export_json(std::size_t* exported) const {
  nlohmann::json records = nlohmann::json::array();
  for (const Record& r : all()) records.push_back(record_to_json(r));
  if (exported) *exported = records.size();
  const nlohmann::json doc = {{"format", kExportFormat}, {"schema_version", kSchemaVersion}, {"records", records}};
  return doc.dump(2) + "\n";
}

std::size_t Database::import_json(const std::string& text) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  KILN_CHECK(!doc.is_discarded(), ErrorKind::Corrupt, "tuning records: the document is not valid JSON");
  KILN_CHECK(doc.is_object() && doc.contains("format") && doc["format"] == kExportFormat, ErrorKind::Corrupt,
             std::string("tuning records: not a kiln tuning export (no \"format\": \"") + kExportFormat + "\")");
  KILN_CHECK(doc.contains("schema_version") && doc["schema_version"].is_number_integer(), ErrorKind::Corrupt,
             "tuning records: 'schema_version' is missing or not an integer");
  const auto version = doc["schema_version"].get<std::int64_t>();
  KILN_CHECK(version <= kSchemaVersion, ErrorKind::Unsupported,
             "tuning records: schema version " + std::to_string(version) + " is newer than this kiln's " +
                 std::to_string(kSchemaVersion));
  KILN_CHECK(version >= 1, ErrorKind::Corrupt, "tuning records: schema version " + std::to_string(version) + " is not valid");
  KILN_CHECK(doc.contains("records") && doc["records"].is_array(), ErrorKind::Corrupt,
             "tuning records: 'records' is missing or not an array");
  std::vector<Record> records;
  const nlohmann::json& list = doc["records"];
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string where = "tuning records: record " + std::to_string(i);
    records.push_back(record_from_json(list[i], where));
    try {
      check_record(records.back());
    } catch (const Error& e) {
      throw_error(ErrorKind::Corrupt, where + ": " + e.what());
    }
  }
  std::size_t changed = 0;
  impl_->write("importing records", [&] {
    changed = 0;
    Merger merger(*impl_->db, impl_->path);
    for (const Record& r : records) changed += merger.merge(r) ? 1 : 0;
  });
  return changed;
}

void Database::save_as(const std::string& path) const {
  check_database_path(path);
  std::error_code ec;
  if (std::filesystem::file_size(path + "-wal", ec) > 0 && !ec)
    throw_error(ErrorKind::Io, "cannot replace tuning database " + path + ": it is in use (" + path +
                                   "-wal exists); close the processes using it or choose another file");
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::filesystem::create_directories(parent, ec);
    if (ec) throw_error(ErrorKind::Io, "cannot create the folder of " + path + ": " + ec.message());
  }
  const std::string tmp = base::temporary_path_beside(path).string();
  {
    std::lock_guard lock(impl_->mutex);
    try {
      sql::Statement s(*impl_->db, "VACUUM INTO ?");
      s.bind(1, tmp);
      s.run();
    } catch (const sql::Failure& f) {
      std::filesystem::remove(tmp, ec);
      fail(f, impl_->path, "writing a copy to " + tmp);
    }
  }
  base::move_into_place(tmp, path);
}

}  // namespace kiln::tune

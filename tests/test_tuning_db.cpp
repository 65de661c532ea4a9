#define BOOST_TEST_MODULE tuning_db
#include <boost/test/unit_test.hpp>

// The tuning database (src/tune/database.h): records on disk shared by
// processes, find()'s verdicts, bad files set aside, export, import, merge;
// and its public calls (include/kiln/tune.h).

#include "src/base/log.h"
#include "src/tune/database.h"

#include <kiln/builder.h>
#include <kiln/error.h>
#include <kiln/tune.h>

#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using kiln::ErrorKind;
using kiln::tune::Applicability;
using kiln::tune::CandidateResult;
using kiln::tune::CandidateStatus;
using kiln::tune::Database;
using kiln::tune::Record;
using kiln::tune::RecordKey;

namespace {

// A fresh folder per test, removed afterwards.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "kiln-tuning-db-XXXXXX").string();
    BOOST_REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
  // Names in the folder that start with `prefix`.
  std::vector<std::string> entries(const std::string& prefix = "") const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path)) {
      const std::string name = e.path().filename().string();
      if (name.rfind(prefix, 0) == 0) names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    return names;
  }
};

// Collects warnings while alive.
struct WarningCapture {
  std::vector<std::string> warnings;
  kiln::base::LogSink previous;
  WarningCapture() {
    previous = kiln::base::set_log_sink([this](kiln::base::LogLevel level, const std::string& message) {
      if (level == kiln::base::LogLevel::warning) warnings.push_back(message);
    });
  }
  ~WarningCapture() { kiln::base::set_log_sink(previous); }
  bool any_contains(const std::string& text) const {
    return std::any_of(warnings.begin(), warnings.end(),
                       [&](const std::string& w) { return w.find(text) != std::string::npos; });
  }
};

RecordKey key_for(const std::string& kernel, int template_version = 3, const std::string& driver = "Mesa 22.3.6") {
  return RecordKey{kernel, "gemm", template_version, {"vulkan", "llvmpipe (LLVM 15.0.6, 256 bits)", driver}};
}

// A record using every field, with times that do not print exactly in decimal.
Record sample_record(const RecordKey& key, const std::string& date = "2026-12-01T16:30:00Z", double winner_ms = 0.75) {
  Record r;
  r.key = key;
  r.heuristic_knobs = "4x4_k4_p8_wg64_v4";
  r.heuristic_ms = 1.0 / 3.0;
  r.winner_knobs = "8x4_k8_p8_wg128_v4";
  r.winner_ms = winner_ms;
  CandidateResult ok{"8x4_k8_p8_wg128_v4", CandidateStatus::ok, "", {0.7, 0.75, 0.8000000000000002}, 0.75, 0.1};
  CandidateResult heuristic{"4x4_k4_p8_wg64_v4", CandidateStatus::ok, "", {1.0 / 3.0, 0.34, 1e-300}, 1.0 / 3.0, 0.02};
  r.candidates = {ok, heuristic};
  const CandidateStatus failures[] = {CandidateStatus::wrong_result, CandidateStatus::compile_failed,
                                      CandidateStatus::crashed,      CandidateStatus::timed_out,
                                      CandidateStatus::out_of_memory, CandidateStatus::not_measured};
  for (CandidateStatus s : failures)
    r.candidates.push_back({std::string("bad_") + kiln::tune::candidate_status_name(s), s,
                            std::string("why: ") + kiln::tune::candidate_status_name(s) + " \"quoted\"\n", {}, 0, 0});
  r.provenance = {date, "tuning-host-1", "0.1.0", 12.5};
  return r;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  BOOST_REQUIRE(out.good());
}

// Runs SQL on a file with SQLite directly (making foreign and newer files).
void raw_sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  BOOST_REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  BOOST_TEST(rc == SQLITE_OK, (error ? error : ""));
  sqlite3_free(error);
  sqlite3_close(db);
}

template <typename F>
void expect_error(F f, ErrorKind kind, const std::string& text) {
  try {
    f();
    BOOST_ERROR("no kiln::Error thrown; expected " << kind << " mentioning '" << text << "'");
  } catch (const kiln::Error& e) {
    BOOST_TEST(e.kind() == kind, "kind " << e.kind() << ": " << e.what());
    BOOST_TEST(std::string(e.what()).find(text) != std::string::npos, "message: " << e.what());
  }
}

// Runs `body` in a child process; returns a waitable pid. The child exits
// 0 when `body` returns true, 1 otherwise (including on an exception).
pid_t spawn(const std::function<bool()>& body) {
  const pid_t pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    bool ok = false;
    try {
      ok = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child process %d: %s\n", static_cast<int>(::getpid()), e.what());
    } catch (...) {
      std::fprintf(stderr, "child process %d: an unknown exception\n", static_cast<int>(::getpid()));
    }
    ::_exit(ok ? 0 : 1);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  BOOST_REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_record_round_trips_with_every_field) {
  TempDir dir;
  const std::string path = dir.file("sub/tuning.db");  // the folder is created
  const Record r = sample_record(key_for("gemm batch=1 m=1024 n=1024 k=1024 a=row b=row"));
  {
    Database db = Database::open(path);
    BOOST_TEST(db.path() == path);
    db.put(r);
  }
  Database again = Database::open(path);
  const std::vector<Record> all = again.all();
  BOOST_REQUIRE(all.size() == 1u);
  BOOST_TEST((all[0] == r));
  BOOST_TEST(all[0].candidates.size() == 8u);
  BOOST_TEST(all[0].candidates[1].times_ms[2] == 1e-300);
  BOOST_TEST(all[0].speedup() == (1.0 / 3.0) / 0.75);
  const auto lookup = again.find(r.key);
  BOOST_TEST((lookup.status == Applicability::applies));
  BOOST_REQUIRE(lookup.record.has_value());
  BOOST_TEST((*lookup.record == r));
}

BOOST_AUTO_TEST_CASE(put_replaces_the_record_with_the_same_key) {
  Database db = Database::in_memory();
  BOOST_TEST(db.path() == "");
  Record first = sample_record(key_for("k"));
  db.put(first);
  Record second = first;
  second.winner_knobs = first.heuristic_knobs;
  second.winner_ms = first.heuristic_ms;
  second.provenance.date = "2026-12-02T08:00:00Z";
  db.put(second);
  BOOST_TEST(db.size() == 1u);
  BOOST_TEST((db.find(first.key).record == second));
  BOOST_TEST(db.find(first.key).record->speedup() == 1.0);
  // Another driver or template version is another key.
  db.put(sample_record(key_for("k", 3, "Mesa 23.0.0")));
  db.put(sample_record(key_for("k", 4)));
  BOOST_TEST(db.size() == 3u);
}

BOOST_AUTO_TEST_CASE(put_refuses_records_it_could_not_order_or_find) {
  Database db = Database::in_memory();
  Record r = sample_record(key_for("k"));
  r.provenance.date = "2026-12-01 16:30";
  expect_error([&] { db.put(r); }, ErrorKind::InvalidArgument, "2026-12-01T16:30:00Z");
  r = sample_record(key_for(""));
  expect_error([&] { db.put(r); }, ErrorKind::InvalidArgument, "kernel");
  r = sample_record(key_for("k"));
  r.candidates[0].times_ms[0] = std::numeric_limits<double>::quiet_NaN();
  expect_error([&] { db.put(r); }, ErrorKind::InvalidArgument, "not a finite time");
  BOOST_TEST(db.size() == 0u);
  const std::string now = kiln::tune::current_utc_date();
  r = sample_record(key_for("k"), now);
  db.put(r);
  BOOST_TEST(db.size() == 1u);
}

BOOST_AUTO_TEST_CASE(find_says_whether_a_record_applies_and_why_not) {
  Database db = Database::in_memory();
  const RecordKey wanted = key_for("conv n=1 c=64 h=56 w=56 k=64 r=3 s=3", 3, "Mesa 22.3.6");

  auto none = db.find(wanted);
  BOOST_TEST((none.status == Applicability::no_record));
  BOOST_TEST(!none.record.has_value());
  BOOST_TEST(none.reason.find("no record") != std::string::npos, none.reason);
  BOOST_TEST(std::string(kiln::tune::applicability_name(none.status)) == "no record");

  // Another kernel, another device: still nothing for this one.
  db.put(sample_record(key_for("conv n=1 c=64 h=28 w=28 k=64 r=3 s=3")));
  RecordKey other_device = wanted;
  other_device.device.device = "NVIDIA H200";
  other_device.device.backend = "cuda";
  db.put(sample_record(other_device));
  BOOST_TEST((db.find(wanted).status == Applicability::no_record));

  // An older template version under this driver: stale.
  const Record old_template = sample_record(key_for(wanted.kernel, 2, "Mesa 22.3.6"));
  db.put(old_template);
  auto stale = db.find(wanted);
  BOOST_TEST((stale.status == Applicability::stale_template));
  BOOST_TEST((stale.record == old_template));
  BOOST_TEST(stale.reason.find("version 2") != std::string::npos, stale.reason);
  BOOST_TEST(std::string(kiln::tune::applicability_name(stale.status)) == "stale template");

  // The same template version under another driver is nearer: other_driver.
  const Record old_driver = sample_record(key_for(wanted.kernel, 3, "Mesa 22.3.5"));
  db.put(old_driver);
  auto driver = db.find(wanted);
  BOOST_TEST((driver.status == Applicability::other_driver));
  BOOST_TEST((driver.record == old_driver));
  BOOST_TEST(driver.reason.find("Mesa 22.3.5") != std::string::npos, driver.reason);

  // The exact key applies.
  const Record exact = sample_record(wanted);
  db.put(exact);
  auto applies = db.find(wanted);
  BOOST_TEST((applies.status == Applicability::applies));
  BOOST_TEST((applies.record == exact));
  BOOST_TEST(std::string(kiln::tune::applicability_name(applies.status)) == "applies");
  BOOST_TEST(applies.reason.find("8x4_k8_p8_wg128_v4, 0.44x over the heuristic") != std::string::npos, applies.reason);
}

BOOST_AUTO_TEST_CASE(processes_writing_at_once_lose_nothing_and_readers_see_whole_records) {
  TempDir dir;
  const std::string path = dir.file("tuning.db");
  constexpr int kWriters = 4;
  constexpr int kRecordsEach = 40;
  constexpr int kTotal = kWriters * kRecordsEach;

  // Two gates, each a pipe released when every write end is closed. The
  // children start together on `start`; each opens (and the first creates)
  // the file itself. Writers stop half way at `partial` until the reader has
  // seen a database with some records but not all: reads during writes.
  int start[2], partial[2];
  BOOST_REQUIRE(::pipe(start) == 0);
  BOOST_REQUIRE(::pipe(partial) == 0);
  // Closes this process's write end (once: SQLite reuses the number) and waits.
  auto wait_for = [](int gate[2]) {
    ::close(gate[1]);
    char c;
    return ::read(gate[0], &c, 1) == 0;
  };
  std::vector<pid_t> writers;
  for (int w = 0; w < kWriters; ++w)
    writers.push_back(spawn([&, w] {
      if (!wait_for(start)) return false;
      Database db = Database::open(path);
      for (int i = 0; i < kRecordsEach; ++i) {
        if (i == kRecordsEach / 2 && !wait_for(partial)) return false;
        db.put(sample_record(key_for("writer " + std::to_string(w) + " kernel " + std::to_string(i))));
      }
      return true;
    }));
  // The reader checks that every record it sees is whole and that the count
  // never goes down, until it has seen them all.
  const pid_t reader = spawn([&] {
    ::close(partial[0]);
    if (!wait_for(start)) return false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    std::size_t last = 0;
    bool saw_partial = false;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!fs::exists(path)) continue;
      Database db = Database::open(path);
      for (int i = 0; i < 20; ++i) {
        const std::vector<Record> all = db.all();
        if (all.size() < last) return false;
        for (const Record& r : all)
          if (!(r == sample_record(r.key))) return false;
        last = all.size();
        if (last > 0 && last < static_cast<std::size_t>(kTotal) && !saw_partial) {
          saw_partial = true;
          ::close(partial[1]);
        }
        if (last == static_cast<std::size_t>(kTotal)) return saw_partial;
      }
    }
    return false;
  });
  for (int* gate : {start, partial}) {
    ::close(gate[0]);
    ::close(gate[1]);
  }
  for (pid_t pid : writers) BOOST_TEST(wait_exit(pid) == 0);
  BOOST_TEST(wait_exit(reader) == 0, "the reader saw a partial record, a shrinking count or not every record");

  Database db = Database::open(path);
  const std::vector<Record> all = db.all();
  BOOST_TEST(all.size() == static_cast<std::size_t>(kTotal));
  std::set<std::string> kernels;
  for (const Record& r : all) {
    kernels.insert(r.key.kernel);
    BOOST_TEST((r == sample_record(r.key)));
  }
  BOOST_TEST(kernels.size() == static_cast<std::size_t>(kTotal));
}

BOOST_AUTO_TEST_CASE(bad_files_are_set_aside_with_a_warning_and_a_fresh_database_works) {
  struct Case {
    std::string name;
    std::function<void(const std::string&)> make;
    std::string aside_prefix;  // after "tuning.db."
  };
  auto truncated = [](std::size_t keep_fraction_of_8) {
    return [keep_fraction_of_8](const std::string& path) {
      {
        Database db = Database::open(path);
        for (int i = 0; i < 200; ++i) db.put(sample_record(key_for("kernel " + std::to_string(i))));
      }  // closing checkpoints the log into the file
      const auto size = fs::file_size(path);
      BOOST_REQUIRE(size > 8 * 4096u);
      fs::resize_file(path, size * keep_fraction_of_8 / 8);
    };
  };
  const std::vector<Case> cases = {
      {"garbage bytes", [](const std::string& p) { write_file(p, std::string(5000, '\x5a') + "not a database"); },
       "corrupt-"},
      {"a header only", [](const std::string& p) { write_file(p, std::string("SQLite format 3\0", 16)); }, "corrupt-"},
      {"a database truncated to half", truncated(4), "corrupt-"},
      {"a database truncated to its first pages", truncated(1), "corrupt-"},
      {"another application's SQLite file",
       [](const std::string& p) { raw_sql(p, "CREATE TABLE photos (id INTEGER, name TEXT); INSERT INTO photos VALUES (1, 'x');"); },
       "corrupt-"},
      {"a newer schema",
       [](const std::string& p) {
         { Database::open(p).put(sample_record(key_for("from the future"))); }
         raw_sql(p, "PRAGMA user_version = " + std::to_string(kiln::tune::kSchemaVersion + 1));
       },
       "schema-" + std::to_string(kiln::tune::kSchemaVersion + 1) + "-"},
  };
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.name) {
      TempDir dir;
      const std::string path = dir.file("tuning.db");
      c.make(path);
      const std::string original = read_file(path);
      WarningCapture capture;
      Database db = Database::open(path);
      BOOST_TEST(db.size() == 0u);
      db.put(sample_record(key_for("after")));
      BOOST_TEST(db.size() == 1u);
      const auto aside = dir.entries("tuning.db." + c.aside_prefix);
      BOOST_REQUIRE(aside.size() == 1u);
      BOOST_TEST(read_file(dir.file(aside[0])) == original, "the file set aside is the original, unchanged");
      BOOST_REQUIRE(capture.warnings.size() == 1u);
      BOOST_TEST_MESSAGE(capture.warnings[0]);
      BOOST_TEST(capture.any_contains(path), capture.warnings[0]);
      BOOST_TEST(capture.any_contains(aside[0]), capture.warnings[0]);
      // Read-only opening reports such a file instead of moving it.
      fs::rename(dir.file(aside[0]), dir.file("bad.db"));
      expect_error([&] { Database::open_read_only(dir.file("bad.db")); }, ErrorKind::Corrupt,
                   dir.file("bad.db") + " is not usable");
      BOOST_TEST(read_file(dir.file("bad.db")) == original);
    }
  }
}

BOOST_AUTO_TEST_CASE(processes_finding_one_bad_file_set_it_aside_once) {
  TempDir dir;
  const std::string path = dir.file("tuning.db");
  write_file(path, std::string(8192, '\x07'));
  constexpr int kProcesses = 4;
  int start[2];
  BOOST_REQUIRE(::pipe(start) == 0);
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p)
    children.push_back(spawn([&, p] {
      ::close(start[1]);
      char c;
      if (::read(start[0], &c, 1) != 0) return false;
      Database db = Database::open(path);
      db.put(sample_record(key_for("process " + std::to_string(p))));
      return true;
    }));
  ::close(start[0]);
  ::close(start[1]);
  for (pid_t pid : children) BOOST_TEST(wait_exit(pid) == 0);
  BOOST_TEST(dir.entries("tuning.db.corrupt-").size() == 1u, "one process moved the file; the rest used the new one");
  BOOST_TEST(Database::open(path).size() == static_cast<std::size_t>(kProcesses));
}

BOOST_AUTO_TEST_CASE(an_empty_file_is_a_new_database_not_a_corrupt_one) {
  TempDir dir;
  const std::string path = dir.file("tuning.db");
  write_file(path, "");
  WarningCapture capture;
  Database db = Database::open(path);
  db.put(sample_record(key_for("k")));
  BOOST_TEST(db.size() == 1u);
  BOOST_TEST(capture.warnings.empty());
  BOOST_TEST(dir.entries("tuning.db.").empty());
}

BOOST_AUTO_TEST_CASE(paths_that_are_not_regular_files_are_io_errors_naming_them) {
  TempDir dir;
  const std::string folder = dir.file("a-folder.db");
  fs::create_directory(folder);
  expect_error([&] { Database::open(folder); }, ErrorKind::Io, folder + " is a directory");

  const std::string fifo = dir.file("fifo.db");
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  expect_error([&] { Database::open(fifo); }, ErrorKind::Io, fifo + " is a FIFO");
  expect_error([&] { Database::open_read_only(fifo); }, ErrorKind::Io, fifo);

  const std::string device_link = dir.file("null.db");
  fs::create_symlink("/dev/null", device_link);
  expect_error([&] { Database::open(device_link); }, ErrorKind::Io, device_link + " is a symbolic link to a character device");

  const std::string dangling = dir.file("dangling.db");
  fs::create_symlink(dir.file("nowhere/nothing.db"), dangling);
  expect_error([&] { Database::open(dangling); }, ErrorKind::Io, dangling);

  // SQLite's log beside the file is checked too.
  const std::string path = dir.file("tuning.db");
  BOOST_REQUIRE(::mkfifo((path + "-wal").c_str(), 0600) == 0);
  expect_error([&] { Database::open(path); }, ErrorKind::Io, path + "-wal");

  // Nothing was moved or created in their place.
  BOOST_TEST(fs::is_directory(folder));
  BOOST_TEST(fs::is_fifo(fifo));
  BOOST_TEST(!fs::exists(path));

  expect_error([&] { Database::open_read_only(dir.file("absent.db")); }, ErrorKind::NotFound, dir.file("absent.db"));
  BOOST_TEST(!fs::exists(dir.file("absent.db")));
}

BOOST_AUTO_TEST_CASE(a_read_only_database_reads_and_refuses_writes) {
  TempDir dir;
  const std::string path = dir.file("tuning.db");
  { Database::open(path).put(sample_record(key_for("k"))); }
  const auto before = read_file(path);
  {
    Database db = Database::open_read_only(path);
    BOOST_TEST(db.size() == 1u);
    BOOST_TEST((db.find(key_for("k")).status == Applicability::applies));
    expect_error([&] { db.put(sample_record(key_for("k2"))); }, ErrorKind::Io, path);
    expect_error([&] { db.import_json(Database::in_memory().export_json()); }, ErrorKind::Io, path);
    BOOST_TEST(db.size() == 1u);
  }
  BOOST_TEST(read_file(path) == before);
  BOOST_TEST(dir.entries() == std::vector<std::string>{"tuning.db"}, "no -wal or -shm left behind");
}

BOOST_AUTO_TEST_CASE(a_record_damaged_inside_a_sound_file_costs_that_record_with_a_warning_naming_it) {
  TempDir dir;
  const std::string path = dir.file("tuning.db");
  {
    Database db = Database::open(path);
    for (const char* kernel : {"damaged", "not utf-8", "sound"}) db.put(sample_record(key_for(kernel)));
  }
  raw_sql(path, "UPDATE records SET candidates = '[{\"knobs\": 1}]' WHERE kernel = 'damaged'");
  // One byte that is not UTF-8 (JSON text must be), in the host's name.
  raw_sql(path, "UPDATE records SET host = CAST(X'686fff7374' AS TEXT) WHERE kernel = 'not utf-8'");
  Database db = Database::open(path);  // the file itself passes SQLite's check
  WarningCapture capture;
  const std::vector<Record> left = db.all();
  BOOST_REQUIRE(left.size() == 1u);
  BOOST_TEST(left[0].key.kernel == "sound");
  BOOST_TEST(capture.any_contains(path + ", record for 'damaged', candidate 0: 'knobs' is not a string; skipped"));
  BOOST_TEST(capture.any_contains(path + ", record for 'not utf-8': its host is not UTF-8 text; skipped"));
  // A lookup treats it as missing (max-autotune then tunes or uses the
  // heuristic, as with no record); an export and a merge leave it out.
  BOOST_TEST((db.find(key_for("damaged")).status == Applicability::no_record));
  BOOST_TEST((db.find(key_for("not utf-8")).status == Applicability::no_record));
  std::size_t exported = 0;
  const nlohmann::json doc = nlohmann::json::parse(db.export_json(&exported));
  BOOST_TEST(exported == 1u);
  BOOST_TEST(doc["records"].size() == 1u);
  Database merged = Database::in_memory();
  BOOST_TEST(merged.merge_from(db) == 1u);
  BOOST_TEST(kiln::export_tuning_database(path, dir.file("export.json")) == 1u);
  db.put(sample_record(key_for("damaged")));  // replacing the record repairs it
  BOOST_TEST((db.find(key_for("damaged")).status == Applicability::applies));
}

BOOST_AUTO_TEST_CASE(explaining_against_a_link_to_nothing_usable_names_it) {
  TempDir dir;
  const std::string loop = dir.file("loop.db");
  fs::create_symlink(dir.file("other.db"), loop);
  fs::create_symlink(loop, dir.file("other.db"));
  kiln::Builder b("tiny");
  auto x = b.input("x", kiln::DType::f32, {4, 16});
  const kiln::Model model = b.build({b.matmul(x, b.constant("w", kiln::Tensor(kiln::DType::f32, {16, 16})))});
  kiln::TuneJobOptions options;
  options.compile.cache_dir = dir.file("cache");
  options.compile.settings = {{"tune_db", loop}};
  expect_error([&] { kiln::explain_tuning({model}, options); }, ErrorKind::Io,
               loop + " is a symbolic link to nothing usable");
  // With nothing at the path, nothing applies: every site is listed unrecorded.
  options.compile.settings = {{"tune_db", dir.file("absent.db")}};
  const kiln::TuneReport report = kiln::explain_tuning({model}, options);
  BOOST_TEST(report.sites > 0u);
  BOOST_TEST(report.listed.size() == report.in_shard);
}

BOOST_AUTO_TEST_CASE(an_import_never_replaces_a_file_that_is_not_a_database) {
  TempDir dir;
  const std::string source = dir.file("source.db");
  { Database::open(source).put(sample_record(key_for("k"))); }
  kiln::export_tuning_database(source, dir.file("records.json"));
  const std::string notes = dir.file("notes.txt");
  std::ofstream(notes) << "my notes, not a database";
  expect_error([&] { kiln::import_tuning_database(dir.file("records.json"), notes); }, ErrorKind::InvalidArgument,
               notes + "' is not a tuning database; it is left as it is");
  std::ifstream in(notes);
  BOOST_TEST(std::string(std::istreambuf_iterator<char>(in), {}) == "my notes, not a database");
  BOOST_TEST(dir.entries("notes.txt.").empty());  // nothing set aside either
  // A new file and an existing database take the records.
  BOOST_TEST(kiln::import_tuning_database(dir.file("records.json"), dir.file("new.db")).records == 1u);
  BOOST_TEST(kiln::import_tuning_database(dir.file("records.json"), source).records == 1u);
}

BOOST_AUTO_TEST_CASE(export_then_import_gives_the_same_records) {
  Database a = Database::in_memory();
  for (int i = 0; i < 5; ++i) a.put(sample_record(key_for("kernel " + std::to_string(i), 1 + i % 2)));
  const std::string json = a.export_json();
  BOOST_TEST(json.find("\"schema_version\": 1") != std::string::npos);
  Database b = Database::in_memory();
  BOOST_TEST(b.import_json(json) == 5u);
  BOOST_TEST((b.all() == a.all()));
  BOOST_TEST(b.export_json() == json);
  BOOST_TEST(b.import_json(json) == 0u, "importing the same records again changes nothing");
}

BOOST_AUTO_TEST_CASE(import_rejects_malformed_documents_whole) {
  Database source = Database::in_memory();
  source.put(sample_record(key_for("good")));
  const std::string good = source.export_json();
  Database db = Database::in_memory();
  expect_error([&] { db.import_json("{not json"); }, ErrorKind::Corrupt, "not valid JSON");
  expect_error([&] { db.import_json("[1, 2]"); }, ErrorKind::Corrupt, "not a kiln tuning export");
  auto edited = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const auto at = text.find(from);
    BOOST_REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
  };
  expect_error([&] { db.import_json(edited("\"schema_version\": 1", "\"schema_version\": 99")); },
               ErrorKind::Unsupported, "schema version 99");
  expect_error([&] { db.import_json(edited("\"status\": \"crashed\"", "\"status\": \"exploded\"")); },
               ErrorKind::Corrupt, "exploded");
  expect_error([&] { db.import_json(edited("\"winner\": {", "\"loser\": {")); }, ErrorKind::Corrupt,
               "record 0: 'winner' is missing");
  expect_error([&] { db.import_json(edited("\"budget_s\": 12.5", "\"budget_s\": \"lots\"")); }, ErrorKind::Corrupt,
               "'budget_s' is not a number");
  expect_error([&] { db.import_json(edited("2026-12-01T16:30:00Z", "yesterday")); }, ErrorKind::Corrupt, "record 0");
  // A good record and a bad one: neither goes in.
  nlohmann::json two = nlohmann::json::parse(good);
  two["records"].push_back(two["records"][0]);
  two["records"][1]["key"]["template_version"] = "three";
  expect_error([&] { db.import_json(two.dump()); }, ErrorKind::Corrupt, "record 1");
  BOOST_TEST(db.size() == 0u);
}

BOOST_AUTO_TEST_CASE(merge_is_the_union_and_does_not_depend_on_order) {
  // k2 is in both: the newer date wins. k3 is in both with the same date:
  // the faster winner wins. k4: same date and time, the records differ in
  // their host: the smaller canonical text wins, whichever way round.
  auto fill_a = [](Database& db) {
    db.put(sample_record(key_for("k1")));
    db.put(sample_record(key_for("k2"), "2026-11-01T00:00:00Z"));
    db.put(sample_record(key_for("k3"), "2026-12-01T16:30:00Z", 0.5));
    Record r = sample_record(key_for("k4"));
    r.provenance.host = "host-b";
    db.put(r);
  };
  auto fill_b = [](Database& db) {
    db.put(sample_record(key_for("k2"), "2026-12-24T00:00:00Z"));
    db.put(sample_record(key_for("k3"), "2026-12-01T16:30:00Z", 0.6));
    Record r = sample_record(key_for("k4"));
    r.provenance.host = "host-a";
    db.put(r);
    db.put(sample_record(key_for("k5")));
  };
  Database a = Database::in_memory(), b = Database::in_memory();
  fill_a(a);
  fill_b(b);
  Database ab = Database::in_memory(), ba = Database::in_memory();
  fill_a(ab);
  BOOST_TEST(ab.merge_from(b) == 3u);  // k2 replaced, k5 added, k4 replaced (host-a < host-b)
  fill_b(ba);
  BOOST_TEST(ba.merge_from(a) == 2u);  // k1 added, k3 replaced
  BOOST_TEST(ab.export_json() == ba.export_json());
  const auto merged = ab.all();
  BOOST_REQUIRE(merged.size() == 5u);
  BOOST_TEST(merged[1].provenance.date == "2026-12-24T00:00:00Z");
  BOOST_TEST(merged[2].winner_ms == 0.5);
  BOOST_TEST(merged[3].provenance.host == "host-a");
  BOOST_TEST(ab.merge_from(a) == 0u);
  BOOST_TEST(ab.merge_from(ab) == 0u);

  // Three inputs, every order, into an empty database: one result.
  Database c = Database::in_memory();
  c.put(sample_record(key_for("k2"), "2026-12-25T00:00:00Z", 9.0));
  c.put(sample_record(key_for("k6")));
  const Database* inputs[] = {&a, &b, &c};
  std::array<int, 3> order = {0, 1, 2};
  std::set<std::string> results;
  do {
    Database out = Database::in_memory();
    for (int i : order) out.merge_from(*inputs[i]);
    results.insert(out.export_json());
    BOOST_TEST(out.size() == 6u);
    BOOST_TEST(out.find(key_for("k2")).record->provenance.date == "2026-12-25T00:00:00Z");
  } while (std::next_permutation(order.begin(), order.end()));
  BOOST_TEST(results.size() == 1u);
}

BOOST_AUTO_TEST_CASE(save_as_replaces_a_file_whole_and_leaves_nothing_behind) {
  TempDir dir;
  const std::string out = dir.file("merged.db");
  write_file(out, "an older file");
  Database db = Database::in_memory();
  for (int i = 0; i < 3; ++i) db.put(sample_record(key_for("kernel " + std::to_string(i))));
  db.save_as(out);
  BOOST_TEST(dir.entries() == std::vector<std::string>{"merged.db"});
  {
    Database saved = Database::open_read_only(out);
    BOOST_TEST((saved.all() == db.all()));
  }
  expect_error([&] { db.save_as(dir.path.string()); }, ErrorKind::Io, dir.path.string());

  // A reader opening the file while it is replaced again and again sees the
  // old or the new database, never a part of one.
  const pid_t writer = spawn([&] {
    Database three = Database::in_memory(), five = Database::in_memory();
    for (int i = 0; i < 5; ++i) {
      if (i < 3) three.put(sample_record(key_for("kernel " + std::to_string(i))));
      five.put(sample_record(key_for("kernel " + std::to_string(i))));
    }
    for (int round = 0; round < 40; ++round) (round % 2 ? three : five).save_as(out);
    return true;
  });
  int reads = 0, bad = 0;
  for (;;) {
    int status = 0;
    const bool done = ::waitpid(writer, &status, WNOHANG) == writer;
    try {
      const std::size_t n = Database::open_read_only(out).size();
      bad += (n == 3 || n == 5) ? 0 : 1;
    } catch (const kiln::Error& e) {
      ++bad;
      BOOST_TEST_MESSAGE(e.what());
    }
    ++reads;
    if (done) {
      BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0));
      break;
    }
  }
  BOOST_TEST(bad == 0, bad << " of " << reads << " reads saw a partial file");
  BOOST_TEST(dir.entries() == std::vector<std::string>{"merged.db"});
}

BOOST_AUTO_TEST_CASE(the_default_file_sits_beside_the_kernel_cache) {
  BOOST_TEST(kiln::tune::default_database_path("/var/cache/kiln") == "/var/cache/kiln/tuning.db");
  BOOST_TEST(kiln::tune::default_database_path("off") == "");
  const char* env = std::getenv("KILN_CACHE_DIR");  // meson test sets it
  if (env && *env) BOOST_TEST(kiln::tune::default_database_path("") == std::string(env) + "/tuning.db");
  // No disk cache: the database lives in memory.
  Database db = Database::open(kiln::tune::default_database_path("off"));
  BOOST_TEST(db.path() == "");
  db.put(sample_record(key_for("k")));
  BOOST_TEST(db.size() == 1u);
}

// The public database calls (include/kiln/tune.h), which `kiln tune
// show|merge|export|import` are thin over: what they read and write is what
// the database holds.
BOOST_AUTO_TEST_CASE(the_public_database_calls_read_merge_export_and_import) {
  TempDir dir;
  const std::string a = dir.file("a.db"), b = dir.file("b.db"), merged = dir.file("merged.db");
  {
    Database da = Database::open(a), db = Database::open(b);
    da.put(sample_record(key_for("shared"), "2026-12-01T16:30:00Z", 0.75));
    da.put(sample_record(key_for("only in a")));
    db.put(sample_record(key_for("shared"), "2026-12-02T09:00:00Z", 0.5));  // newer: wins the merge
  }
  BOOST_TEST(kiln::default_tuning_database("/var/cache/kiln") == "/var/cache/kiln/tuning.db");

  const std::vector<kiln::TuningRecord> in_a = kiln::tuning_records(a);
  BOOST_REQUIRE(in_a.size() == 2u);
  const kiln::TuningRecord& first = in_a[0].kernel == "only in a" ? in_a[0] : in_a[1];
  BOOST_TEST(first.template_name == "gemm");
  BOOST_TEST(first.template_version == 3);
  BOOST_TEST(first.backend == "vulkan");
  BOOST_TEST(first.driver == "Mesa 22.3.6");
  BOOST_TEST(first.winner_knobs == "8x4_k8_p8_wg128_v4");
  BOOST_TEST(first.speedup == (1.0 / 3.0) / 0.75);
  BOOST_TEST(first.candidates_ok == 2u);      // the winner and the heuristic
  BOOST_TEST(first.candidates_failed == 5u);  // every failure but "not measured"
  BOOST_TEST(first.date == "2026-12-01T16:30:00Z");

  BOOST_TEST(kiln::merge_tuning_databases({a, b}, merged) == 2u);
  for (const kiln::TuningRecord& r : kiln::tuning_records(merged))
    if (r.kernel == "shared") BOOST_TEST(r.date == "2026-12-02T09:00:00Z");

  const std::string json = dir.file("records.json"), fresh = dir.file("fresh.db");
  BOOST_TEST(kiln::export_tuning_database(merged, json) == 2u);
  const kiln::TuningImport added = kiln::import_tuning_database(json, fresh);
  BOOST_TEST(added.changed == 2u);
  BOOST_TEST(added.records == 2u);
  BOOST_TEST((Database::open_read_only(fresh).all() == Database::open_read_only(merged).all()));
  BOOST_TEST(kiln::import_tuning_database(json, fresh).changed == 0u, "the same records again change nothing");

  write_file(json, "{\"schema_version\": 1, \"records\": [{\"kernel\": ");
  expect_error([&] { kiln::import_tuning_database(json, fresh); }, ErrorKind::Corrupt, "records.json");
  expect_error([&] { kiln::tuning_records(dir.file("missing.db")); }, ErrorKind::NotFound, "missing.db");
  BOOST_TEST(kiln::tuning_records(fresh).size() == 2u, "a refused import changes nothing");
}

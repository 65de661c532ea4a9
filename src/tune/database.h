// The tuning database: what the autotuner measured, on disk, shared by every
// process that tunes or compiles (SQLite, so several processes can write at
// once without losing a record; a schema version guards the layout).
//
// A record is keyed by the kernel's structure and shapes, the template and its
// version, and the device fingerprint (backend, device, driver version). It
// keeps every candidate's timings, the heuristic's choice and time, the
// winner, and where it came from (date, host, kiln version, budget). A record
// measured on another driver version or for an older template version is
// kept, but does not apply: find() says why.
//
// A Database may be used from several threads (calls are serialised); each
// process opens the file itself (never carry one across fork()).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::tune {

// The layout of the tables; a file with another version is set aside (newer)
// or migrated (older) when opened.
inline constexpr int kSchemaVersion = 1;

// The device a record was measured on.
struct DeviceFingerprint {
  std::string backend;  // "vulkan"
  std::string device;   // "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string driver;   // "Mesa 22.3.6": a record for another driver does not apply

  friend bool operator==(const DeviceFingerprint&, const DeviceFingerprint&) = default;
};

struct RecordKey {
  // The kernel's structure and shapes, as canonical text: what the template
  // computes, without the knobs ("gemm batch=1 m=1024 n=1024 k=1024 a=row b=row").
  std::string kernel;
  std::string template_name;  // "gemm", "conv"
  int template_version = 0;   // a record for an older version of the template is stale
  DeviceFingerprint device;

  friend bool operator==(const RecordKey&, const RecordKey&) = default;
};

enum class CandidateStatus {
  ok,                 // compiled, verified and timed
  wrong_result,       // disagreed with the reference: never chosen
  compile_failed,     // the kernel compiler or the driver refused it
  crashed,            // the process measuring it died (a driver crash)
  timed_out,          // it did not finish within the candidate's time limit
  out_of_memory,
  not_measured,       // the budget ran out first
};
const char* candidate_status_name(CandidateStatus status);  // "ok", "wrong_result", ...

struct CandidateResult {
  std::string knobs;  // the template's knobs as text ("4x4_k4_p8_wg64_v4")
  CandidateStatus status = CandidateStatus::not_measured;
  std::string detail;               // why it failed, for any status but ok
  std::vector<double> times_ms;     // every timed repeat, in order
  double median_ms = 0;             // of times_ms (0 unless ok)
  double spread = 0;                // (p75 - p25) / median of times_ms: the measured noise

  friend bool operator==(const CandidateResult&, const CandidateResult&) = default;
};

struct Provenance {
  std::string date;          // ISO 8601, UTC ("2026-12-01T16:30:00Z")
  std::string host;          // the machine's host name
  std::string kiln_version;  // "0.1.0"
  double budget_s = 0;       // the budget the record was tuned within

  friend bool operator==(const Provenance&, const Provenance&) = default;
};

struct Record {
  RecordKey key;
  std::string heuristic_knobs;  // what the heuristic picks for this kernel
  double heuristic_ms = 0;
  std::string winner_knobs;     // the heuristic's unless a candidate was faster beyond the noise
  double winner_ms = 0;
  std::vector<CandidateResult> candidates;  // every candidate tried, heuristic's included
  Provenance provenance;

  // heuristic_ms / winner_ms (1 when the heuristic's choice stayed).
  double speedup() const;

  friend bool operator==(const Record&, const Record&) = default;
};

// Why a record applies to a kernel, or why not.
enum class Applicability {
  applies,
  no_record,       // nothing for this kernel on this backend and device
  other_driver,    // a record for the same device under another driver version
  stale_template,  // a record for an older (or newer) version of the template
};
const char* applicability_name(Applicability status);  // "applies", "no record", "other driver", "stale template"

struct Lookup {
  Applicability status = Applicability::no_record;
  std::optional<Record> record;  // the record that applies, or the nearest one that does not
  std::string reason;            // one line for `kiln explain` ("record for driver Mesa 22.3.5")
};

class Database {
 public:
  // Opens (creating it and its folder if needed) the database at `path`;
  // "" gives an in-memory database (what default_database_path returns when
  // the disk cache is off). A file that is not a kiln tuning database
  // (garbage, truncated, another application's SQLite file), fails SQLite's
  // quick check or has a newer schema is renamed aside, with its -wal/-shm
  // files, to PATH.corrupt-<UTC time> (or PATH.schema-<N>-<UTC time>), a
  // warning names it, and a fresh database is made: never a crash. Throws
  // Error(Io) naming the path when the folder cannot be written or when the
  // path (or its -wal, -shm, -journal) is a directory, FIFO, socket, device
  // or a link to one (checked before SQLite opens it, which could block).
  static Database open(const std::string& path);
  // Opens an existing database to read (merge inputs, export, show): creates,
  // moves and writes nothing (closing it may fold a finished -wal into the
  // file, as any SQLite reader does). Throws Error(NotFound) when there is no file,
  // Error(Corrupt) naming the problem when it is not a usable tuning
  // database (nothing is set aside), Error(Io) as open() does. put(),
  // merge_from() and import_json() on it throw Error(Io).
  static Database open_read_only(const std::string& path);
  // An in-memory database (tests; merges).
  static Database in_memory();

  Database(Database&&) noexcept;
  Database& operator=(Database&&) noexcept;
  ~Database();

  const std::string& path() const;  // "" in memory

  // The record for `key` (applies); else the nearest that does not, in this
  // order: same template version under another driver (other_driver), then
  // an older or newer template version (stale_template), the newest first.
  Lookup find(const RecordKey& key) const;
  // Adds the record, replacing one with the same key; one transaction, safe
  // while other processes read and write the same file. Throws
  // Error(InvalidArgument) for an empty kernel, template, backend or device
  // name, a date not spelled 2026-12-01T16:30:00Z (see current_utc_date), or
  // a time that is negative or not finite.
  void put(const Record& record);
  // Every record, ordered by key (deterministic: export and merge diff cleanly).
  std::vector<Record> all() const;
  std::size_t size() const;

  // Records of `other` go into this database; where both have a record for
  // one key, the newer provenance date wins (then the faster winner, then the
  // record's text, so merging is deterministic and order-independent).
  // Returns how many records were added or replaced.
  std::size_t merge_from(const Database& other);

  // A JSON document holding every record (with the schema version), and back.
  // A damaged record is left out with a warning naming it; `exported`, when
  // given, is set to how many went in.
  std::string export_json(std::size_t* exported = nullptr) const;
  // Records go in as merge_from() takes them (a newer record already here
  // stays); all or nothing. Returns how many were added or replaced. Throws
  // Error(Corrupt) naming the problem for a malformed document,
  // Error(Unsupported) for one with a newer schema version.
  std::size_t import_json(const std::string& json);

  // Writes a copy of the whole database to `path` atomically: a temporary
  // file beside it, synced, then renamed over it. Throws Error(Io) naming the
  // path (not a regular file, in use by another process, not writable).
  void save_as(const std::string& path) const;

 private:
  struct Impl;
  explicit Database(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The default file: "tuning.db" in the kernel cache's folder (beside the
// kernel cache's "kernels" folder; see CompileOptions::cache_dir): `cache_dir`
// "" resolves as the kernel cache does ($KILN_CACHE_DIR, ...); "off" gives ""
// (no disk cache: Database::open("") is an in-memory database).
std::string default_database_path(const std::string& cache_dir);

// Now, as a Provenance::date ("2026-12-01T16:30:00Z").
std::string current_utc_date();

}  // namespace kiln::tune

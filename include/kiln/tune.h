// Tuning jobs: kernels of several models tuned on one device, the results
// kept in the tuning database that max-autotune compiles read (docs/tuning.md).
//
//   kiln::TuneJobOptions job;
//   job.compile.settings = {{"tune_db", "/data/tuning.db"}};
//   job.budget_s = 600;
//   kiln::TuneReport report = kiln::tune_models({kiln::models::resnet18()}, job);
//
// A job compiles each model (default mode) and profiles it, orders the
// models' tuning sites (kernels' knobs, and graph passes' choices: Winograd
// or direct, packed or plain weights) by their mean share of each model's
// device time, keeps this shard's (a fixed hash of each site's identity, so
// that N machines cover the work exactly once), skips with `resume` those the
// database holds a complete record for, and tunes the rest biggest first,
// each within its share of the budget left. Every finished record is written
// at once, so a job stopped early (the budget, stop_requested) keeps them.
// `kiln tune` is this job on the command line.
#pragma once

#include <kiln/export.h>
#include <kiln/kiln.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln {

// What a job is doing, for a progress display.
struct KILN_API TuneProgress {
  enum class Stage : std::uint8_t {
    profiling,      // compiling and profiling `model`
    planned,        // the sites are counted: `sites` to tune, of the counts below
    tuning,         // a candidate of site `site` of `sites` finished
    option_kernel,  // tuning a kernel a graph choice's other option builds, for `for_template`'s site
    site_failed,    // the site could not be tuned (`error`); the job goes on
  };
  Stage stage = Stage::profiling;
  std::string model{};
  std::size_t site = 0, sites = 0;        // 1-based
  std::string template_name{}, kernel{};  // the site: its template, and its kernel (or problem) text
  std::string for_template{};
  int candidates = 0;       // candidates of the site finished
  double best_speedup = 1;  // the best of them against the heuristic's choice
  double seconds_left = 0;  // of the job's budget
  std::string error{};
  std::size_t all_sites = 0, in_shard = 0, already = 0;  // planned (TuneReport's)
  std::string database{};                               // planned: its path
};

struct KILN_API TuneJobOptions {
  // How the models compile, and on which device: the backend, device, cache
  // folder and settings (tune_db names the database; default: the cache
  // folder's). The mode is ignored: models are profiled in default mode.
  CompileOptions compile{};
  double budget_s = 600;  // wall time for the whole job
  bool resume = false;    // skip sites the database holds a complete record for
  std::uint64_t shard = 0, shards = 1;  // this job's fixed 1/shards of the sites
  double candidate_limit_s = 30;  // a candidate taking longer is stopped
  std::size_t max_candidates = 0; // per site, in the search's order, the heuristic's first (0: as the budget allows)
  // Candidates compiled in parallel, ahead of their measurement (one at a
  // time is measured). 0: one per hardware thread of this machine.
  int compile_threads = 0;
  // Asked between candidates: true stops the job, keeping what finished (Ctrl-C).
  std::function<bool()> stop_requested{};
  std::function<void(const TuneProgress&)> on_progress{};
};

// One site of a job.
struct KILN_API TuneSite {
  std::string template_name;
  std::string kernel;  // its record's kernel text (what it computes)
  double share = 0;    // its mean share of the models' device time
  std::vector<std::string> models;
  // explain_tuning: whether the database's record applies ("applies",
  // "missing", ...), why not, and the record's choice.
  std::string status, reason;
  std::string heuristic_knobs, winner_knobs;
  double speedup = 0;  // the record's winner against the heuristic (tune: this job's)
  double heuristic_ms = 0, tuned_ms = 0;  // tune: this job's measurements
};

struct KILN_API TuneReport {
  std::string database;  // its path
  std::string device, backend, driver;
  std::size_t models = 0;
  std::size_t sites = 0;     // every site of the models
  std::size_t in_shard = 0;  // this shard's
  std::size_t already = 0;   // this shard's the database holds (resume)
  std::size_t to_tune = 0;   // the rest
  std::vector<TuneSite> listed;  // explain_tuning: this shard's sites, biggest first
  std::vector<TuneSite> tuned;   // tune: the sites tuned, in order
  std::size_t option_kernels = 0;  // kernels of graph choices' other options tuned before those choices
  bool stopped = false;            // by stop_requested
  double seconds = 0;              // spent tuning (profiling excluded)
};

// Runs the job (above). Throws Error(InvalidArgument) when there is no
// database (the cache is off and tune_db is not set) or a bad shard,
// Error(DeviceUnavailable) or Error(NotFound) when the device is lost; a
// site whose tuning fails otherwise is reported (site_failed) and skipped.
KILN_API TuneReport tune_models(const std::vector<Model>& models, const TuneJobOptions& options = {});

// The job's sites and whether the database's records apply to them, without
// tuning or writing anything (nothing is profiled either: shares are 0).
KILN_API TuneReport explain_tuning(const std::vector<Model>& models, const TuneJobOptions& options = {});

// The tuning database itself: where it is, what it holds, and moving records
// between machines (`kiln tune show|merge|export|import`).

// "tuning.db" in the cache folder `cache_dir` ("" resolves as the kernel cache
// does: $KILN_CACHE_DIR, ...); "" when the disk cache is off.
KILN_API std::string default_tuning_database(const std::string& cache_dir = "");

// One record: what the autotuner measured for one kernel on one device.
struct KILN_API TuningRecord {
  std::string kernel;         // what it computes
  std::string template_name;  // and the template version that wrote it
  int template_version = 0;
  std::string backend, device, driver;
  std::string heuristic_knobs, winner_knobs;
  double heuristic_ms = 0, winner_ms = 0;
  double speedup = 1;  // heuristic_ms / winner_ms
  std::size_t candidates_ok = 0, candidates_failed = 0;  // not counting unmeasured ones
  std::string date;  // when it was measured ("2026-12-01T16:30:00Z")
};

// Every record of the database at `path`, ordered by key; reads only.
// Throws Error(NotFound) when there is no file, Error(Corrupt) naming the
// problem when it is no usable tuning database.
KILN_API std::vector<TuningRecord> tuning_records(const std::string& path);

// Writes the records of `inputs` (only read) into a new database at `output`
// (a temporary file beside it, synced, then renamed): where two hold a record
// for one kernel, the newer wins, whatever the order. Returns the number of
// records written.
KILN_API std::size_t merge_tuning_databases(const std::vector<std::string>& inputs, const std::string& output);

// Writes every record of the database at `path` to the JSON file
// `json_file` (written whole); returns how many.
KILN_API std::size_t export_tuning_database(const std::string& path, const std::string& json_file);

// What import_tuning_database did.
struct KILN_API TuningImport {
  std::size_t changed = 0;  // records added or replaced
  std::size_t records = 0;  // records the database holds now
};

// Adds the records of the JSON export `json_file` to the database at `path`
// (created if absent); a newer record already there stays; all or nothing.
// Throws Error(Corrupt) naming the file for a malformed export,
// Error(Unsupported) for one of a newer schema.
KILN_API TuningImport import_tuning_database(const std::string& json_file, const std::string& path);

}  // namespace kiln

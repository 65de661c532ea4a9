// The autotuner (one implementation for every backend; it reaches devices
// only through backends/backend.h): tunes one site at a time. Candidates
// (candidates.h) are measured in a worker process (worker_process.h,
// measure.h) that is killed after a per-candidate time limit and restarted
// for the rest, so a crash or a hang costs one candidate; the choice
// (choice.h) keeps the heuristic's knobs unless a candidate beats them by
// more than the measured noise. A model-level loop calls sites_of() (site.h)
// and tune_site() per site, in the order it likes (by device-time share),
// and stores the records in the tuning database.
#pragma once

#include "src/tune/database.h"
#include "src/tune/measure.h"
#include "src/tune/site.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kiln::tune {

struct DeviceSelection {
  std::string backend = "vulkan";
  int index = 0;
};

// The environment variable naming the worker executable.
inline constexpr const char* kWorkerVariable = "KILN_TUNE_WORKER";

struct TuneOptions {
  // Wall time for the whole site, worker start included. When it runs out,
  // the candidate being measured is stopped and it and every later one are
  // not_measured; every finished result is kept.
  double budget_s = 60;
  double candidate_limit_s = 30;  // a candidate taking longer is timed_out (its worker killed)
  double worker_start_limit_s = 60;
  // The site's reference result (plain loops in double, once per worker).
  double reference_limit_s = 600;
  std::size_t max_candidates = 0;  // 0: the whole space (within the budget)
  // Candidates compiled at once in the worker, each with the next ones the
  // search would give, before it is measured (kernel sites; measuring stays
  // one at a time). 0: one per hardware thread; 1: each compiled when it is
  // measured.
  int compile_threads = 0;
  std::uint64_t seed = 1;          // of the search order
  double noise_floor = 0.02;       // see choose()
  // A candidate whose first run is this many times slower than the best
  // median so far is timed by that run alone (0: time every one in full).
  double give_up_factor = 4;
  MeasureOptions measure;
  // The worker executable; empty: $KILN_TUNE_WORKER, else kiln-tune-worker
  // beside the running executable, else the build tree's.
  std::string worker_path;
  // Called after each candidate's result (progress, logs).
  std::function<void(const CandidateResult&)> on_result;
  // Asked before each candidate and after each measurement: true stops the
  // site as the budget would (Ctrl-C); the candidate being measured and the
  // rest are not_measured, and the record keeps every finished result.
  std::function<bool()> stop_requested;
};

// The worker executable tune_site would start.
std::string worker_path(const TuneOptions& options);

// The kiln version (Meson's project version).
std::string kiln_version();

// Tunes `site` on the selected device, measuring candidates in the order
// search.h gives until the budget ends it. The record's candidates keep the list's order (candidates.h), those the
// budget left not_measured; provenance is filled. Throws Error(NotFound) for a bad device
// selection or worker path, Error(DeviceUnavailable) if the worker cannot
// open the device.
Record tune_site(const Site& site, const DeviceSelection& device, const TuneOptions& options = {});

// The budget of one site when `left_s` is left for several, tuned one after
// another: its share by `weight` (device time, or estimated work) of the
// sites still to tune, `remaining_weight` (its own included), but at least
// `floor_s`, so that a site with a small share still gets its heuristic and
// neighbours measured, and never more than is left. One site with a large
// candidate space would otherwise spend a whole run's budget.
double site_budget(double left_s, double weight, double remaining_weight, double floor_s = 15);

}  // namespace kiln::tune

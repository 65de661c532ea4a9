#include "src/tune/tuner.h"

#include "backends/registry.h"
#include "src/base/check.h"
#include "src/base/log.h"
#include "src/tune/candidates.h"
#include "src/tune/choice.h"
#include "src/tune/graph_site.h"
#include "src/tune/protocol.h"
#include "src/tune/search.h"
#include "src/tune/tune_build_config.h"
#include "src/tune/worker_location.h"
#include "src/tune/worker_process.h"

#include <kiln/error.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <thread>

namespace kiln::tune {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_until(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

backend::TargetDesc find_target(const backend::Backend& backend, const DeviceSelection& device) {
  if (auto reason = backend.unavailable_reason())
    throw_error(ErrorKind::DeviceUnavailable, "backend '" + device.backend + "' cannot run kernels: " + *reason);
  for (const backend::DeviceInfo& info : backend.enumerate_devices())
    if (info.index == device.index) return info.target;
  throw_error(ErrorKind::NotFound,
              "backend '" + device.backend + "' has no device " + std::to_string(device.index));
}

CandidateResult not_measured(const std::string& knobs, std::string why) {
  CandidateResult result;
  result.knobs = knobs;
  result.status = CandidateStatus::not_measured;
  result.detail = std::move(why);
  return result;
}

// A worker's reply to its start or to a prepare request: {"ready": true}, else {"error": why}.
void check_ready(const std::string& reply, const std::string& what) {
  const nlohmann::json ready = nlohmann::json::parse(reply, nullptr, false);
  if (ready.is_object() && ready.contains("ready")) return;
  const std::string why = ready.is_object() && ready.contains("error") && ready["error"].is_string()
                              ? ready["error"].get<std::string>()
                              : reply;
  throw_error(ErrorKind::DeviceUnavailable, "the tuning worker " + what + ": " + why);
}

}  // namespace

std::string kiln_version() { return KILN_PROJECT_VERSION; }

double site_budget(double left_s, double weight, double remaining_weight, double floor_s) {
  if (left_s <= 0) return 0;
  const double share = remaining_weight > 0 ? left_s * std::clamp(weight / remaining_weight, 0.0, 1.0) : left_s;
  return std::min(left_s, std::max(share, floor_s));
}

std::string worker_path(const TuneOptions& options) {
  if (!options.worker_path.empty()) return options.worker_path;
  if (const char* value = std::getenv(kWorkerVariable); value && *value) return value;
  return find_worker();
}

// Rounds of the heuristic and a winner timed alternately (each a full
// measurement: warm-up, repeats, median) before the winner replaces it.
constexpr int kConfirmRounds = 3;

Record tune_site(const Site& site, const DeviceSelection& device, const TuneOptions& options) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.budget_s));
  const backend::Backend& backend = backend::get_backend(device.backend);
  const backend::TargetDesc target = find_target(backend, device);
  // A graph pass's choice offers its options; a kernel's, the template's knob space.
  CandidateList list = is_graph_site(site) ? CandidateList{graph_site_candidates(site), {}}
                                           : candidates(site, backend, target, options.seed);
  if (options.max_candidates != 0 && list.knobs.size() > options.max_candidates) list.knobs.resize(options.max_candidates);
  for (const auto& [knobs, why] : list.filtered)
    base::log(base::LogLevel::debug, "tune '" + site.id.problem + "': " + knobs + " filtered out: " + why);

  KILN_CHECK(!list.knobs.empty(), ErrorKind::Unsupported,
             "tuning site '" + site.id.problem + "': the target can run none of its candidates");
  Record record;
  record.key.kernel = site.id.problem;
  record.key.template_name = site.id.template_name;
  record.key.template_version = site.id.template_version;
  record.key.device = {target.backend, target.device_name, target.driver};
  record.heuristic_knobs = list.knobs.front();
  record.provenance = {utc_now(), host_name(), kiln_version(), options.budget_s};
  for (const std::string& knobs : list.knobs) record.candidates.push_back(not_measured(knobs, "the budget ran out first"));

  const std::string path = worker_path(options);
  const std::string hello = nlohmann::json{{"backend", device.backend}, {"device", device.index}}.dump();
  const std::string site_text = to_json(site);
  std::unique_ptr<WorkerProcess> worker;
  bool started_once = false;
  double best_ms = 0;  // the fastest median so far
  CandidateSearch search(list.knobs);
  const auto stopping = [&] { return options.stop_requested && options.stop_requested(); };
  // The search leaves a part of the budget to confirm its winner (below).
  const Clock::time_point search_deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.budget_s * 0.85));
  // Compiling ahead: a candidate the worker has not built comes with the
  // next ones the search would give if it did not win, compiled in parallel
  // before it is measured (Measurer::compile_ahead). Off for graph sites
  // (they compile whole models), and for the rest of the site once a worker
  // died or hung with others compiling beside a candidate: it is measured
  // again alone, so a failure is the candidate's own.
  const int compile_threads = options.compile_threads > 0 ? options.compile_threads
                                                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool compile_ahead = compile_threads > 1 && !is_graph_site(site);
  std::set<std::size_t> built;  // candidates the current worker has compiled
  // Starts a worker when there is none: opens the device, then computes the
  // site's reference (once per worker, outside any candidate's time limit).
  // False (with `result`'s detail saying why, where it is not the budget)
  // when the search must end.
  auto ensure_worker = [&](CandidateResult& result) -> bool {
    if (worker) return true;
    built.clear();
    std::string reply;
    try {
      worker = std::make_unique<WorkerProcess>(
          path, hello, std::min(options.worker_start_limit_s, std::max(seconds_until(deadline), 0.0)), reply);
    } catch (const Error& error) {
      if (seconds_until(deadline) <= 0) return false;  // the budget ran out while it started
      if (!started_once) throw;
      result.detail = std::string("the tuning worker could not restart: ") + error.what();
      return false;
    }
    check_ready(reply, "cannot measure on " + device.backend + " device " + std::to_string(device.index));
    const double left = seconds_until(deadline);
    const bool budget_bound = left < options.reference_limit_s;
    const nlohmann::json prepare = {{"prepare", site_text}, {"options", options_json(options.measure)}};
    switch (worker->exchange(prepare.dump(), reply, budget_bound ? std::max(left, 0.0) : options.reference_limit_s)) {
      case WorkerProcess::Outcome::replied: break;
      case WorkerProcess::Outcome::died:
        throw_error(ErrorKind::Internal, "the tuning worker died computing the reference of '" + site.id.problem +
                                             "': " + worker->exit_description());
      case WorkerProcess::Outcome::timed_out:
        if (budget_bound) {
          result.detail = "the budget ran out while the reference was computed";
          worker.reset();
          return false;
        }
        throw_error(ErrorKind::Unsupported, "the reference of '" + site.id.problem + "' took longer than " +
                                                std::to_string(options.reference_limit_s) + " s");
    }
    check_ready(reply, "cannot compute the reference of '" + site.id.problem + "'");
    started_once = true;
    return true;
  };
  while (const std::optional<std::size_t> index = search.next()) {
    CandidateResult& result = record.candidates[*index];
    if (seconds_until(search_deadline) <= 0 || stopping()) break;
    if (!ensure_worker(result)) break;
    double left = seconds_until(deadline);
    if (left <= 0) break;
    bool budget_bound = left < options.candidate_limit_s;
    double limit = budget_bound ? left : options.candidate_limit_s;
    // Not where the budget may end this candidate: what it compiled for later ones would be lost.
    std::vector<std::size_t> ahead;
    if (compile_ahead && !budget_bound && !built.count(*index)) {
      CandidateSearch guess = search;
      guess.measured(*index, std::nullopt);
      while (ahead.size() + 1 < static_cast<std::size_t>(compile_threads)) {
        const std::optional<std::size_t> j = guess.next();
        if (!j) break;
        guess.measured(*j, std::nullopt);
        if (!built.count(*j)) ahead.push_back(*j);
      }
    }
    MeasureOptions measure = options.measure;
    measure.time_cap_s = std::min(measure.time_cap_s, limit / 2);
    if (best_ms > 0 && options.give_up_factor > 0) measure.give_up_ms = best_ms * options.give_up_factor;
    std::string reply;
    WorkerProcess::Outcome outcome;
    for (;;) {
      nlohmann::json request = {{"site", site_text}, {"knobs", result.knobs}, {"options", options_json(measure)}};
      if (!ahead.empty()) {
        std::vector<std::string> knobs;
        for (const std::size_t j : ahead) knobs.push_back(record.candidates[j].knobs);
        request["ahead"] = knobs;
        request["threads"] = compile_threads;
      }
      outcome = worker->exchange(request.dump(), reply, limit);
      if (outcome == WorkerProcess::Outcome::replied || !request.contains("ahead") || budget_bound) break;
      // Others compiled beside it: it is measured again, alone, in a fresh worker.
      base::log(base::LogLevel::warning, "tune '" + site.id.problem + "': the worker " +
                                          (outcome == WorkerProcess::Outcome::died ? "died" : "hung") +
                                          " with candidates compiling in parallel; measuring one at a time");
      compile_ahead = false;
      ahead.clear();
      worker.reset();
      if (!ensure_worker(result)) break;
      left = seconds_until(deadline);
      budget_bound = left < options.candidate_limit_s;
      limit = budget_bound ? std::max(left, 0.0) : options.candidate_limit_s;
    }
    if (!worker) break;
    if (outcome == WorkerProcess::Outcome::replied) built.insert(ahead.begin(), ahead.end());
    switch (outcome) {
      case WorkerProcess::Outcome::replied: {
        const std::string knobs = result.knobs;
        try {
          result = result_from_json(nlohmann::json::parse(reply).at("result"));
        } catch (const std::exception& error) {
          result.status = CandidateStatus::crashed;
          result.detail = std::string("unreadable reply from the tuning worker: ") + error.what();
        }
        result.knobs = knobs;
        // A device error may leave the device unusable: the next candidate gets a fresh worker.
        if (result.status == CandidateStatus::crashed) worker.reset();
        break;
      }
      case WorkerProcess::Outcome::died:
        result.status = CandidateStatus::crashed;
        result.detail = "the tuning worker died: " + worker->exit_description();
        worker.reset();
        break;
      case WorkerProcess::Outcome::timed_out:
        if (budget_bound) {
          result.detail = "the budget ran out while it was measured";
        } else {
          result.status = CandidateStatus::timed_out;
          result.detail = "no result within " + std::to_string(options.candidate_limit_s) + " s";
        }
        worker.reset();
        break;
    }
    if (stopping()) {  // what it measured may be cut short: not a result
      result = not_measured(result.knobs, "the run was stopped first");
      break;
    }
    if (result.status == CandidateStatus::ok && (best_ms == 0 || result.median_ms < best_ms)) best_ms = result.median_ms;
    search.measured(*index, result.status == CandidateStatus::ok ? std::optional<double>(result.median_ms) : std::nullopt);
    if (options.on_result) options.on_result(result);
  }

  // A winner measured minutes after the heuristic may owe its lead to a
  // change in the machine's load, not to its knobs. Before it replaces the
  // heuristic, the two are measured again alternately in this worker, and
  // the medians of those rounds replace the search's; the choice is then
  // made again (up to three winners are put to this test). Where the budget
  // or the worker does not allow it, the search's timings stand.
  Choice choice = choose(record.candidates, options.noise_floor);
  for (int attempt = 0; attempt < 3 && choice.index != 0 && worker && !stopping(); ++attempt) {
    const std::size_t pair[2] = {0, choice.index};
    std::vector<double> medians[2];
    bool complete = true;
    for (int round = 0; round < kConfirmRounds && complete; ++round)
      for (int side = 0; side < 2 && complete; ++side) {
        const double left = seconds_until(deadline);
        if (left <= 0 || stopping() || !worker) {
          complete = false;
          break;
        }
        const double limit = std::min(left, options.candidate_limit_s);
        MeasureOptions measure = options.measure;
        measure.time_cap_s = std::min(measure.time_cap_s, limit / 2);
        const nlohmann::json request = {
            {"site", site_text}, {"knobs", record.candidates[pair[side]].knobs}, {"options", options_json(measure)}};
        std::string reply;
        if (worker->exchange(request.dump(), reply, limit) != WorkerProcess::Outcome::replied) {
          worker.reset();
          complete = false;
          break;
        }
        CandidateResult again;
        try {
          again = result_from_json(nlohmann::json::parse(reply).at("result"));
        } catch (const std::exception&) {
          again.status = CandidateStatus::crashed;
        }
        if (again.status != CandidateStatus::ok) {
          complete = false;
          break;
        }
        medians[side].push_back(again.median_ms);
      }
    if (!complete) break;
    for (int side = 0; side < 2; ++side) {
      CandidateResult& c = record.candidates[pair[side]];
      const TimeSummary summary = summarize(medians[side]);
      c.times_ms = medians[side];
      c.median_ms = summary.median;
      c.spread = summary.spread;
      c.detail = "timed again against " + std::string(side == 0 ? "a winner" : "the heuristic") + ", alternately (" +
                 std::to_string(kConfirmRounds) + " rounds)";
    }
    choice = choose(record.candidates, options.noise_floor);
  }
  worker.reset();

  const CandidateResult& heuristic = record.candidates.front();
  record.heuristic_ms = heuristic.status == CandidateStatus::ok ? heuristic.median_ms : 0;
  record.winner_knobs = record.candidates[choice.index].knobs;
  record.winner_ms = record.candidates[choice.index].status == CandidateStatus::ok
                         ? record.candidates[choice.index].median_ms
                         : 0;
  base::log(base::LogLevel::info, "tune '" + site.id.problem + "': " + record.winner_knobs + ": " + choice.reason);
  return record;
}

}  // namespace kiln::tune

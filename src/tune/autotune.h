// max-autotune for one compile: every tuning site looks up the tuning
// database; a site with no record that applies is tuned now, within the
// per-compile budget (the tune_budget setting), and its record kept, so the
// next process compiles as fast as default mode does. Graph-level sites
// (graph_site.h: Winograd or direct, packed or plain weights) are decided
// while the passes run, in graph order; then the kernel sites of the graph
// after passes, biggest kernels first, with what is left of the budget. What
// was decided per site is part of the plan, for `kiln explain --mode
// max-autotune` and `kiln tune --explain`.
#pragma once

#include "backends/backend.h"
#include "graph/ir.h"
#include "graph/passes/passes.h"

#include <kiln/settings.h>

#include "shaders/target.h"
#include "src/tune/database.h"
#include "src/tune/site.h"
#include "src/tune/tuner.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::tune {

// Where a site's knobs came from.
enum class ChoiceSource {
  heuristic,  // no record applies (and none was tuned now)
  database,   // a record that applies
  tuned_now,  // tuned during this compile and recorded
};
const char* choice_source_name(ChoiceSource source);  // "heuristic", "database", "tuned now"

struct SiteDecision {
  Site site;                      // a kernel's, or a graph pass's choice (is_graph_site)
  std::string node_name;          // the graph node it was found at
  Applicability lookup = Applicability::no_record;  // the database's verdict before tuning
  std::string reason;             // why no record applied ("" when one did)
  ChoiceSource source = ChoiceSource::heuristic;
  std::string knobs;              // the knobs the kernel is built with (a graph site: the option taken)
  double speedup = 1;             // the record's, when one is used
};

struct AutotuneOptions {
  std::string database_path;    // the tuning database file
  bool tune_missing = true;     // false: records only (kiln dump, kiln tune --explain)
  double budget_s = 0;          // for tuning sites without a record, all together
  DeviceSelection device;       // where candidates run (the worker opens it)
  TuneOptions tune;             // per-site options (its budget is set from budget_s)
};

struct AutotuneResult {
  std::shared_ptr<const lower::KnobOverrides> overrides;  // problem -> knobs, for lowering
  std::vector<SiteDecision> decisions;                    // one per distinct site: graph choices, then kernels
  double tuning_s = 0;                                    // time spent tuning now
  std::string database_path;
};

// The tuning database a compile uses: the tune_db setting, else tuning.db
// beside the kernel cache (`cache_dir` as CompileOptions::cache_dir; "" when
// the cache is off: then records last for the process only).
std::string database_path(const Settings& settings, const std::string& cache_dir);

// What a cached max-autotune plan is keyed by: a digest of every record in
// the database at `path` ("no database" when there is no file); nullopt
// when the file cannot be read (the compile reports it and plans afresh).
std::optional<std::string> database_digest(const std::string& path);

// The record key of `site` on `target`.
RecordKey record_key(const Site& site, const backend::TargetDesc& target);

// Multiply-adds the site's kernel does (an estimate from its node's shapes;
// for pointwise and reduction sites the elements they read or write): the
// order sites are tuned in when no profile says better.
double estimated_work(const Site& site);

// One compile's autotuning: the graph passes call choose() (as
// PlanRequest::graph_chooser), then build_plan calls finish() with the graph
// after passes (as PlanRequest::autotune). One budget and one database for
// both. A database that cannot be opened is reported (a warning) and treated
// as empty; a site whose tuning fails keeps the heuristic's (the rule's)
// choice, with the reason.
class Autotuner {
 public:
  Autotuner(backend::TargetDesc target, AutotuneOptions options);

  // A graph pass's choice: the database's record, else tuned now within the
  // budget, else the rule's. A site seen before in this compile (a repeated
  // block) gets the same answer.
  std::string choose(const graph::passes::GraphChoice& choice);

  // Decides every kernel site of `graph` (after passes) for the target; the
  // result lists the graph choices decided so far first.
  AutotuneResult finish(const graph::Graph& graph, const lower::LowerTarget& lower_target);

 private:
  void open_database();
  SiteDecision look_up(const Site& site);
  // Tunes `d` now within `budget_s` (at most what is left); records it on success.
  void tune_now(SiteDecision& d, double budget_s);
  double budget_left() const { return options_.budget_s - tuning_s_; }

  backend::TargetDesc target_;
  AutotuneOptions options_;
  bool opened_ = false;
  std::optional<Database> db_;
  std::string no_database_ = "no tuning database";
  bool device_failed_ = false;  // the device or worker is unusable: tune nothing more
  double tuning_s_ = 0;
  std::vector<SiteDecision> graph_decisions_;
  std::map<std::string, std::size_t> graph_index_;  // by template and problem
};

// Decides every kernel site of `graph` (after passes) for `target`:
// Autotuner(target, options).finish(graph, lower_target).
AutotuneResult autotune(const graph::Graph& graph, const backend::TargetDesc& target,
                        const lower::LowerTarget& lower_target, const AutotuneOptions& options);

// One line per site for explain: "conv 'layer1.0.conv1' [problem]: database (1.31x): 4x4_k4_p8_wg64_v4".
std::string describe(const AutotuneResult& result);

}  // namespace kiln::tune

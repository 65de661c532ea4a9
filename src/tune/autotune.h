// max-autotune for one compile: every tuning site of the graph after passes
// looks up the tuning database; a site with no record that applies is tuned
// now, within the per-compile budget (the tune_budget setting), biggest
// kernels first, and its record kept, so the next process compiles as fast as
// default mode does. What was decided per site is part of the plan, for
// `kiln explain --mode max-autotune` and `kiln tune --explain`.
#pragma once

#include "backends/backend.h"
#include "graph/ir.h"

#include <kiln/settings.h>

#include "src/lower/target.h"
#include "src/tune/database.h"
#include "src/tune/site.h"
#include "src/tune/tuner.h"

#include <memory>
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
  Site site;
  std::string node_name;          // the graph node it was found at
  Applicability lookup = Applicability::no_record;  // the database's verdict before tuning
  std::string reason;             // why no record applied ("" when one did)
  ChoiceSource source = ChoiceSource::heuristic;
  std::string knobs;              // the knobs the kernel is built with
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
  std::vector<SiteDecision> decisions;                    // one per distinct site, graph order
  double tuning_s = 0;                                    // time spent tuning now
  std::string database_path;
};

// The tuning database a compile uses: the tune_db setting, else tuning.db
// beside the kernel cache (`cache_dir` as CompileOptions::cache_dir; "" when
// the cache is off: then records last for the process only).
std::string database_path(const Settings& settings, const std::string& cache_dir);

// The record key of `site` on `target`.
RecordKey record_key(const Site& site, const backend::TargetDesc& target);

// Multiply-adds the site's kernel does (an estimate from its node's shapes;
// for pointwise and reduction sites the elements they read or write): the
// order sites are tuned in when no profile says better.
double estimated_work(const Site& site);

// Decides every site of `graph` (after passes) for `target`. A database that
// cannot be opened is reported (a warning) and treated as empty; a site whose
// tuning fails is left at the heuristic's knobs, with the reason.
AutotuneResult autotune(const graph::Graph& graph, const backend::TargetDesc& target,
                        const lower::LowerTarget& lower_target, const AutotuneOptions& options);

// One line per site for explain: "conv 'layer1.0.conv1' [problem]: database (1.31x): 4x4_k4_p8_wg64_v4".
std::string describe(const AutotuneResult& result);

}  // namespace kiln::tune

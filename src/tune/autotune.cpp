#include "src/tune/autotune.h"

#include "src/base/cache_key.h"
#include "src/base/log.h"
#include "src/tune/graph_site.h"

#include <kiln/error.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <numeric>

namespace kiln::tune {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double elements(const graph::TensorType& type) {
  double n = 1;
  for (std::int64_t d : type.shape) n *= static_cast<double>(std::max<std::int64_t>(d, 1));
  return n;
}

}  // namespace

const char* choice_source_name(ChoiceSource source) {
  switch (source) {
    case ChoiceSource::heuristic: return "heuristic";
    case ChoiceSource::database: return "database";
    case ChoiceSource::tuned_now: return "tuned now";
  }
  return "?";
}

std::string database_path(const Settings& settings, const std::string& cache_dir) {
  if (!settings.text("tune_db").empty()) return settings.text("tune_db");
  return default_database_path(cache_dir);
}

RecordKey record_key(const Site& site, const backend::TargetDesc& target) {
  RecordKey key;
  key.kernel = site.id.problem;
  key.template_name = site.id.template_name;
  key.template_version = site.id.template_version;
  key.device = {target.backend, target.device_name, target.driver};
  return key;
}

double estimated_work(const Site& site) {
  if (site.outputs.empty()) return 0;
  const double out = elements(site.outputs[0]);
  const auto input = [&](std::size_t i) -> const graph::TensorType* {
    return i < site.inputs.size() && site.inputs[i] ? &*site.inputs[i] : nullptr;
  };
  const std::string& op = site.node.op;
  // Output elements times the length of the reduction each one takes.
  if ((op == "MatMul" || op == "Gemm") && input(0) && !input(0)->shape.empty()) {
    const graph::TensorType& a = *input(0);
    const bool trans_a = op == "Gemm" && site.node.attrs.get_int("transA", 0) != 0;
    const std::int64_t k = trans_a && a.shape.size() >= 2 ? a.shape[a.shape.size() - 2] : a.shape.back();
    return out * static_cast<double>(std::max<std::int64_t>(k, 1));
  }
  if (op == "Conv" && input(1) && input(1)->shape.size() >= 2) {
    const graph::TensorType& w = *input(1);
    const double per_output = elements(w) / static_cast<double>(std::max<std::int64_t>(w.shape[0], 1));
    return out * per_output;
  }
  if (op == "Attention" && input(1) && input(1)->shape.size() >= 2) {
    const graph::TensorType& k = *input(1);
    return out * static_cast<double>(k.shape[k.shape.size() - 2]) * 2;
  }
  // Pointwise and reduction kernels (the workgroup size): the elements they
  // read or write, far fewer than a GEMM's or convolution's multiply-adds.
  double touched = out;
  for (std::size_t i = 0; i < site.inputs.size(); ++i)
    if (input(i)) touched = std::max(touched, elements(*input(i)));
  return touched;
}

Autotuner::Autotuner(backend::TargetDesc target, AutotuneOptions options)
    : target_(std::move(target)), options_(std::move(options)) {}

void Autotuner::open_database() {
  if (opened_) return;
  opened_ = true;
  try {
    if (options_.database_path.empty())  // the disk cache is off: records last for this process only
      db_ = options_.tune_missing ? std::optional<Database>(Database::in_memory()) : std::nullopt;
    else
      db_ = options_.tune_missing ? Database::open(options_.database_path)
                                  : Database::open_read_only(options_.database_path);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::NotFound) {
      no_database_ = "no tuning database at " + options_.database_path;
    } else {
      no_database_ = std::string("the tuning database cannot be used: ") + e.what();
      base::log(base::LogLevel::warning, "max-autotune: " + no_database_ + "; the heuristic's knobs are kept");
    }
  }
}

SiteDecision Autotuner::look_up(const Site& site) {
  open_database();
  SiteDecision d;
  d.site = site;
  d.node_name = site.node.name;
  d.knobs = site.id.knobs;
  if (!db_) {
    d.reason = no_database_;
    return d;
  }
  const Lookup lookup = db_->find(record_key(site, target_));
  d.lookup = lookup.status;
  d.reason = lookup.reason;
  if (lookup.status == Applicability::applies && lookup.record) {
    d.source = ChoiceSource::database;
    d.knobs = lookup.record->winner_knobs;
    d.speedup = lookup.record->speedup();
  }
  return d;
}

void Autotuner::tune_now(SiteDecision& d, double budget_s) {
  if (!db_ || !options_.tune_missing || options_.budget_s <= 0 || device_failed_) return;
  if (options_.tune.stop_requested && options_.tune.stop_requested()) {
    d.reason += d.reason.empty() ? "tuning was stopped" : "; tuning was stopped";
    return;
  }
  const double left = budget_left();
  if (left <= 0.5) {
    d.reason += d.reason.empty() ? "the tuning budget was spent" : "; the tuning budget was spent";
    return;
  }
  TuneOptions tune = options_.tune;
  tune.budget_s = std::min(budget_s, left);
  tune.measure.kernel_records = options_.database_path;  // a graph site's kernels as this database has them
  const auto start = Clock::now();
  try {
    const Record record = tune_site(d.site, options_.device, tune);
    if (tune.stop_requested && tune.stop_requested()) {  // cut short: not a record to keep
      d.reason += d.reason.empty() ? "tuning was stopped" : "; tuning was stopped";
      tuning_s_ += seconds_since(start);
      return;
    }
    db_->put(record);
    d.source = ChoiceSource::tuned_now;
    d.knobs = record.winner_knobs;
    d.speedup = record.speedup();
    base::log(base::LogLevel::info, "max-autotune: " + d.site.id.problem + " -> " + record.winner_knobs + " (" +
                                              std::to_string(record.speedup()) + "x over the heuristic)");
  } catch (const Error& e) {
    d.reason += std::string(d.reason.empty() ? "" : "; ") + "tuning failed: " + e.what();
    base::log(base::LogLevel::warning, "max-autotune: tuning " + d.site.id.problem + " failed: " + e.what());
    // No point trying the rest.
    if (e.kind() == ErrorKind::DeviceUnavailable || e.kind() == ErrorKind::NotFound) device_failed_ = true;
  }
  tuning_s_ += seconds_since(start);
}

std::string Autotuner::choose(const graph::passes::GraphChoice& choice) {
  const std::optional<Site> site = graph_site_of(choice);
  if (!site) return choice.rule;
  const std::string id = site->id.template_name + " " + site->id.problem;
  if (auto seen = graph_index_.find(id); seen != graph_index_.end()) return graph_decisions_[seen->second].knobs;
  SiteDecision d = look_up(*site);
  // A few options each: the site may take what is left (kernel sites, found later, share the rest).
  if (d.source == ChoiceSource::heuristic) tune_now(d, budget_left());
  if (std::find(choice.options.begin(), choice.options.end(), d.knobs) == choice.options.end()) {
    d.reason += std::string(d.reason.empty() ? "" : "; ") + "'" + d.knobs + "' is not an option here";
    d.source = ChoiceSource::heuristic;
    d.knobs = choice.rule;
  }
  graph_index_.emplace(id, graph_decisions_.size());
  graph_decisions_.push_back(d);
  return d.knobs;
}

AutotuneResult Autotuner::finish(const graph::Graph& graph, const lower::LowerTarget& lower_target) {
  AutotuneResult result;
  result.database_path = options_.database_path;
  result.decisions = graph_decisions_;
  auto overrides = std::make_shared<lower::KnobOverrides>();

  const std::vector<Site> sites = sites_of(graph, lower_target);
  const std::size_t first_kernel = result.decisions.size();
  for (const Site& site : sites) result.decisions.push_back(look_up(site));

  // Kernel sites without a record, biggest first, within what is left of the budget.
  std::vector<std::size_t> pending;
  for (std::size_t i = first_kernel; i < result.decisions.size(); ++i)
    if (result.decisions[i].source == ChoiceSource::heuristic) pending.push_back(i);
  std::stable_sort(pending.begin(), pending.end(), [&](std::size_t a, std::size_t b) {
    return estimated_work(result.decisions[a].site) > estimated_work(result.decisions[b].site);
  });
  double remaining_work = 0;
  for (std::size_t i : pending) remaining_work += estimated_work(result.decisions[i].site);
  for (std::size_t i : pending) {
    const double work = estimated_work(result.decisions[i].site);
    tune_now(result.decisions[i], site_budget(budget_left(), work, remaining_work));
    remaining_work -= work;
  }
  result.tuning_s = tuning_s_;
  for (std::size_t i = first_kernel; i < result.decisions.size(); ++i) {
    const SiteDecision& d = result.decisions[i];
    if (d.source != ChoiceSource::heuristic && d.knobs != d.site.id.knobs) overrides->emplace(d.site.id.problem, d.knobs);
  }
  result.overrides = std::move(overrides);
  return result;
}

AutotuneResult autotune(const graph::Graph& graph, const backend::TargetDesc& target,
                        const lower::LowerTarget& lower_target, const AutotuneOptions& options) {
  return Autotuner(target, options).finish(graph, lower_target);
}

std::optional<std::string> database_digest(const std::string& path) {
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(path, ec)) return "no database";
  try {
    const std::string records = Database::open_read_only(path).export_json();
    return base::hex_digest(XXH3_128bits(records.data(), records.size()));
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::string describe(const AutotuneResult& result) {
  std::string text;
  for (const SiteDecision& d : result.decisions) {
    text += d.site.id.template_name + " '" + d.node_name + "' [" + d.site.id.problem + "]: " +
            choice_source_name(d.source);
    if (d.source != ChoiceSource::heuristic) {
      char speedup[32];
      std::snprintf(speedup, sizeof speedup, " (%.2fx)", d.speedup);
      text += speedup;
    } else {
      text += " (" + std::string(applicability_name(d.lookup)) + (d.reason.empty() ? "" : ": " + d.reason) + ")";
    }
    text += ": " + d.knobs + "\n";
  }
  return text;
}

}  // namespace kiln::tune

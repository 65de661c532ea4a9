#include "src/tune/autotune.h"

#include "src/runtime/log.h"

#include <kiln/error.h>

#include <algorithm>
#include <chrono>
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

AutotuneResult autotune(const graph::Graph& graph, const backend::TargetDesc& target,
                        const lower::LowerTarget& lower_target, const AutotuneOptions& options) {
  AutotuneResult result;
  result.database_path = options.database_path;
  auto overrides = std::make_shared<lower::KnobOverrides>();

  const std::vector<Site> sites = sites_of(graph, lower_target);
  if (sites.empty()) {
    result.overrides = std::move(overrides);
    return result;
  }
  std::optional<Database> db;
  std::string no_database = "no tuning database";
  try {
    if (options.database_path.empty())  // the disk cache is off: records last for this process only
      db = options.tune_missing ? std::optional<Database>(Database::in_memory()) : std::nullopt;
    else
      db = options.tune_missing ? Database::open(options.database_path) : Database::open_read_only(options.database_path);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::NotFound) {
      no_database = "no tuning database at " + options.database_path;
    } else {
      no_database = std::string("the tuning database cannot be used: ") + e.what();
      runtime::log(runtime::LogLevel::warning, "max-autotune: " + no_database + "; the heuristic's knobs are kept");
    }
  }

  for (const Site& site : sites) {
    SiteDecision d;
    d.site = site;
    d.node_name = site.node.name;
    d.knobs = site.id.knobs;
    if (db) {
      const Lookup lookup = db->find(record_key(site, target));
      d.lookup = lookup.status;
      d.reason = lookup.reason;
      if (lookup.status == Applicability::applies && lookup.record) {
        d.source = ChoiceSource::database;
        d.knobs = lookup.record->winner_knobs;
        d.speedup = lookup.record->speedup();
      }
    } else {
      d.reason = no_database;
    }
    result.decisions.push_back(std::move(d));
  }

  // Sites without a record, biggest first, within the budget.
  std::vector<std::size_t> pending;
  for (std::size_t i = 0; i < result.decisions.size(); ++i)
    if (result.decisions[i].source == ChoiceSource::heuristic) pending.push_back(i);
  std::stable_sort(pending.begin(), pending.end(), [&](std::size_t a, std::size_t b) {
    return estimated_work(result.decisions[a].site) > estimated_work(result.decisions[b].site);
  });
  const auto start = Clock::now();
  double remaining_work = 0;
  for (std::size_t i : pending) remaining_work += estimated_work(result.decisions[i].site);
  if (db && options.tune_missing && options.budget_s > 0) {
    for (std::size_t i : pending) {
      SiteDecision& d = result.decisions[i];
      const double work = estimated_work(d.site);
      const double left = options.budget_s - seconds_since(start);
      if (left <= 0.5) {
        d.reason += d.reason.empty() ? "the tuning budget was spent" : "; the tuning budget was spent";
        continue;
      }
      TuneOptions tune = options.tune;
      tune.budget_s = site_budget(left, work, remaining_work);
      remaining_work -= work;
      try {
        const Record record = tune_site(d.site, options.device, tune);
        db->put(record);
        d.source = ChoiceSource::tuned_now;
        d.knobs = record.winner_knobs;
        d.speedup = record.speedup();
        runtime::log(runtime::LogLevel::info, "max-autotune: " + d.site.id.problem + " -> " + record.winner_knobs +
                                                  " (" + std::to_string(record.speedup()) + "x over the heuristic)");
      } catch (const Error& e) {
        d.reason += std::string(d.reason.empty() ? "" : "; ") + "tuning failed: " + e.what();
        runtime::log(runtime::LogLevel::warning, "max-autotune: tuning " + d.site.id.problem + " failed: " + e.what());
        if (e.kind() == ErrorKind::DeviceUnavailable || e.kind() == ErrorKind::NotFound) break;  // no point trying the rest
      }
    }
  }
  result.tuning_s = seconds_since(start);
  for (const SiteDecision& d : result.decisions)
    if (d.source != ChoiceSource::heuristic && d.knobs != d.site.id.knobs) overrides->emplace(d.site.id.problem, d.knobs);
  result.overrides = std::move(overrides);
  return result;
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

// kiln::tune_models and kiln::explain_tuning (include/kiln/tune.h): the model-level
// tuning job over the autotuner's sites (site.h, graph_site.h), the tuner
// (tuner.h) and the tuning database (database.h).
#include <kiln/tune.h>

#include "src/base/check.h"
#include "src/lower/target_policy.h"
#include "src/runtime/executor.h"
#include "src/runtime/internal_access.h"
#include "src/tune/autotune.h"
#include "src/tune/candidates.h"
#include "src/tune/graph_site.h"

#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <set>

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;

// One tuning site across the models, with the device time it takes.
struct WorkItem {
  tune::Site site;
  tune::RecordKey key;
  double ms = 0;  // profiled device time of its dispatches, all models together
  // Its mean share of each model's device time: what orders the work, so
  // that every model's biggest kernels come early, not only the slowest
  // model's (a model's speed-up counts as much as another's).
  double share = 0;
  std::vector<std::string> models;
};

// Which shard a site belongs to: a hash of what it computes (not of the
// device), the same on every machine of an array job.
std::uint64_t shard_of(const tune::RecordKey& key, std::uint64_t shards) {
  const std::string identity = key.template_name + "@" + std::to_string(key.template_version) + " " + key.kernel;
  return XXH3_64bits(identity.data(), identity.size()) % shards;
}

// The tuning problem a dispatch runs. Not its kernel's: kernels of one
// structure share a source with their sizes as parameters, and the shared
// kernel carries the first one's site. The dispatch's own node of the
// kernel's template says.
std::string dispatch_problem(const graph::Graph& graph, const compiler::Dispatch& dispatch,
                             const kir::TuningSite& shared, const lower::LowerTarget& target) {
  for (graph::NodeId node : dispatch.nodes) {
    const std::optional<tune::Site> site = tune::site_of(graph, graph.node(node), target);
    if (site && site->id.template_name == shared.template_name) return site->id.problem;
  }
  return shared.problem;
}

std::vector<Tensor> random_inputs(const Model& model, std::uint64_t seed) {
  std::vector<Tensor> inputs;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (const TensorSpec& spec : model.inputs()) {
    Tensor t(spec.dtype, spec.shape);
    if (spec.dtype == DType::f32)
      for (float& v : t.values<float>()) v = uniform(rng);
    inputs.push_back(std::move(t));
  }
  return inputs;
}

// The job's models profiled and their sites ordered, biggest share first.
struct Plan {
  std::vector<WorkItem> items;
  backend::TargetDesc target;
  tune::DeviceSelection device;
  CompileOptions base;
  Settings settings;
  std::string db_path;
};

Plan plan_job(const std::vector<Model>& models, const TuneJobOptions& options, bool profile) {
  KILN_CHECK(!models.empty(), ErrorKind::InvalidArgument, "a tuning job needs at least one model");
  KILN_CHECK(options.shards >= 1 && options.shard < options.shards, ErrorKind::InvalidArgument,
             "a tuning job's shard must be 0 <= shard < shards, got " + std::to_string(options.shard) + " of " +
                 std::to_string(options.shards));
  Plan job;
  job.base = options.compile;
  job.base.mode = Mode::default_;
  // Profiling reads the kernels' IR (their tuning sites), which a cached plan does not keep.
  job.base.settings.emplace_back("plan_cache", "off");
  job.settings = Settings::resolve(Mode::max_autotune, job.base.settings);
  job.db_path = tune::database_path(job.settings, job.base.cache_dir);
  KILN_CHECK(!job.db_path.empty(), ErrorKind::InvalidArgument,
             "the kernel cache is off, so there is no default tuning database: set tune_db (kiln tune --db FILE)");

  std::map<std::string, WorkItem> work;  // by key text
  for (const Model& model : models) {
    if (options.on_progress) options.on_progress({.stage = TuneProgress::Stage::profiling, .model = model.name()});
    CompiledModel compiled = compile(model, job.base);
    compiled.prepare();
    const compiler::Plan& plan = *kiln::internal::engine(compiled).plan();
    job.target = plan.target;
    job.device = {plan.backend, 0};
    const std::vector<KernelTiming> timings =
        profile ? compiled.profile(random_inputs(model, 1), 3) : std::vector<KernelTiming>{};
    std::map<std::string, double> ms_by_problem;
    double model_ms = 0;
    for (const KernelTiming& timing : timings) model_ms += timing.ms;
    const lower::TargetPolicy policy = lower::target_policy(plan.target);
    const lower::LowerTarget& lower_target = policy.lower;
    std::map<std::string, double> ms_by_node;  // each dispatch's time, for every node it runs
    std::size_t index = 0;
    for (const compiler::Step& step : plan.steps) {
      if (!step.dispatch) continue;
      const kir::Kernel& kernel = plan.kernels[step.dispatch->kernel];
      if (index < timings.size() && kernel.tuning_site)
        ms_by_problem[dispatch_problem(*plan.graph, *step.dispatch, *kernel.tuning_site, lower_target)] +=
            timings[index].ms;
      if (index < timings.size())
        for (const std::string& node : timings[index].nodes) ms_by_node[node] += timings[index].ms;
      ++index;
    }
    const auto add_site = [&](const tune::Site& site, double ms) {
      const tune::RecordKey key = tune::record_key(site, plan.target);
      const std::string id = key.template_name + "@" + std::to_string(key.template_version) + " " + key.kernel;
      WorkItem& item = work[id];
      if (item.models.empty()) {
        item.site = site;
        item.key = key;
      }
      item.ms += ms;
      if (model_ms > 0) item.share += ms / model_ms;
      if (std::find(item.models.begin(), item.models.end(), model.name()) == item.models.end())
        item.models.push_back(model.name());
    };
    for (const tune::Site& site : tune::sites_of(*plan.graph, lower_target)) add_site(site, ms_by_problem[site.id.problem]);
    // Graph-level sites (Winograd or direct, packed or plain): the passes
    // again, with a chooser that records each choice and answers the rule's,
    // as the default compile did. Their time: the dispatches of the nodes
    // the rule's choice made (a Winograd conv's three keep its name as prefix).
    graph::passes::run_compile_passes(
        kiln::internal::graph(model),
        policy.pass_options(plan.settings, [&](const graph::passes::GraphChoice& choice) {
          if (const std::optional<tune::Site> site = tune::graph_site_of(choice)) {
            const std::string& name = choice.node->name;
            add_site(*site, ms_by_node[name] + ms_by_node[name + ".winograd_input"] +
                                ms_by_node[name + ".winograd_matmul"]);
          }
          return choice.rule;
        }));
  }
  // The device index the models compiled on.
  if (!options.compile.device.empty()) {
    try {
      job.device.index = std::stoi(options.compile.device);
    } catch (const std::exception&) {
    }
  }
  for (auto& [id, item] : work) {
    item.share /= static_cast<double>(models.size());
    job.items.push_back(std::move(item));
  }
  // Largest share first; the key text breaks ties, so the order is the same every run.
  std::stable_sort(job.items.begin(), job.items.end(), [](const WorkItem& a, const WorkItem& b) {
    if (a.share != b.share) return a.share > b.share;
    return tune::estimated_work(a.site) > tune::estimated_work(b.site);
  });
  return job;
}

TuneReport report_of(const Plan& job, std::size_t models) {
  TuneReport report;
  report.database = job.db_path;
  report.device = job.target.device_name;
  report.backend = job.target.backend;
  report.driver = job.target.driver;
  report.models = models;
  report.sites = job.items.size();
  return report;
}

TuneSite site_of(const WorkItem& item) {
  TuneSite site;
  site.template_name = item.key.template_name;
  site.kernel = item.key.kernel;
  site.share = item.share;
  site.models = item.models;
  return site;
}

}  // namespace

TuneReport explain_tuning(const std::vector<Model>& models, const TuneJobOptions& options) {
  const Plan job = plan_job(models, options, false);
  TuneReport report = report_of(job, models.size());
  // Nothing changes on disk; with nothing at the path, nothing applies
  // (a link to nothing usable is opened, to be reported as such).
  std::error_code ec;
  const bool something_there = std::filesystem::exists(std::filesystem::symlink_status(job.db_path, ec));
  tune::Database db = something_there ? tune::Database::open_read_only(job.db_path) : tune::Database::in_memory();
  for (const WorkItem& item : job.items) {
    if (shard_of(item.key, options.shards) != options.shard) continue;
    ++report.in_shard;
    const tune::Lookup lookup = db.find(item.key);
    TuneSite site = site_of(item);
    site.status = tune::applicability_name(lookup.status);
    site.reason = lookup.reason;
    if (lookup.status == tune::Applicability::applies && lookup.record) {
      site.heuristic_knobs = lookup.record->heuristic_knobs;
      site.winner_knobs = lookup.record->winner_knobs;
      site.speedup = lookup.record->speedup();
    }
    report.listed.push_back(std::move(site));
  }
  return report;
}

TuneReport tune_models(const std::vector<Model>& models, const TuneJobOptions& options) {
  const Plan job = plan_job(models, options, true);
  TuneReport report = report_of(job, models.size());
  tune::Database db = tune::Database::open(job.db_path);
  const auto progress = [&](TuneProgress p) {
    if (options.on_progress) options.on_progress(p);
  };
  const auto stop_requested = [&] { return options.stop_requested && options.stop_requested(); };
  // A site that could not be tuned is reported and skipped; a lost device
  // ends the job (called from a handler: `throw;` rethrows its exception).
  const auto site_failed = [&](const std::string& template_name, const std::string& kernel, const Error& e) {
    progress({.stage = TuneProgress::Stage::site_failed,
              .template_name = template_name,
              .kernel = kernel,
              .error = e.what()});
    if (e.kind() == ErrorKind::DeviceUnavailable || e.kind() == ErrorKind::NotFound) throw;
  };

  // This shard's sites the database does not yet hold (resume).
  std::vector<const WorkItem*> todo;
  for (const WorkItem& item : job.items) {
    if (shard_of(item.key, options.shards) != options.shard) continue;
    ++report.in_shard;
    if (options.resume) {
      const tune::Lookup lookup = db.find(item.key);
      const bool complete = lookup.status == tune::Applicability::applies && lookup.record &&
                            std::none_of(lookup.record->candidates.begin(), lookup.record->candidates.end(),
                                         [](const tune::CandidateResult& c) {
                                           return c.status == tune::CandidateStatus::not_measured;
                                         });
      if (complete) {
        ++report.already;
        continue;
      }
    }
    todo.push_back(&item);
  }
  report.to_tune = todo.size();
  progress({.stage = TuneProgress::Stage::planned,
            .sites = todo.size(),
            .seconds_left = options.budget_s,
            .all_sites = report.sites,
            .in_shard = report.in_shard,
            .already = report.already,
            .database = report.database});

  const auto start = Clock::now();
  const auto left = [&] { return options.budget_s - std::chrono::duration<double>(Clock::now() - start).count(); };
  // Each site's budget is its share of what is left (by estimated work where
  // nothing was profiled).
  double remaining_share = 0, remaining_work = 0;
  for (const WorkItem* item : todo) {
    remaining_share += item->share;
    remaining_work += tune::estimated_work(item->site);
  }
  // A graph choice's other options bring kernels of their own (the GEMM of
  // a plain weight, of a Winograd convolution) that no default compile
  // lists: those without a record are tuned first, from `budget`, so that
  // the choice compares tuned kernels.
  const auto tune_option_kernels = [&](const WorkItem& item, double budget) {
    const lower::TargetPolicy policy = lower::target_policy(job.target);
    const graph::passes::PipelineOptions passes = policy.pass_options(job.settings);
    std::vector<tune::Site> sites;
    std::set<std::string> seen;
    const std::vector<std::string> choices = tune::graph_site_candidates(item.site);  // the rule's first
    for (std::size_t c = 1; c < choices.size(); ++c)
      for (tune::Site& site : tune::option_kernel_sites(item.site, choices[c], passes, policy.lower))
        if (seen.insert(site.id.template_name + " " + site.id.problem).second &&
            db.find(tune::record_key(site, job.target)).status != tune::Applicability::applies)
          sites.push_back(std::move(site));
    for (const tune::Site& site : sites) {
      if (left() <= 0.5 || stop_requested()) return;
      tune::TuneOptions tuning;
      tuning.budget_s = std::min(left(), std::max(15.0, budget / static_cast<double>(sites.size())));
      tuning.candidate_limit_s = options.candidate_limit_s;
      tuning.max_candidates = options.max_candidates;
      tuning.compile_threads = options.compile_threads;
      tuning.stop_requested = stop_requested;
      progress({.stage = TuneProgress::Stage::option_kernel,
                .template_name = site.id.template_name,
                .kernel = site.id.problem,
                .for_template = item.key.template_name,
                .seconds_left = left()});
      try {
        db.put(tune::tune_site(site, job.device, tuning));
        ++report.option_kernels;
      } catch (const Error& e) {
        site_failed(site.id.template_name, site.id.problem, e);
      }
    }
  };
  for (std::size_t i = 0; i < todo.size() && !report.stopped; ++i) {
    const WorkItem& item = *todo[i];
    if (left() <= 0.5) break;
    tune::TuneOptions tuning;
    const double work = tune::estimated_work(item.site);
    tuning.budget_s = remaining_share > 0 ? tune::site_budget(left(), item.share, remaining_share)
                                          : tune::site_budget(left(), work, remaining_work);
    remaining_share -= item.share;
    remaining_work -= work;
    tuning.candidate_limit_s = options.candidate_limit_s;
    tuning.measure.kernel_records = job.db_path;  // a graph site's kernels as the database has them so far
    tuning.max_candidates = options.max_candidates;
    tuning.compile_threads = options.compile_threads;
    int finished = 0;
    double heuristic_ms = 0, best_ms = 0;
    tuning.on_result = [&](const tune::CandidateResult& r) {
      ++finished;
      if (r.status == tune::CandidateStatus::ok) {
        if (finished == 1) heuristic_ms = r.median_ms;
        if (best_ms == 0 || r.median_ms < best_ms) best_ms = r.median_ms;
      }
      progress({.stage = TuneProgress::Stage::tuning,
                .site = i + 1,
                .sites = todo.size(),
                .template_name = item.key.template_name,
                .kernel = item.key.kernel,
                .candidates = finished,
                .best_speedup = best_ms > 0 && heuristic_ms > 0 ? heuristic_ms / best_ms : 1.0,
                .seconds_left = left()});
    };
    tuning.stop_requested = stop_requested;
    if (tune::is_graph_site(item.site)) tune_option_kernels(item, tuning.budget_s / 2);
    try {
      // Stopped, the site's record keeps what it finished.
      tune::Record record = tune::tune_site(item.site, job.device, tuning);
      db.put(record);
      TuneSite site = site_of(item);
      site.heuristic_ms = record.heuristic_ms;
      site.tuned_ms = record.winner_ms;
      site.speedup = record.speedup();
      site.heuristic_knobs = record.heuristic_knobs;
      site.winner_knobs = record.winner_knobs;
      report.tuned.push_back(std::move(site));
      report.stopped = stop_requested();
    } catch (const Error& e) {
      site_failed(item.key.template_name, item.key.kernel, e);
    }
  }
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

}  // namespace kiln

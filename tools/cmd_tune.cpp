// `kiln tune`: the autotuner's command group. Its own action is the tuning run,
// `kiln tune [MODEL.onnx | --model NAME | --models a,b | --zoo] ...`; the
// tuning database's subcommands (merge, export, import, show) are in
// cmd_tune_db.cpp. CLI11 matches subcommand names before positionals, so
// `kiln tune merge ...` stays the subcommand (a model file named "merge"
// needs "./merge").
//
// The run: each model is compiled (default mode) and profiled, its tuning
// sites (kernels', and the graph passes' choices: Winograd or direct, packed
// or plain weights) are ordered by their share of the models' device time, this shard's
// sites (--shard I/N: a fixed hash of each site's identity, so N machines
// cover the work exactly once) that the database lacks (--resume) are tuned
// within the budget, biggest first, and every finished record is written at
// once, so stopping early (the budget, Ctrl-C) keeps them.
#include "commands.h"
#include "model_args.h"

// The autotuner has no public API yet (tools/README.md).
#include "src/fuse/schedule.h"
#include "src/runtime/executor.h"
#include "src/tune/autotune.h"
#include "src/tune/candidates.h"
#include "src/tune/graph_site.h"
#include "src/runtime/internal_access.h"

#include <kiln/kiln.h>

#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>

namespace kiln::tools {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<bool> g_interrupted{false};

struct TuneArgs {
  ModelArgs model;
  std::string models;   // comma-separated built-in models
  bool zoo = false;
  std::string budget = "10m";
  bool resume = false;
  std::string shard;    // "I/N"
  bool explain = false;
  double candidate_limit_s = 30;
  std::size_t max_candidates = 0;  // 0: every candidate the budget allows
  int calls = 10;       // for the end-to-end comparison
};

// One tuning site across the models, with the device time it takes.
struct WorkItem {
  tune::Site site;
  tune::RecordKey key;
  double ms = 0;               // profiled device time of its dispatches, all models together
  // Its mean share of each model's device time: what orders the work, so
  // that every model's biggest kernels come early, not only the slowest
  // model's (a model's speed-up counts as much as another's).
  double share = 0;
  std::vector<std::string> models;
};

double parse_duration(const std::string& text) { return Settings().with("tune_budget", text).seconds("tune_budget"); }

std::pair<std::uint64_t, std::uint64_t> parse_shard(const std::string& text) {
  if (text.empty()) return {0, 1};
  const std::size_t slash = text.find('/');
  std::uint64_t i = 0, n = 0;
  bool ok = slash != std::string::npos;
  try {
    if (ok) {
      i = std::stoull(text.substr(0, slash));
      n = std::stoull(text.substr(slash + 1));
    }
  } catch (const std::exception&) {
    ok = false;
  }
  KILN_CHECK(ok && n >= 1 && i < n, ErrorKind::InvalidArgument,
             "--shard takes I/N with 0 <= I < N (shard I of N), got '" + text + "'");
  return {i, n};
}

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

std::vector<std::string> model_names(const TuneArgs& args) {
  if (args.zoo) return models::names();
  if (!args.models.empty()) {
    std::vector<std::string> names;
    std::stringstream list(args.models);
    for (std::string name; std::getline(list, name, ',');)
      if (!name.empty()) names.push_back(name);
    return names;
  }
  return {""};  // the one model of ModelArgs (a file or --model)
}

Model load_model(const TuneArgs& args, const std::string& name) {
  if (name.empty()) return args.model.load();
  ModelArgs one = args.model;
  one.model_file.clear();
  one.model = name;
  return one.load();
}

std::string short_text(const std::string& text, std::size_t width) {
  return text.size() <= width ? text : text.substr(0, width - 3) + "...";
}

std::string fixed(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

std::string clock_text(double seconds) {
  const int s = static_cast<int>(std::max(0.0, seconds));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%dm%02ds", s / 60, s % 60);
  return buf;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Default mode against the database's choices, alternating calls, medians.
void compare_end_to_end(const Model& model, const CompileOptions& base, const std::string& db_path, int calls) {
  CompileOptions tuned = base;
  tuned.mode = Mode::max_autotune;
  tuned.settings.emplace_back("tune_budget", "0");  // records only: nothing is tuned here
  tuned.settings.emplace_back("tune_db", db_path);
  CompiledModel plain = compile(model, base);
  CompiledModel with_records = compile(model, tuned);
  plain.prepare();
  with_records.prepare();
  const std::vector<Tensor> inputs = random_inputs(model, 7);
  std::vector<double> a, b;
  (void)plain(inputs);
  (void)with_records(inputs);
  for (int i = 0; i < calls; ++i) {
    (void)plain(inputs);
    a.push_back(plain.stats().last_device_ms.value_or(plain.stats().last_run_ms));
    (void)with_records(inputs);
    b.push_back(with_records.stats().last_device_ms.value_or(with_records.stats().last_run_ms));
  }
  const double ma = median(a), mb = median(b);
  std::printf("  %-34s default %9.2f ms   tuned %9.2f ms   %5.2fx  (median of %d calls each, alternated)\n",
              model.name().c_str(), ma, mb, mb > 0 ? ma / mb : 0.0, calls);
}

void run(const TuneArgs& args) {
  const double budget_s = parse_duration(args.budget);
  const auto [shard, shards] = parse_shard(args.shard);
  CompileOptions base = args.model.compile_options();
  base.mode = Mode::default_;
  // Profiling reads the kernels' IR (their tuning sites), which a cached plan does not keep.
  base.settings.emplace_back("plan_cache", "off");
  const Settings settings = Settings::resolve(Mode::max_autotune, base.settings);
  const std::string db_path = tune::database_path(settings, base.cache_dir);
  KILN_CHECK(!db_path.empty(), ErrorKind::InvalidArgument,
             "the kernel cache is off, so there is no default tuning database: give --db FILE");

  // Sites of every model, with the device time their kernels take.
  std::map<std::string, WorkItem> work;  // by key text
  std::vector<Model> models;
  backend::TargetDesc target;
  tune::DeviceSelection device;
  for (const std::string& name : model_names(args)) {
    const Model model = load_model(args, name);
    std::fprintf(stderr, "profiling %s ...\n", model.name().c_str());
    CompiledModel compiled = compile(model, base);
    compiled.prepare();
    const compiler::Plan& plan = *kiln::internal::engine(compiled).plan();
    target = plan.target;
    device = {plan.backend, 0};
    const std::vector<KernelTiming> timings = args.explain ? std::vector<KernelTiming>{} : compiled.profile(random_inputs(model, 1), 3);
    std::map<std::string, double> ms_by_problem;
    double model_ms = 0;
    for (const KernelTiming& timing : timings) model_ms += timing.ms;
    const lower::LowerTarget lower_target = fuse::lower_target(plan.target);
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
        kiln::internal::graph(model), {.cpu_device = plan.target.cpu_cores,
                        .settings = plan.settings,
                        .chooser = [&](const graph::passes::GraphChoice& choice) {
                          if (const std::optional<tune::Site> site = tune::graph_site_of(choice)) {
                            const std::string& name = choice.node->name;
                            add_site(*site, ms_by_node[name] + ms_by_node[name + ".winograd_input"] +
                                                ms_by_node[name + ".winograd_matmul"]);
                          }
                          return choice.rule;
                        }});
    models.push_back(model);
  }
  // The device index the models compiled on.
  if (!args.model.device.empty()) {
    try {
      device.index = std::stoi(args.model.device);
    } catch (const std::exception&) {
    }
  }

  std::vector<WorkItem> items;
  for (auto& [id, item] : work) {
    item.share /= static_cast<double>(models.size());
    items.push_back(std::move(item));
  }
  // Largest share first; the key text breaks ties, so the order is the same every run.
  std::stable_sort(items.begin(), items.end(), [](const WorkItem& a, const WorkItem& b) {
    if (a.share != b.share) return a.share > b.share;
    return tune::estimated_work(a.site) > tune::estimated_work(b.site);
  });

  // --explain changes nothing on disk; with no database there, nothing applies.
  tune::Database db = !args.explain                    ? tune::Database::open(db_path)
                      : std::filesystem::exists(db_path) ? tune::Database::open_read_only(db_path)
                                                         : tune::Database::in_memory();
  if (args.explain) {
    std::printf("tuning sites of %zu model(s) on %s (%s, %s), database %s", models.size(), target.device_name.c_str(),
                target.backend.c_str(), target.driver.c_str(), db_path.c_str());
    if (shards > 1)
      std::printf(", shard %llu/%llu", static_cast<unsigned long long>(shard), static_cast<unsigned long long>(shards));
    std::printf(":\n");
    for (const WorkItem& item : items) {
      if (shard_of(item.key, shards) != shard) continue;
      const tune::Lookup lookup = db.find(item.key);
      std::printf("  %-10s %-60s %s%s%s\n", item.key.template_name.c_str(), short_text(item.key.kernel, 60).c_str(),
                  tune::applicability_name(lookup.status), lookup.reason.empty() ? "" : ": ", lookup.reason.c_str());
      if (lookup.status == tune::Applicability::applies && lookup.record)
        std::printf("             heuristic %s -> %s (%.2fx)\n", lookup.record->heuristic_knobs.c_str(),
                    lookup.record->winner_knobs.c_str(), lookup.record->speedup());
    }
    return;
  }

  // This shard's sites the database does not yet hold (--resume).
  std::vector<const WorkItem*> todo;
  std::size_t in_shard = 0, skipped = 0;
  for (const WorkItem& item : items) {
    if (shard_of(item.key, shards) != shard) continue;
    ++in_shard;
    if (args.resume) {
      const tune::Lookup lookup = db.find(item.key);
      const bool complete = lookup.status == tune::Applicability::applies && lookup.record &&
                            std::none_of(lookup.record->candidates.begin(), lookup.record->candidates.end(),
                                         [](const tune::CandidateResult& c) {
                                           return c.status == tune::CandidateStatus::not_measured;
                                         });
      if (complete) {
        ++skipped;
        continue;
      }
    }
    todo.push_back(&item);
  }
  std::fprintf(stderr, "%zu tuning sites in %zu model(s); shard %llu/%llu holds %zu; %zu already in %s; tuning %zu within %s\n",
               items.size(), models.size(), static_cast<unsigned long long>(shard), static_cast<unsigned long long>(shards),
               in_shard, skipped, db_path.c_str(), todo.size(), args.budget.c_str());

  g_interrupted = false;
  auto previous = std::signal(SIGINT, [](int) { g_interrupted = true; });
  const auto start = Clock::now();
  const auto left = [&] { return budget_s - std::chrono::duration<double>(Clock::now() - start).count(); };
  struct Done {
    const WorkItem* item;
    tune::Record record;
  };
  std::vector<Done> done;
  bool stopped = false;
  // Each site's budget is its share of what is left (by
  // estimated work where nothing was profiled).
  double remaining_share = 0, remaining_work = 0;
  for (const WorkItem* item : todo) {
    remaining_share += item->share;
    remaining_work += tune::estimated_work(item->site);
  }
  // A graph choice's other options bring kernels of their own (the GEMM of
  // a plain weight, of a Winograd convolution) that no default compile
  // lists: those without a record are tuned first, from `budget_s`, so that
  // the choice compares tuned kernels.
  std::size_t option_kernels = 0;
  const auto tune_option_kernels = [&](const WorkItem& item, double budget) {
    const graph::passes::PipelineOptions passes{.cpu_device = target.cpu_cores, .settings = settings};
    std::vector<tune::Site> sites;
    std::set<std::string> seen;
    const std::vector<std::string> choices = tune::graph_site_candidates(item.site);  // the rule's first
    for (std::size_t c = 1; c < choices.size(); ++c)
      for (tune::Site& site : tune::option_kernel_sites(item.site, choices[c], passes, fuse::lower_target(target)))
        if (seen.insert(site.id.template_name + " " + site.id.problem).second &&
            db.find(tune::record_key(site, target)).status != tune::Applicability::applies)
          sites.push_back(std::move(site));
    for (const tune::Site& site : sites) {
      if (left() <= 0.5 || g_interrupted) return;
      tune::TuneOptions options;
      options.budget_s = std::min(left(), std::max(15.0, budget / static_cast<double>(sites.size())));
      options.candidate_limit_s = args.candidate_limit_s;
      options.max_candidates = args.max_candidates;
      options.stop_requested = [] { return g_interrupted.load(); };
      std::fprintf(stderr, "\r\033[K%s %s, for %s ... | %s left", site.id.template_name.c_str(),
                   short_text(site.id.problem, 40).c_str(), item.key.template_name.c_str(), clock_text(left()).c_str());
      try {
        db.put(tune::tune_site(site, device, options));
        ++option_kernels;
      } catch (const Error& e) {
        std::fprintf(stderr, "\n%s: %s\n", site.id.problem.c_str(), e.what());
        if (e.kind() == ErrorKind::DeviceUnavailable || e.kind() == ErrorKind::NotFound) throw;
      }
    }
  };
  for (std::size_t i = 0; i < todo.size() && !stopped; ++i) {
    const WorkItem& item = *todo[i];
    if (left() <= 0.5) break;
    tune::TuneOptions options;
    const double work = tune::estimated_work(item.site);
    options.budget_s = remaining_share > 0 ? tune::site_budget(left(), item.share, remaining_share)
                                           : tune::site_budget(left(), work, remaining_work);
    remaining_share -= item.share;
    remaining_work -= work;
    options.candidate_limit_s = args.candidate_limit_s;
    options.measure.kernel_records = db_path;  // a graph site's kernels as the database has them so far
    options.max_candidates = args.max_candidates;
    int finished = 0;
    double heuristic_ms = 0, best_ms = 0;
    options.on_result = [&](const tune::CandidateResult& r) {
      ++finished;
      if (r.status == tune::CandidateStatus::ok) {
        if (finished == 1) heuristic_ms = r.median_ms;
        if (best_ms == 0 || r.median_ms < best_ms) best_ms = r.median_ms;
      }
      std::fprintf(stderr, "\r\033[K[%zu/%zu] %s %s | candidates %d | best %.2fx | %s left", i + 1, todo.size(),
                   item.key.template_name.c_str(), short_text(item.key.kernel, 48).c_str(), finished,
                   best_ms > 0 && heuristic_ms > 0 ? heuristic_ms / best_ms : 1.0, clock_text(left()).c_str());
    };
    options.stop_requested = [] { return g_interrupted.load(); };
    if (tune::is_graph_site(item.site)) tune_option_kernels(item, options.budget_s / 2);
    try {
      // Stopped by Ctrl-C, the site's record keeps what it finished.
      tune::Record record = tune::tune_site(item.site, device, options);
      db.put(record);
      done.push_back({&item, std::move(record)});
      stopped = g_interrupted;
    } catch (const Error& e) {
      std::fprintf(stderr, "\n%s: %s\n", item.key.kernel.c_str(), e.what());
      if (e.kind() == ErrorKind::DeviceUnavailable || e.kind() == ErrorKind::NotFound) throw;
    }
  }
  std::signal(SIGINT, previous);
  std::fprintf(stderr, "\r\033[K");
  const double spent = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("tuned %zu of %zu sites in %s (budget %s)%s; records in %s\n", done.size(), todo.size(),
              clock_text(spent).c_str(), args.budget.c_str(), stopped ? ", stopped by Ctrl-C" : "", db_path.c_str());
  if (option_kernels > 0)
    std::printf("and %zu kernel(s) that graph choices' other options build, tuned before those choices\n", option_kernels);
  if (!done.empty()) {
    std::printf("\n  %-10s %-52s %7s %12s %12s %8s\n", "template", "kernel", "share", "heuristic ms", "tuned ms", "speed-up");
    for (const Done& d : done)
      std::printf("  %-10s %-52s %6s%% %12s %12s %7.2fx\n", d.item->key.template_name.c_str(),
                  short_text(d.item->key.kernel, 52).c_str(),
                  fixed(100.0 * d.item->share, 1).c_str(), fixed(d.record.heuristic_ms, 3).c_str(),
                  fixed(d.record.winner_ms, 3).c_str(), d.record.speedup());
  }
  if (stopped || args.calls <= 0) return;
  std::printf("\nend to end (device time per call):\n");
  for (const Model& model : models) compare_end_to_end(model, base, db_path, args.calls);
}

}  // namespace

void add_tune_command(CLI::App& app) {
  auto* tune = app.add_subcommand(
      "tune", "tune kernels for a model (or several) on this device and keep the results in the tuning database; "
              "merge, export, import and show the database");
  auto args = std::make_shared<TuneArgs>();
  args->model.add_to(*tune);
  tune->add_option("--models", args->models, "comma-separated built-in models to tune together");
  tune->add_flag("--zoo", args->zoo, "tune every built-in model");
  tune->add_option("--budget", args->budget, "wall time for the whole run (90s, 10m, 1h)")->capture_default_str();
  tune->add_flag("--resume", args->resume, "skip kernels the database already holds a complete record for");
  tune->add_option("--shard", args->shard, "tune shard I of N (0-based): a fixed 1/N of the kernels, for array jobs");
  tune->add_flag("--explain", args->explain, "say for every kernel whether a record applies, and if not why; tune nothing");
  tune->add_option("--candidate-limit", args->candidate_limit_s, "seconds one candidate may take before it is stopped")
      ->capture_default_str();
  tune->add_option("--max-candidates", args->max_candidates,
                   "measure at most this many candidates per kernel, in the search's order: the heuristic's "
                   "choice first (0: as many as the budget allows)")
      ->capture_default_str();
  tune->add_option("--calls", args->calls, "calls per mode in the end-to-end comparison (0: skip it)")->capture_default_str();
  tune->callback([tune, args] {
    if (!tune->get_subcommands().empty()) return;  // merge, export, import, show
    KILN_CHECK(!args->model.model_file.empty() || tune->count("--model") > 0 || !args->models.empty() || args->zoo,
               ErrorKind::InvalidArgument,
               "kiln tune needs the models to tune: MODEL.onnx, --model NAME, --models a,b or --zoo (or a subcommand: "
               "merge, export, import, show)");
    run(*args);
  });
  add_tune_database_commands(*tune);
}

}  // namespace kiln::tools

// `kiln tune`: the autotuner's command group. Its own action is the tuning run,
// `kiln tune [MODEL.onnx | --model NAME | --models a,b | --zoo] ...`; the
// tuning database's subcommands (merge, export, import, show) are in
// cmd_tune_db.cpp. CLI11 matches subcommand names before positionals, so
// `kiln tune merge ...` stays the subcommand (a model file named "merge"
// needs "./merge").
//
// The run is kiln::tune_models (include/kiln/tune.h, src/tune/job/job.cpp): this file
// turns the flags into its options and prints its progress and report.
#include "bench/format.h"
#include "commands.h"
#include "model_args.h"
#include "src/base/check.h"

#include <kiln/kiln.h>
#include <kiln/tune.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <random>
#include <sstream>

namespace kiln::tools {
namespace {

using bench::fixed;

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
  int compile_threads = 0;         // 0: one per hardware thread
  int calls = 10;       // for the end-to-end comparison
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

// The job's progress on stderr, one line rewritten in place.
void show_progress(const TuneProgress& p, const TuneArgs& args, const TuneJobOptions& job) {
  switch (p.stage) {
    case TuneProgress::Stage::profiling:
      std::fprintf(stderr, "profiling %s ...\n", p.model.c_str());
      return;
    case TuneProgress::Stage::planned:
      std::fprintf(stderr,
                   "%zu tuning sites in %zu model(s); shard %llu/%llu holds %zu; %zu already in %s; tuning %zu within %s\n",
                   p.all_sites, model_names(args).size(), static_cast<unsigned long long>(job.shard),
                   static_cast<unsigned long long>(job.shards), p.in_shard, p.already, p.database.c_str(), p.sites,
                   args.budget.c_str());
      return;
    case TuneProgress::Stage::option_kernel:
      std::fprintf(stderr, "\r\033[K%s %s, for %s ... | %s left", p.template_name.c_str(),
                   short_text(p.kernel, 40).c_str(), p.for_template.c_str(), clock_text(p.seconds_left).c_str());
      return;
    case TuneProgress::Stage::tuning:
      std::fprintf(stderr, "\r\033[K[%zu/%zu] %s %s | candidates %d | best %.2fx | %s left", p.site, p.sites,
                   p.template_name.c_str(), short_text(p.kernel, 48).c_str(), p.candidates, p.best_speedup,
                   clock_text(p.seconds_left).c_str());
      return;
    case TuneProgress::Stage::site_failed:
      std::fprintf(stderr, "\n%s: %s\n", p.kernel.c_str(), p.error.c_str());
      return;
  }
}

void run(const TuneArgs& args) {
  TuneJobOptions job;
  job.compile = args.model.compile_options();
  job.budget_s = parse_duration(args.budget);
  std::tie(job.shard, job.shards) = parse_shard(args.shard);
  job.resume = args.resume;
  job.candidate_limit_s = args.candidate_limit_s;
  job.max_candidates = args.max_candidates;
  job.compile_threads = args.compile_threads;
  std::vector<Model> models;
  for (const std::string& name : model_names(args)) models.push_back(load_model(args, name));
  job.on_progress = [&](const TuneProgress& p) { show_progress(p, args, job); };

  if (args.explain) {
    const TuneReport report = explain_tuning(models, job);
    std::printf("tuning sites of %zu model(s) on %s (%s, %s), database %s", report.models, report.device.c_str(),
                report.backend.c_str(), report.driver.c_str(), report.database.c_str());
    if (job.shards > 1)
      std::printf(", shard %llu/%llu", static_cast<unsigned long long>(job.shard),
                  static_cast<unsigned long long>(job.shards));
    std::printf(":\n");
    for (const TuneSite& site : report.listed) {
      std::printf("  %-10s %-60s %s%s%s\n", site.template_name.c_str(), short_text(site.kernel, 60).c_str(),
                  site.status.c_str(), site.reason.empty() ? "" : ": ", site.reason.c_str());
      if (!site.winner_knobs.empty())
        std::printf("             heuristic %s -> %s (%.2fx)\n", site.heuristic_knobs.c_str(), site.winner_knobs.c_str(),
                    site.speedup);
    }
    return;
  }

  g_interrupted = false;
  job.stop_requested = [] { return g_interrupted.load(); };
  auto previous = std::signal(SIGINT, [](int) { g_interrupted = true; });
  TuneReport report;
  try {
    report = tune_models(models, job);
  } catch (...) {
    std::signal(SIGINT, previous);
    throw;
  }
  std::signal(SIGINT, previous);
  std::fprintf(stderr, "\r\033[K");
  std::printf("tuned %zu of %zu sites in %s (budget %s)%s; records in %s\n", report.tuned.size(), report.to_tune,
              clock_text(report.seconds).c_str(), args.budget.c_str(), report.stopped ? ", stopped by Ctrl-C" : "",
              report.database.c_str());
  if (report.option_kernels > 0)
    std::printf("and %zu kernel(s) that graph choices' other options build, tuned before those choices\n",
                report.option_kernels);
  if (!report.tuned.empty()) {
    std::printf("\n  %-10s %-52s %7s %12s %12s %8s\n", "template", "kernel", "share", "heuristic ms", "tuned ms", "speed-up");
    for (const TuneSite& site : report.tuned)
      std::printf("  %-10s %-52s %6s%% %12s %12s %7.2fx\n", site.template_name.c_str(), short_text(site.kernel, 52).c_str(),
                  fixed(100.0 * site.share, 1).c_str(), fixed(site.heuristic_ms, 3).c_str(),
                  fixed(site.tuned_ms, 3).c_str(), site.speedup);
  }
  if (report.stopped || args.calls <= 0) return;
  std::printf("\nend to end (device time per call):\n");
  CompileOptions base = job.compile;
  base.mode = Mode::default_;
  for (const Model& model : models) compare_end_to_end(model, base, report.database, args.calls);
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
  tune->add_option("--compile-threads", args->compile_threads,
                   "candidates compiled at once, ahead of their measurement, which stays one at a time (0: one per "
                   "hardware thread)")
      ->check(CLI::Range(0, 1024))
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

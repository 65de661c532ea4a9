// `kiln bench`: the reference torch.compile benchmark's method on kiln's
// backends: models x batch sizes x {eager, default, reduce-overhead}, warm-up,
// then the mean (median, min, max) of --iters calls on the same image; a
// markdown table on stdout, CSV, JSON, SVG and markdown files on request.
#include "bench/chart.h"
#include "bench/progress.h"
#include "bench/report.h"
#include "bench/runner.h"
#include "commands.h"
#include "image.h"
#include "output_files.h"
#include "src/base/atomic_write.h"

#include <kiln/kiln.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace kiln::tools {
namespace {

// The smoke subset: two small models, tiny images, a few calls; seconds on lavapipe.
constexpr const char* kQuickModels[] = {"resnet18", "mobilenet_v2"};
constexpr std::int64_t kQuickImageSize = 64;
constexpr std::int64_t kQuickBatches[] = {1, 2};
constexpr int kQuickIters = 3;
constexpr int kQuickWarmup = 1;

struct BenchArgs {
  bench::Config config;
  std::string task;
  std::string output_dir;
  bool quick = false;
};

// The zoo's models of one task (the registry knows each one's task without building it).
std::vector<std::string> models_of_task(const std::string& task) {
  std::vector<std::string> chosen;
  std::vector<std::string> tasks;
  for (const std::string& name : models::names()) {
    const std::string model_task = models::task_of(name);
    if (model_task == task) chosen.push_back(name);
    if (std::find(tasks.begin(), tasks.end(), model_task) == tasks.end()) tasks.push_back(model_task);
  }
  if (chosen.empty()) {
    std::string known;
    for (const auto& t : tasks) known += (known.empty() ? "" : ", ") + t;
    throw_error(ErrorKind::InvalidArgument, "no model of task '" + task + "' (tasks: " + known + ")");
  }
  return chosen;
}

// The folder was prepared (prepare_output_dir) before the benchmark ran.
void write_outputs(const std::string& dir, const bench::Results& results, const std::string& markdown) {
  const std::filesystem::path base(dir);
  const std::pair<const char*, std::string> files[] = {{"bench.md", markdown},
                                                       {"bench.csv", bench::csv_report(results)},
                                                       {"bench.json", bench::json_report(results)},
                                                       {"bench.svg", bench::speedup_chart_svg(results)}};
  for (const auto& [name, content] : files) {
    base::write_file_atomically(base / name, content);
    std::fprintf(stderr, "kiln bench: wrote %s\n", (base / name).string().c_str());
  }
}

void run(CLI::App& cmd, BenchArgs& args) {
  bench::Config& config = args.config;
  if (args.quick) {
    // --quick picks the subset; options given explicitly still win.
    if (cmd.count("--models") == 0 && cmd.count("--task") == 0)
      config.models.assign(std::begin(kQuickModels), std::end(kQuickModels));
    if (cmd.count("--image-size") == 0) config.image_size = kQuickImageSize;
    if (cmd.count("--batch") == 0) config.batches.assign(std::begin(kQuickBatches), std::end(kQuickBatches));
    if (cmd.count("--iters") == 0) config.iters = kQuickIters;
    if (cmd.count("--warmup") == 0) config.warmup = kQuickWarmup;
  }
  if (!args.task.empty()) config.models = models_of_task(args.task);
  else if (config.models.empty()) config.models = models::names();
  bench::validate(config);
  // A benchmark takes minutes to hours: an unwritable folder fails now, not after it.
  if (!args.output_dir.empty()) prepare_output_dir(args.output_dir);

  const int total = static_cast<int>(config.models.size() * config.batches.size() * config.modes.size());
  bench::Progress progress(total, stderr, ::isatty(::fileno(stderr)) == 1);
  bench::Observer observer{
      .cell_started = [&](const bench::Cell& c) { progress.cell_started(c); },
      .rounds_started = [&](const std::vector<const bench::Cell*>& cells) { progress.rounds_started(cells); },
      .call_done = [&](int done, int of) { progress.call_done(done, of); },
      .cell_finished = [&](const bench::Cell& c) { progress.cell_finished(c); },
  };
  const bench::Results results = bench::run_benchmark(config, observer);
  progress.finish();

  const std::string markdown = bench::markdown_report(results);
  std::cout << markdown << std::flush;
  if (!args.output_dir.empty()) write_outputs(args.output_dir, results, markdown);

  int wrong = 0, failed = 0;
  for (const bench::Cell& c : results.cells) {
    if (c.status == bench::CellStatus::mismatch) ++wrong;
    if (c.status == bench::CellStatus::failed) ++failed;
  }
  if (wrong + failed > 0) {
    std::fprintf(stderr, "kiln bench: FAILED: %d cell(s) gave outputs that differ from eager, %d cell(s) failed to run "
                         "(see the notes under the table)\n", wrong, failed);
    throw CLI::RuntimeError(1);
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench", "benchmark built-in models: eager vs compiled modes, mean of --iters calls on one image, per batch size; "
               "a markdown table on stdout (and CSV, JSON, SVG with --output-dir)");
  auto args = std::make_shared<BenchArgs>();
  bench::Config& c = args->config;
  c.image_path = default_image_path();
  std::string names;
  for (const auto& n : models::names()) names += (names.empty() ? "" : ", ") + n;
  auto* models_opt = cmd->add_option("--models", c.models, "comma-separated built-in models (default: all: " + names + ")")
                         ->delimiter(',');
  auto* task_opt = cmd->add_option("--task", args->task, "every built-in model of a task: classification, segmentation, "
                                                         "detection");
  models_opt->excludes(task_opt);
  cmd->add_option("--batch", c.batches, "comma-separated batch sizes")->delimiter(',')->capture_default_str();
  cmd->add_option("--modes", c.modes, "comma-separated: eager, default, reduce-overhead, max-autotune (its tuning database: run `kiln tune` first); speed-ups are over eager, or without it over the first mode given")
      ->delimiter(',')->capture_default_str();
  cmd->add_option("--iters", c.iters, "timed calls per cell (the reference benchmark takes 300)")->capture_default_str();
  cmd->add_option("--warmup", c.warmup, "untimed calls before timing, after compiling")->capture_default_str();
  cmd->add_option("--image", c.image_path, "the image every call is fed (repeated to fill the batch)")->capture_default_str();
  cmd->add_option("--image-size", c.image_size, "input height and width (default: each model's usual size: 224, "
                                                "320 for SSDLite320)");
  cmd->add_option("--backend", c.backend, "vulkan, cuda, hip (see `kiln devices`)")->capture_default_str();
  cmd->add_option("--device", c.device, "device index or part of its name (default: the first)");
  cmd->add_option("--tolerance", c.tolerance, "allowed max |compiled - eager|, relative to the largest |eager output| "
                                              "(default: 1e-3; with --dtype, 4 epsilons of the type)");
  cmd->add_option("--dtype", c.dtype, "run the models' f32 tensors as f16 or bf16, eagerly and compiled, as PyTorch's "
                                      "model.half() would (kernels compute in f32; inputs and outputs keep their types)")
      ->check(CLI::IsMember({"model", "f16", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--db", c.tune_db, "max-autotune's tuning database (default: the tune_db setting, else tuning.db in "
                                    "the user's kernel cache)");
  cmd->add_option("--output-dir", args->output_dir, "also write DIR/bench.{md,csv,json,svg}");
  cmd->add_flag("--quick", args->quick, "a smoke subset in seconds: resnet18 and mobilenet_v2 at 64x64, batch 1 and 2, "
                                        "3 calls (explicit options still apply)");
  cmd->callback([cmd, args] { run(*cmd, *args); });
}

}  // namespace kiln::tools

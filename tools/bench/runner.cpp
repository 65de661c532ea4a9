#include "runner.h"

#include "agreement.h"
#include "image.h"
#include "rotation.h"
#include "src/base/check.h"
#include "temp_dir.h"

#include <kiln/kiln.h>
#include <kiln/tune.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <thread>

namespace kiln::tools::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string lower_case(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

std::string now_utc_iso8601() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// The same rule as the runtime's: a device index, or a case-insensitive part of its name.
const DeviceDescription& pick_device(const BackendDescription& backend, const std::string& spec) {
  KILN_CHECK(!backend.devices.empty(), ErrorKind::DeviceUnavailable, "backend '" + backend.name + "' has no device");
  if (spec.empty()) return backend.devices.front();
  std::string listing;
  for (const auto& d : backend.devices) listing += "\n  " + std::to_string(d.index) + ": " + d.name;
  if (std::all_of(spec.begin(), spec.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    for (const auto& d : backend.devices)
      if (std::to_string(d.index) == spec) return d;
    throw_error(ErrorKind::NotFound, "no " + backend.name + " device with index " + spec + "; devices:" + listing);
  }
  for (const auto& d : backend.devices)
    if (lower_case(d.name).find(lower_case(spec)) != std::string::npos) return d;
  throw_error(ErrorKind::NotFound, "no " + backend.name + " device matching '" + spec + "'; devices:" + listing);
}

double tolerance_of(const Config& c) { return c.tolerance > 0 ? c.tolerance : default_tolerance(c.dtype); }

std::string reproduce_command(const Config& c) {
  std::string batches;
  for (auto b : c.batches) batches += (batches.empty() ? "" : ",") + std::to_string(b);
  std::string command = "kiln bench --models " + join(c.models) + " --batch " + batches + " --modes " + join(c.modes) +
                        " --iters " + std::to_string(c.iters) + " --warmup " + std::to_string(c.warmup) + " --image " +
                        c.image_path;
  if (c.image_size > 0) command += " --image-size " + std::to_string(c.image_size);
  command += " --backend " + c.backend;
  if (!c.device.empty()) command += " --device " + c.device;
  if (c.dtype != Config{}.dtype) command += " --dtype " + c.dtype;
  if (c.tolerance != Config{}.tolerance) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", c.tolerance);
    command += std::string(" --tolerance ") + text;
  }
  return command;
}

// One mode's model, built and compiled, kept alive while every mode of its
// model and batch is timed, with what its calls gave.
struct Contender {
  Cell* cell = nullptr;
  std::unique_ptr<TempDir> cache;  // compiled modes: their own disk cache; outlives the model below
  std::optional<EagerModel> eager_model;
  std::optional<CompiledModel> compiled_model;
  std::vector<double> host_ms;
  std::vector<double> device_ms;
  bool every_call_timed_on_device = true;
  std::vector<Tensor> outputs;  // of the last call

  std::vector<Tensor> call(const std::vector<Tensor>& inputs) {
    return eager_model ? (*eager_model)(inputs) : (*compiled_model)(inputs);
  }
  RunStats stats() const { return eager_model ? eager_model->stats() : compiled_model->stats(); }
};

// Compiles a compiled mode's model twice: cold (an empty disk cache), then
// warm (a fresh device reading that cache), which is the one timed.
void prepare_compiled(Contender& c, const Model& model, const Config& config) {
  Cell& cell = *c.cell;
  c.cache = std::make_unique<TempDir>("kiln-bench-cache");
  CompileOptions options{.backend = config.backend, .device = config.device, .mode = parse_mode(cell.mode),
                         .cache_dir = c.cache->path().string()};
  // max-autotune reads (and adds to) the user's tuning database, not one in
  // the temporary kernel cache: tuning is what `kiln tune` did beforehand.
  if (options.mode == Mode::max_autotune) {
    const Settings settings = Settings::resolve(options.mode);
    const std::string db = !config.tune_db.empty()              ? config.tune_db
                           : settings.text("tune_db").empty() ? default_tuning_database()
                                                              : settings.text("tune_db");
    if (!db.empty()) options.settings.emplace_back("tune_db", db);
  }
  {
    // The device context (and its in-memory kernels) goes away with this
    // model, so the warm compile below reads the disk.
    CompiledModel cold = compile(model, options);
    const auto start = Clock::now();
    cold.prepare();
    cell.cold_compile_ms = ms_since(start);
    cell.kernels_compiled_cold = cold.stats().kernel_cache_misses;
  }
  CompiledModel warm = compile(model, options);
  const auto start = Clock::now();
  warm.prepare();
  cell.warm_compile_ms = ms_since(start);
  cell.kernels_from_disk_warm = warm.stats().kernel_cache_hits;
  cell.kernels_compiled_warm = warm.stats().kernel_cache_misses;
  warm.wait_for_tuning();  // tune=background: the tuned plan is what is measured
  c.compiled_model = std::move(warm);
}

// Eager's outputs without timing, when eager is not among the modes.
std::vector<Tensor> eager_outputs(const Model& model, const std::vector<Tensor>& inputs, const Config& config) {
  EagerModel runner = eager(model, {.backend = config.backend, .device = config.device});
  return runner(inputs);
}

// The model at a batch size, or why it cannot take that batch.
struct BuiltModel {
  std::optional<Model> model;
  std::string task;
  std::string skip_reason;
};

// A model that builds at batch 1 but rejects a larger batch handles one image
// at a time (SSDLite's post-processing): its cells are skipped, not failed.
// Other errors propagate.
BuiltModel build_for_batch(const std::string& name, std::int64_t batch, std::int64_t size, const std::string& dtype) {
  try {
    Model model = models::build(name, {.batch = batch, .image_size = size});
    if (dtype != "model") model = model.with_float_type(dtype == "f16" ? DType::f16 : DType::bf16);
    std::string task = model.task();
    const std::vector<TensorSpec> specs = model.inputs();
    KILN_CHECK(specs.size() == 1, ErrorKind::Unsupported,
               name + " has " + std::to_string(specs.size()) + " inputs; kiln bench feeds one image input");
    if (specs[0].shape.at(0) != batch)
      return {std::nullopt, task, name + " takes a fixed batch of " + std::to_string(specs[0].shape.at(0))};
    return {std::move(model), task, ""};
  } catch (const Error& e) {
    if (batch == 1 || !e.is_user_error()) throw;
    const Model single = models::build(name, {.batch = 1, .image_size = size});  // throws if batch is not the problem
    return {std::nullopt, single.task(), e.what()};
  }
}

void fail(Cell& cell, const Error& e) {
  cell.status = CellStatus::failed;
  cell.message = e.what();
}

// Gives cells [from, end) a final status without measuring them.
void settle(std::vector<Cell>& cells, std::size_t from, CellStatus status, const std::string& message,
            const Observer& observer) {
  for (std::size_t i = from; i < cells.size(); ++i) {
    cells[i].status = status;
    cells[i].message = message;
    if (observer.cell_started) observer.cell_started(cells[i]);
    if (observer.cell_finished) observer.cell_finished(cells[i]);
  }
}

// Calls every contender once per round, in an order that rotates by one
// each round, so that drift over the run (other processes, the device's
// state, allocator and caches) falls on every mode alike rather than on
// whichever mode happens to run last. A contender whose call throws fails
// its cell and leaves the rotation.
class Rounds {
 public:
  Rounds(std::vector<Contender>& contenders, const std::vector<Tensor>& inputs, int total_calls, const Observer& observer)
      : contenders_(contenders), inputs_(inputs), total_(total_calls), observer_(observer) {}

  // One untimed call each: eager loads its kernels there, and drivers finish
  // work they defer to a pipeline's first use (lavapipe does).
  void first_calls() {
    for (Contender& c : contenders_)
      run_one(c, [&](Contender& who) {
        const auto start = Clock::now();
        who.outputs = who.call(inputs_);
        who.cell->first_call_ms = ms_since(start);
      });
  }

  void untimed(int rounds) {
    for (int r = 0; r < rounds; ++r)
      for_each_rotated(r, [&](Contender& who) { who.outputs = who.call(inputs_); });
  }

  void timed(int rounds) {
    for (Contender& c : contenders_) c.host_ms.reserve(static_cast<std::size_t>(rounds));
    for (int r = 0; r < rounds; ++r)
      for_each_rotated(r, [&](Contender& who) {
        const auto start = Clock::now();
        who.outputs = who.call(inputs_);
        who.host_ms.push_back(ms_since(start));
        if (auto device = who.stats().last_device_ms) who.device_ms.push_back(*device);
        else who.every_call_timed_on_device = false;
      });
  }

 private:
  template <class Body> void for_each_rotated(int round, Body body) {
    for (std::size_t i : rotated_order(contenders_.size(), static_cast<std::size_t>(round))) run_one(contenders_[i], body);
  }

  template <class Body> void run_one(Contender& c, Body body) {
    if (c.cell->status == CellStatus::failed) return;
    try {
      body(c);
    } catch (const Error& e) {
      fail(*c.cell, e);
    }
    ++done_;
    if (observer_.call_done) observer_.call_done(done_, total_);
  }

  std::vector<Contender>& contenders_;
  const std::vector<Tensor>& inputs_;
  int total_;
  int done_ = 0;
  const Observer& observer_;
};

void record(Contender& c, const std::vector<Tensor>& reference, const std::optional<DetectionList>& detections,
            const Config& config) {
  Cell& cell = *c.cell;
  if (cell.status == CellStatus::failed) return;
  const RunStats& stats = c.stats();
  cell.host_ms = summarize(c.host_ms);
  if (c.every_call_timed_on_device && !c.device_ms.empty()) cell.device_ms = summarize(c.device_ms);
  cell.peak_device_bytes = stats.peak_device_bytes;
  cell.dispatches_per_run = stats.dispatches_per_run;
  cell.host_steps_per_run = stats.host_steps_per_run;
  cell.kernels = stats.kernels;
  if (cell.mode == kEagerMode) return;
  const Agreement agreement = compare_outputs(reference, c.outputs, tolerance_of(config), detections);
  cell.max_abs_diff = agreement.max_abs_diff;
  cell.output_scale = agreement.scale;
  cell.tied_detections = agreement.tied_detections;
  if (!agreement.matches) {
    cell.status = CellStatus::mismatch;
    cell.message = agreement.problem;
  }
}

// One model at one batch size: every mode's model is built and compiled
// first and kept alive, then all of them are timed together in rotating
// rounds (see Rounds). Eager's output is the reference.
void measure(std::vector<Cell>& cells, const Config& config, const Observer& observer) {
  const Cell& first = cells.front();
  std::optional<Model> model;
  std::vector<Tensor> inputs, reference;
  try {
    BuiltModel built = build_for_batch(first.model, first.batch, first.image_size, config.dtype);
    for (Cell& cell : cells) cell.task = built.task;
    if (!built.model) return settle(cells, 0, CellStatus::skipped, built.skip_reason, observer);
    model = std::move(built.model);
    inputs.push_back(load_image_tensor(config.image_path, first.image_size, first.batch));
    if (first.mode != kEagerMode) reference = eager_outputs(*model, inputs, config);
  } catch (const Error& e) {
    return settle(cells, 0, CellStatus::failed, e.what(), observer);
  }
  const std::optional<DetectionList> detections = find_detection_list(model->task(), model->outputs());

  std::vector<Contender> contenders;
  contenders.reserve(cells.size());
  for (std::size_t i = 0; i < cells.size(); ++i) {
    Cell& cell = cells[i];
    if (observer.cell_started) observer.cell_started(cell);
    Contender c;
    c.cell = &cell;
    try {
      if (cell.mode == kEagerMode) c.eager_model = eager(*model, {.backend = config.backend, .device = config.device});
      else prepare_compiled(c, *model, config);
      contenders.push_back(std::move(c));
    } catch (const Error& e) {
      fail(cell, e);
      if (observer.cell_finished) observer.cell_finished(cell);
      if (cell.mode == kEagerMode)
        return settle(cells, i + 1, CellStatus::failed, "eager failed, so there is nothing to check against", observer);
    }
  }

  const int calls_each = 1 + config.warmup + config.iters;
  if (observer.rounds_started) {
    std::vector<const Cell*> timed;
    for (const Contender& c : contenders) timed.push_back(c.cell);
    observer.rounds_started(timed);
  }
  Rounds rounds(contenders, inputs, calls_each * static_cast<int>(contenders.size()), observer);
  rounds.first_calls();
  rounds.untimed(config.warmup);
  rounds.timed(config.iters);

  const bool eager_timed = first.mode == kEagerMode;
  if (eager_timed) {
    Contender& eager_contender = contenders.front();
    if (eager_contender.cell->status == CellStatus::failed) {
      for (std::size_t i = 1; i < contenders.size(); ++i)
        if (contenders[i].cell->status != CellStatus::failed) {
          contenders[i].cell->status = CellStatus::failed;
          contenders[i].cell->message = "eager failed, so there is nothing to check against";
        }
    } else {
      reference = eager_contender.outputs;
    }
  }
  for (Contender& c : contenders) {
    record(c, reference, detections, config);
    if (observer.cell_finished) observer.cell_finished(*c.cell);
  }
}

void fill_speedups(std::vector<Cell>& cells, const std::string& baseline) {
  for (Cell& cell : cells) {
    if (cell.mode == baseline || !cell.measured()) continue;
    for (const Cell& base : cells)
      if (base.mode == baseline && base.measured() && base.model == cell.model && base.batch == cell.batch &&
          cell.host_ms.mean > 0)
        cell.speedup = base.host_ms.mean / cell.host_ms.mean;
  }
}

}  // namespace

void validate(const Config& config) {
  const std::vector<std::string> known = models::names();
  std::set<std::string> seen;
  KILN_CHECK(!config.models.empty(), ErrorKind::InvalidArgument, "no model to benchmark");
  for (const auto& name : config.models) {
    KILN_CHECK(std::find(known.begin(), known.end(), name) != known.end(), ErrorKind::InvalidArgument,
               "unknown model '" + name + "' (known: " + join(known) + ")");
    KILN_CHECK(seen.insert(name).second, ErrorKind::InvalidArgument, "model '" + name + "' is listed twice");
  }
  KILN_CHECK(!config.modes.empty(), ErrorKind::InvalidArgument, "no mode to benchmark");
  seen.clear();
  for (const auto& mode : config.modes) {
    const bool valid = mode == kEagerMode || mode == "default" || mode == "reduce-overhead" || mode == "max-autotune";
    KILN_CHECK(valid, ErrorKind::InvalidArgument,
               "unknown mode '" + mode + "' (known: eager, default, reduce-overhead, max-autotune)");
    KILN_CHECK(seen.insert(mode).second, ErrorKind::InvalidArgument, "mode '" + mode + "' is listed twice");
  }
  KILN_CHECK(!config.batches.empty(), ErrorKind::InvalidArgument, "no batch size to benchmark");
  std::set<std::int64_t> batches;
  for (auto b : config.batches) {
    KILN_CHECK(b > 0, ErrorKind::InvalidArgument, "batch sizes must be > 0, got " + std::to_string(b));
    KILN_CHECK(batches.insert(b).second, ErrorKind::InvalidArgument, "batch " + std::to_string(b) + " is listed twice");
  }
  KILN_CHECK(config.iters > 0, ErrorKind::InvalidArgument, "--iters must be > 0, got " + std::to_string(config.iters));
  KILN_CHECK(config.warmup >= 0, ErrorKind::InvalidArgument, "--warmup must be >= 0, got " + std::to_string(config.warmup));
  KILN_CHECK(config.image_size == 0 || (config.image_size >= 8 && config.image_size <= 4096), ErrorKind::InvalidArgument,
             "--image-size must be within 8..4096, got " + std::to_string(config.image_size));
  KILN_CHECK(config.tolerance >= 0, ErrorKind::InvalidArgument, "--tolerance must be > 0 (0: the default)");
  std::error_code ec;
  KILN_CHECK(std::filesystem::is_regular_file(config.image_path, ec), ErrorKind::Io,
             "cannot read image '" + config.image_path +
                 "': no such file (pass --image; kiln's sample photograph is installed as share/kiln/images/chelsea.png)");
}

Metadata describe_run(const Config& config) {
  const std::vector<BackendDescription> backends = list_backends();
  auto it = std::find_if(backends.begin(), backends.end(), [&](const auto& b) { return b.name == config.backend; });
  if (it == backends.end()) {
    std::vector<std::string> names;
    for (const auto& b : backends) names.push_back(b.name);
    throw_error(ErrorKind::NotFound, "unknown backend '" + config.backend + "' (known: " + join(names) + ")");
  }
  KILN_CHECK(it->available, ErrorKind::DeviceUnavailable,
             "backend '" + it->name + "' cannot run here: " + it->unavailable_reason);
  const DeviceDescription& device = pick_device(*it, config.device);
  Metadata m;
  m.kiln_version = "0.1.0";
  m.date_utc = now_utc_iso8601();
  m.backend = it->name;
  m.device_name = device.name;
  m.device_type = device.type;
  m.driver = device.driver;
  m.api_version = device.api_version;
  m.compiler = it->compiler;
  m.image = config.image_path;
  m.iters = config.iters;
  m.warmup = config.warmup;
  m.tolerance = tolerance_of(config);
  m.host_threads = std::thread::hardware_concurrency();
  // Variables that change what is measured: lavapipe's threads, Mesa's own
  // shader cache (it hides pipeline creation from cold compiles), validation.
  for (const char* name : {"LP_NUM_THREADS", "MESA_SHADER_CACHE_DISABLE", "KILN_VULKAN_VALIDATION"})
    if (const char* value = std::getenv(name)) m.environment.emplace_back(name, value);
  // ...and every compiler setting set through the environment.
  for (const SettingDef& def : setting_table()) {
    const std::string name(def.env);
    if (const char* value = std::getenv(name.c_str()); value && *value) m.environment.emplace_back(name, value);
  }
  m.command = reproduce_command(config);
  return m;
}

Results run_benchmark(const Config& config, const Observer& observer) {
  validate(config);
  Results results;
  results.metadata = describe_run(config);
  // Eager first: its output is the reference every compiled mode is checked against.
  std::vector<std::string> modes = config.modes;
  std::stable_partition(modes.begin(), modes.end(), [](const std::string& m) { return m == kEagerMode; });
  results.baseline = modes.front();

  for (const std::string& name : config.models) {
    for (const std::int64_t batch : config.batches) {
      const std::int64_t size = config.image_size > 0 ? config.image_size : models::usual_image_size(name);
      std::vector<Cell> cells;
      for (const std::string& mode : modes) {
        Cell cell;
        cell.model = name;
        cell.batch = batch;
        cell.image_size = size;
        cell.mode = mode;
        cells.push_back(std::move(cell));
      }

      measure(cells, config, observer);
      for (Cell& cell : cells) results.cells.push_back(std::move(cell));
    }
  }
  fill_speedups(results.cells, results.baseline);
  return results;
}

}  // namespace kiln::tools::bench

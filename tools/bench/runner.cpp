#include "runner.h"

#include "agreement.h"
#include "image.h"
#include "temp_dir.h"

#include <kiln/kiln.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
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

std::string reproduce_command(const Config& c) {
  std::string batches;
  for (auto b : c.batches) batches += (batches.empty() ? "" : ",") + std::to_string(b);
  std::string command = "kiln bench --models " + join(c.models) + " --batch " + batches + " --modes " + join(c.modes) +
                        " --iters " + std::to_string(c.iters) + " --warmup " + std::to_string(c.warmup) + " --image " +
                        c.image_path;
  if (c.image_size > 0) command += " --image-size " + std::to_string(c.image_size);
  command += " --backend " + c.backend;
  if (!c.device.empty()) command += " --device " + c.device;
  if (c.tolerance != Config{}.tolerance) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", c.tolerance);
    command += std::string(" --tolerance ") + text;
  }
  return command;
}

// Everything a timed loop gives: per-call host and device times, and the last outputs.
struct Timings {
  double first_call_ms = 0;
  std::vector<double> host_ms;
  std::vector<double> device_ms;  // empty unless every call had a device time
  std::vector<Tensor> outputs;
};

template <class Callable>
Timings time_calls(Callable& model, const std::vector<Tensor>& inputs, const Config& config, const Observer& observer) {
  const int total = 1 + config.warmup + config.iters;
  int done = 0;
  auto tick = [&] {
    ++done;
    if (observer.call_done) observer.call_done(done, total);
  };
  Timings t;
  // The first call is never timed: eager loads its kernels there, and drivers
  // finish work they defer to a pipeline's first use (lavapipe does).
  const auto first = Clock::now();
  t.outputs = model(inputs);
  t.first_call_ms = ms_since(first);
  tick();
  for (int i = 0; i < config.warmup; ++i) {
    t.outputs = model(inputs);
    tick();
  }
  bool every_call_timed_on_device = true;
  t.host_ms.reserve(static_cast<std::size_t>(config.iters));
  for (int i = 0; i < config.iters; ++i) {
    const auto start = Clock::now();
    t.outputs = model(inputs);
    t.host_ms.push_back(ms_since(start));
    if (auto device = model.stats().last_device_ms) t.device_ms.push_back(*device);
    else every_call_timed_on_device = false;
    tick();
  }
  if (!every_call_timed_on_device) t.device_ms.clear();
  return t;
}

void record_timings(Cell& cell, const Timings& t, const RunStats& stats) {
  cell.first_call_ms = t.first_call_ms;
  cell.host_ms = summarize(t.host_ms);
  if (!t.device_ms.empty()) cell.device_ms = summarize(t.device_ms);
  cell.peak_device_bytes = stats.peak_device_bytes;
  cell.dispatches_per_run = stats.dispatches_per_run;
  cell.host_steps_per_run = stats.host_steps_per_run;
  cell.kernels = stats.kernels;
}

// Eager's cell; returns its outputs, the reference for the compiled modes.
std::vector<Tensor> run_eager(Cell& cell, const Model& model, const std::vector<Tensor>& inputs, const Config& config,
                              const Observer& observer) {
  EagerModel runner = eager(model, {.backend = config.backend, .device = config.device});
  Timings t = time_calls(runner, inputs, config, observer);
  record_timings(cell, t, runner.stats());
  return std::move(t.outputs);
}

// Eager's outputs without timing, when eager is not among the modes.
std::vector<Tensor> eager_outputs(const Model& model, const std::vector<Tensor>& inputs, const Config& config) {
  EagerModel runner = eager(model, {.backend = config.backend, .device = config.device});
  return runner(inputs);
}

void run_compiled(Cell& cell, const Model& model, const std::vector<Tensor>& inputs, const std::vector<Tensor>& reference,
                  const Config& config, const Observer& observer) {
  TempDir cache("kiln-bench-cache");
  const CompileOptions options{.backend = config.backend, .device = config.device, .mode = parse_mode(cell.mode),
                               .cache_dir = cache.path().string()};
  {
    // Cold: nothing on disk. The device context (and its in-memory kernels)
    // goes away with this model, so the warm compile below reads the disk.
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

  Timings t = time_calls(warm, inputs, config, observer);
  record_timings(cell, t, warm.stats());
  const Agreement agreement = compare_outputs(reference, t.outputs, config.tolerance);
  cell.max_abs_diff = agreement.max_abs_diff;
  cell.output_scale = agreement.scale;
  if (!agreement.matches) {
    cell.status = CellStatus::mismatch;
    cell.message = agreement.problem;
  }
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
BuiltModel build_for_batch(const std::string& name, std::int64_t batch, std::int64_t size) {
  try {
    Model model = models::build(name, {.batch = batch, .image_size = size});
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

// One model at one batch size: its cells in order, eager (if timed) first.
void measure(std::vector<Cell>& cells, const Config& config, const Observer& observer) {
  const Cell& first = cells.front();
  std::optional<Model> model;
  std::vector<Tensor> inputs, reference;
  try {
    BuiltModel built = build_for_batch(first.model, first.batch, first.image_size);
    for (Cell& cell : cells) cell.task = built.task;
    if (!built.model) return settle(cells, 0, CellStatus::skipped, built.skip_reason, observer);
    model = std::move(built.model);
    inputs.push_back(load_image_tensor(config.image_path, first.image_size, first.batch));
    if (first.mode != kEagerMode) reference = eager_outputs(*model, inputs, config);
  } catch (const Error& e) {
    return settle(cells, 0, CellStatus::failed, e.what(), observer);
  }
  for (std::size_t i = 0; i < cells.size(); ++i) {
    Cell& cell = cells[i];
    if (observer.cell_started) observer.cell_started(cell);
    try {
      if (cell.mode == kEagerMode) reference = run_eager(cell, *model, inputs, config, observer);
      else run_compiled(cell, *model, inputs, reference, config, observer);
    } catch (const Error& e) {
      cell.status = CellStatus::failed;
      cell.message = e.what();
    }
    if (observer.cell_finished) observer.cell_finished(cell);
    if (cell.mode == kEagerMode && cell.status == CellStatus::failed)
      return settle(cells, i + 1, CellStatus::failed, "eager failed, so there is nothing to check against", observer);
  }
}

void fill_speedups(std::vector<Cell>& cells) {
  for (Cell& cell : cells) {
    if (cell.mode == kEagerMode || !cell.measured()) continue;
    for (const Cell& base : cells)
      if (base.mode == kEagerMode && base.measured() && base.model == cell.model && base.batch == cell.batch &&
          cell.host_ms.mean > 0)
        cell.speedup = base.host_ms.mean / cell.host_ms.mean;
  }
}

}  // namespace

std::int64_t usual_image_size(const std::string& model) {
  return model == "ssdlite320_mobilenet_v3_large" ? 320 : 224;
}

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
  KILN_CHECK(config.tolerance > 0, ErrorKind::InvalidArgument, "--tolerance must be > 0");
  std::error_code ec;
  KILN_CHECK(std::filesystem::is_regular_file(config.image_path, ec), ErrorKind::Io,
             "cannot read image '" + config.image_path +
                 "': no such file (run from kiln's source folder for the default, or pass --image)");
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
  m.tolerance = config.tolerance;
  m.host_threads = std::thread::hardware_concurrency();
  // Variables that change what is measured: lavapipe's threads, Mesa's own
  // shader cache (it hides pipeline creation from cold compiles), validation.
  for (const char* name : {"LP_NUM_THREADS", "MESA_SHADER_CACHE_DISABLE", "KILN_VULKAN_VALIDATION"})
    if (const char* value = std::getenv(name)) m.environment.emplace_back(name, value);
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

  for (const std::string& name : config.models) {
    for (const std::int64_t batch : config.batches) {
      const std::int64_t size = config.image_size > 0 ? config.image_size : usual_image_size(name);
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
  fill_speedups(results.cells);
  return results;
}

}  // namespace kiln::tools::bench

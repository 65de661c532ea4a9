// What `kiln bench` measures: its configuration, the machine it ran on, and
// one cell per model x batch x mode. Identical in structure on every backend,
// so tables from different machines line up.
#pragma once

#include "stats.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::tools::bench {

inline constexpr const char* kEagerMode = "eager";

struct Config {
  std::vector<std::string> models;
  std::vector<std::int64_t> batches{1, 4, 16};
  std::vector<std::string> modes{kEagerMode, "default", "reduce-overhead"};
  int iters = 300;
  int warmup = 10;
  std::string image_path;      // `kiln bench` sets the installed sample photograph (default_image_path)
  std::int64_t image_size = 0;  // 0: each model's usual size
  std::string backend = "vulkan";
  std::string device;           // index or part of the name; "" is the first
  double tolerance = 0;         // allowed |compiled - eager|, relative to max |eager|; 0: default_tolerance(dtype)
  std::string dtype = "model";  // --dtype: the models' f32 computation in f16 or bf16 (Model::with_float_type)
  std::string tune_db;          // max-autotune's tuning database; "" is the tune_db setting's, else the default
};

struct Metadata {
  std::string kiln_version;
  std::string date_utc;  // ISO 8601
  std::string backend;
  std::string device_name;
  std::string device_type;
  std::string driver;
  std::string api_version;
  std::string compiler;
  std::string image;
  int iters = 0;
  int warmup = 0;
  double tolerance = 0;
  unsigned host_threads = 0;
  std::vector<std::pair<std::string, std::string>> environment;  // variables that change the figures
  std::string command;  // a `kiln bench` command line that reproduces the run
};

enum class CellStatus {
  ok,        // measured, output matches eager
  mismatch,  // measured, but the output differs from eager's beyond the tolerance
  failed,    // an error stopped the measurement (message says which)
  skipped,   // not applicable (e.g. a model with a fixed batch size)
};
const char* status_name(CellStatus status);

struct Cell {
  std::string model;
  std::string task;
  std::int64_t batch = 1;
  std::int64_t image_size = 0;
  std::string mode;
  CellStatus status = CellStatus::ok;
  std::string message;  // why it was skipped, failed or mismatched

  double first_call_ms = 0;          // the untimed first call (eager: includes loading its kernels)
  Summary host_ms;                   // wall time per timed call, as the caller sees it
  std::optional<Summary> device_ms;  // when the backend times every call
  std::optional<double> speedup;     // the baseline mode's mean / this mean, same model and batch

  // Compiled modes only: prepare() with an empty disk cache, then again in a
  // fresh process-level device reading that cache.
  std::optional<double> cold_compile_ms;
  std::optional<double> warm_compile_ms;
  int kernels_compiled_cold = 0;
  int kernels_from_disk_warm = 0;
  int kernels_compiled_warm = 0;

  std::uint64_t peak_device_bytes = 0;
  int dispatches_per_run = 0;
  int host_steps_per_run = 0;
  int kernels = 0;

  // Compiled modes only: agreement with eager's output on the same input.
  std::optional<double> max_abs_diff;
  std::optional<double> output_scale;  // max |eager output|
  int tied_detections = 0;             // detection lists: detections in one list only, near-tied at its cut-off

  bool measured() const { return status == CellStatus::ok || status == CellStatus::mismatch; }
};

struct Results {
  Metadata metadata;
  std::vector<Cell> cells;
  // The mode speed-ups are measured against: eager when it ran, else the
  // first mode given (`--modes default,max-autotune` compares the two).
  std::string baseline = kEagerMode;
};

}  // namespace kiln::tools::bench

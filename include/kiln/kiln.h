// kiln's public API: run a model eagerly, or compile it for a backend.
//
//   kiln::Model model = kiln::models::resnet18();
//   kiln::CompiledModel fast = kiln::compile(model, {.backend = "vulkan",
//                                                    .mode = kiln::Mode::reduce_overhead});
//   std::vector<kiln::Tensor> out = fast({input});  // first call compiles
#pragma once

#include <kiln/builder.h>
#include <kiln/dtype.h>
#include <kiln/error.h>
#include <kiln/model.h>
#include <kiln/models.h>
#include <kiln/settings.h>
#include <kiln/tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

struct DeviceOptions {
  std::string backend = "vulkan";
  // Device index ("0") or a case-insensitive substring of its name; "" picks
  // the first device.
  std::string device{};
};

struct CompileOptions {
  std::string backend = "vulkan";
  std::string device{};
  Mode mode = Mode::default_;
  // true: compile one graph or fail listing the graph breaks (the first 32; explain() lists all).
  bool fullgraph = false;
  // Where compiled kernels persist; "" uses $KILN_CACHE_DIR, else
  // $XDG_CACHE_HOME/kiln, else ~/.cache/kiln. "off" disables the disk cache.
  std::string cache_dir{};
  // Compiler settings by name (include/kiln/settings.h): they take precedence
  // over the mode's and the environment's values.
  SettingOverrides settings{};
};

// What a run cost; filled after every call.
struct RunStats {
  double compile_ms = 0;          // first call only (0 for eager)
  // compile_ms split: the plan (graph passes, lowering, fusion, memory plan;
  // or reading it from a file or the plan cache), the kernels (compiling or
  // reading binaries, and the driver's pipeline creation), the weights'
  // upload, and prepare()'s warm-up submission (0 without prepare()).
  double plan_ms = 0;
  double kernels_ms = 0;
  double upload_ms = 0;
  double warm_up_ms = 0;
  double last_run_ms = 0;         // host wall time of the last call
  std::optional<double> last_device_ms{};  // device time of the last call, if measured
  int kernels = 0;                // distinct kernels loaded
  int dispatches_per_run = 0;
  int host_steps_per_run = 0;     // graph breaks run on the host reference implementation
  std::uint64_t peak_device_bytes = 0;  // activations and weights on the device
  int kernel_cache_hits = 0;      // binaries read from the disk cache
  int kernel_cache_misses = 0;    // binaries compiled
  int kernels_from_file = 0;      // binaries loaded from a compiled-model file (kiln::load)
  int graph_passes_run = 0;       // graph passes run by the first call (0: the plan was read from a file)
  bool plan_from_cache = false;   // the plan came from the plan cache (a warm start: no graph pass ran)
};

// One dispatch's cost, measured by running it alone (see profile()).
struct KernelTiming {
  std::string kernel;              // the kernel's name ("conv2d_direct_c4_w4_wg64_oihw4o_add_relu")
  std::vector<std::string> nodes;  // the graph nodes it runs, producer first
  std::string output;              // the type of what it writes ("f32[1, 64, 56, 56]")
  double ms = 0;                   // median over the profiled calls
  bool device_time = false;        // ms is device time (timestamps); else host wall time of a submit
};

class Executor;  // src/runtime: the shared engine behind both callables
struct LoadOptions;

// Op by op: one kernel per op on the chosen device, no graph passes, no
// fusion. The honest baseline that compiled code is measured against.
class EagerModel {
 public:
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);
  const RunStats& stats() const;
  const Model& model() const;
  // Runs the model `calls` times with every dispatch in its own submission and
  // returns each dispatch's median time, in execution order. Slower than a
  // call (one submit per kernel): for finding where time goes, not for totals.
  std::vector<KernelTiming> profile(const std::vector<Tensor>& inputs, int calls = 5);
  // The engine (src/runtime/executor.h), for tests and tools that inspect plans.
  const Executor& engine() const { return *impl_; }

 private:
  friend EagerModel eager(const Model&, const DeviceOptions&);
  std::shared_ptr<Executor> impl_;
};

class CompiledModel {
 public:
  // The first call compiles; later calls reuse everything. Throws
  // ShapeMismatch naming the input and both shapes if inputs do not match.
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);
  // Compiles now, ahead of the first call: passes, kernels, memory plan, and
  // one warm-up submission of every kernel (drivers such as lavapipe compile a
  // pipeline on its first dispatch), so the first call costs what later ones do.
  void prepare();
  const RunStats& stats() const;
  const Model& model() const;
  const CompileOptions& options() const;
  // What the compiler did, as text: passes, kernels, memory plan.
  std::string explain() const;
  // As EagerModel::profile(): each fused dispatch's median time, alone.
  std::vector<KernelTiming> profile(const std::vector<Tensor>& inputs, int calls = 5);
  // The engine (src/runtime/executor.h), for tests and tools that inspect plans.
  const Executor& engine() const { return *impl_; }

 private:
  friend CompiledModel compile(const Model&, const CompileOptions&);
  friend CompiledModel load(const std::string&, const LoadOptions&);
  std::shared_ptr<Executor> impl_;
};

EagerModel eager(const Model& model, const DeviceOptions& options = {});
CompiledModel compile(const Model& model, const CompileOptions& options = {});

// ---- compiled-model files (.kiln) -------------------------------------------
// A model compiled ahead of time for one or more targets: the compiled plan
// and the kernels' binaries of each. `kiln compile` writes one; so does
// compile_to_file().
struct AheadOfTimeOptions {
  // "vulkan" (the first Vulkan device here), "vulkan:NAME" (a device by index
  // or name), "cuda:sm_80,sm_90" (CUBIN and PTX per architecture, no GPU
  // needed), "hip:gfx90a,gfx1030" (AMD code objects).
  std::vector<std::string> targets = {"vulkan"};
  Mode mode = Mode::default_;  // max-autotune uses the tuning database's records (it tunes nothing)
  SettingOverrides settings{};
  std::string cache_dir{};     // as CompileOptions::cache_dir: binaries go through the kernel cache
};
// Writes the file atomically (a temporary file, then a rename).
void compile_to_file(const Model& model, const std::string& path, const AheadOfTimeOptions& options = {});

struct LoadOptions {
  // "" (the default): the first backend the file holds a plan for that has a
  // device here.
  std::string backend{};
  std::string device{};
  std::string cache_dir{};  // the device's kernel cache (loading itself compiles nothing)
};
// Reads a compiled-model file and binds the plan that fits the device: no
// graph pass and no kernel compiler run (stats(): graph_passes_run and
// kernel_cache_misses stay 0). Throws Corrupt for a truncated or altered
// file, Unsupported for one written by another kiln version or holding no
// plan the device can run (naming what it holds), NotFound for no file.
CompiledModel load(const std::string& path, const LoadOptions& options = {});

// ---- devices ---------------------------------------------------------------
struct DeviceDescription {
  int index = 0;
  std::string name;
  std::string type;
  std::string driver;
  std::string api_version;
  std::vector<std::pair<std::string, std::string>> limits;  // key limits, as text
};

struct BackendDescription {
  std::string name;
  bool available = false;
  std::string unavailable_reason;
  std::string compiler;  // compiler name and version
  std::vector<DeviceDescription> devices;
  std::vector<std::string> offline_targets;  // archs code is generated for without a device
};

std::vector<BackendDescription> list_backends();

}  // namespace kiln

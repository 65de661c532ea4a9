// kiln's public API: run a model eagerly, or compile it for a backend.
//
//   kiln::Model model = kiln::models::resnet18();
//   kiln::CompiledModel fast = kiln::compile(model, {.backend = "vulkan",
//                                                    .mode = kiln::Mode::reduce_overhead});
//   std::vector<kiln::Tensor> out = fast({input});  // first call compiles
//
// Threads. A CompiledModel or EagerModel (and its copies, which share it) may
// be called from several threads at once: its calls (operator(),
// call_on_device, prepare, profile, submitted calls) hold the model's lock
// and run one at a time, in no promised order, except that calls
// submitted to one model finish in the order submitted. Different models
// run at once, also on one device. stats() copies the last finished call's
// figures. compile(), eager(), load(), list_backends() and DeviceTensor's
// methods may be called from any threads at once. Not locked: TracedFunction
// (one thread at a time). Tensor copies share their data: do not write a tensor
// while a call reads it (submit() copies its host inputs before returning).
#pragma once

#include <kiln/builder.h>
#include <kiln/causal_lm.h>
#include <kiln/dtype.h>
#include <kiln/error.h>
#include <kiln/export.h>
#include <kiln/log.h>
#include <kiln/model.h>
#include <kiln/models.h>
#include <kiln/settings.h>
#include <kiln/tensor.h>

#include <cstddef>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace kiln {

struct KILN_API DeviceOptions {
  std::string backend = "vulkan";
  // Device index ("0") or a case-insensitive substring of its name; "" picks
  // the first device.
  std::string device{};
};

// An input dim whose extent may change from call to call without compiling
// kernels again (a batch size, an image's height, a sequence length): the
// kernels take the extents that depend on it as run-time parameters, so one
// compile serves every extent in [min, max]. A call outside the bounds is a
// ShapeMismatch naming them. The dim must be symbolic in the model.
struct KILN_API DynamicDim {
  std::string input;  // the input's name
  int dim = 0;
  std::int64_t min = 0;
  std::int64_t max = INT32_MAX;
};

struct KILN_API CompileOptions {
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
  // A model with symbolic input dims (Model::has_symbolic_dims: an ONNX file
  // exported with dynamic axes) compiles for the shapes of the model it was
  // made for; a call with other shapes makes and compiles the model for them
  // once and keeps both (logged with the reason at KILN_LOG=info), up to this
  // many shape sets. Past it a call throws ShapeMismatch naming the limit, or
  // with eager_past_recompile_limit runs eagerly (a warning per shape set).
  int recompile_limit = 8;
  bool eager_past_recompile_limit = false;
  // Dims compiled dynamic from the first call (see DynamicDim). Dims sharing
  // a symbolic name with one of these are dynamic too.
  std::vector<DynamicDim> dynamic_dims{};
  // As torch.compile's automatic dynamic shapes: a dim whose extent changed
  // once is compiled dynamic in the next shape set, which then serves every
  // extent of it (each new extent is planned again on the host, its kernels
  // reused; it counts as no new shape set). false: every new shape set is
  // compiled for its own extents.
  bool automatic_dynamic = true;
};

// What a run cost; filled after every call.
struct KILN_API RunStats {
  double compile_ms = 0;          // first call only (0 for eager)
  // compile_ms split: the plan (graph passes, lowering, fusion, memory plan;
  // or reading it from a file or the plan cache), the kernels (compiling or
  // reading binaries, and the driver's pipeline creation), the weights'
  // upload, and prepare()'s warm-up submission (0 without prepare()). The
  // kernels and the upload run at the same time, so compile_ms holds the
  // longer of the two, not their sum.
  double plan_ms = 0;
  // plan_ms's share spent timing kernel variants on the device (max-autotune,
  // for sites the tuning database has no record of; 0 for a plan read from
  // the plan cache or a file).
  double tuning_ms = 0;
  // max-autotune with the tune setting "background": whether this model's
  // tuning job is still queued or running, and, once its tuned plan has
  // replaced the first (at the next call, or in wait_for_tuning()), how long
  // the job took.
  bool tuning_in_background = false;
  double background_tuning_ms = 0;
  double kernels_ms = 0;
  // kernels_ms's two parts, each summed over the kernels (distinct kernels
  // load on several threads at once, so a sum can exceed kernels_ms): the
  // kernel compiler (shaderc, NVRTC, hiprtc; 0 when every binary came from a
  // cache or a file) and the driver's pipeline creation (where lavapipe and
  // GPU drivers compile to machine code).
  double kernel_compile_ms = 0;
  double pipeline_ms = 0;
  double upload_ms = 0;
  double warm_up_ms = 0;
  double last_run_ms = 0;         // host wall time of the last call
  std::optional<double> last_device_ms{};  // device time of the last call, if measured
  int kernels = 0;                // distinct kernels loaded
  int dispatches_per_run = 0;
  int host_steps_per_run = 0;     // graph breaks run on the host reference implementation
  // Activations and weights on the device; weights of 1 MiB or more that
  // another model on the device had already uploaded (the same bytes) are
  // shared with it and counted there, not here.
  std::uint64_t peak_device_bytes = 0;
  int kernel_cache_hits = 0;      // binaries read from the disk cache
  int kernel_cache_misses = 0;    // binaries compiled
  int kernels_from_file = 0;      // binaries loaded from a compiled-model file (kiln::load)
  int graph_passes_run = 0;       // graph passes run by the first call (0: the plan was read from a file)
  bool plan_from_cache = false;   // the plan came from the plan cache (a warm start: no graph pass ran)
  int shape_sets = 1;             // input shape sets compiled so far (see CompileOptions::recompile_limit)
  // Bytes the last call copied from the host to the device (host inputs, a
  // graph break's results that kernels read) and back (outputs returned as
  // host tensors, a graph break's operands). Device inputs and outputs
  // (DeviceTensor) are copied on the device and count in neither.
  std::uint64_t uploaded_bytes = 0;
  std::uint64_t downloaded_bytes = 0;
};

// One dispatch's cost, measured by running it alone (see profile()).
struct KILN_API KernelTiming {
  std::string kernel;              // the kernel's name ("conv2d_direct_c4_w4_wg64_oihw4o_add_relu")
  std::vector<std::string> nodes;  // the graph nodes it runs, producer first
  std::string output;              // the type of what it writes ("f32[1, 64, 56, 56]")
  double ms = 0;                   // median over the profiled calls
  bool device_time = false;        // ms is device time (timestamps); else host wall time of a submit
};

// Private implementation details: the engine behind both callables
// (src/runtime/executor.h), and kiln's own tests' and tools' way in
// (src/runtime/internal_access.h).
class Executor;
namespace internal { struct Access; }
namespace runtime { class ShapeSets; }
struct LoadOptions;

// ---- device-resident tensors and asynchronous calls -------------------------
struct DeviceTensorData;  // src/runtime/device_tensor.h

// A tensor that stays on a device: an output of call_on_device() or submit(),
// or a host tensor copied there with to_device(). It has a buffer of its own
// that no later call writes, so it may be kept, read, and passed as an input
// to any model on the same device, which copies it on the device (no host
// round trip). The one exception: an input the model writes into (a
// TensorScatter updating a key/value cache that nothing else in the model
// reads) takes the tensor as it is, writes it in place, and returns it as
// that output; pass a copy or a host tensor to keep the old values. A value only the host has (a graph break's dynamic output)
// stays a host tensor inside: on_device() is false. Copies share the data;
// it lives, and keeps its device, as long as some copy does.
class KILN_API DeviceTensor {
 public:
  DeviceTensor();  // empty: an f32 [0] on no device
  DType dtype() const;
  const Shape& shape() const;
  std::size_t nbytes() const;
  // Whether the data is in device memory (false: held on the host, see above).
  bool on_device() const;
  // The device, "vulkan:0 'llvmpipe (LLVM 15.0.6, 256 bits)'", or "host".
  std::string device() const;
  // A new host tensor with the data (a download when on_device()).
  Tensor to_host() const;

 private:
  friend struct DeviceTensorData;
  std::shared_ptr<const DeviceTensorData> data_;
};

// An input of call_on_device() and submit(): a host tensor, uploaded, or a
// DeviceTensor of the model's device, copied on the device (or, for an
// input the model writes into, used where it lies: see DeviceTensor).
using CallInput = std::variant<Tensor, DeviceTensor>;

// A call started by submit(); wait() for its outputs.
class KILN_API PendingCall {
 public:
  PendingCall() = default;  // no call: valid() is false
  // Blocks until the call has finished and returns its outputs, or rethrows
  // its error (a kiln::Error). May be called again: the same outputs.
  std::vector<DeviceTensor> wait() const;
  // Whether the call has finished, so that wait() returns at once.
  bool ready() const;
  bool valid() const { return result_.valid(); }

 private:
  friend class Executor;
  explicit PendingCall(std::shared_future<std::vector<DeviceTensor>> result) : result_(std::move(result)) {}
  std::shared_future<std::vector<DeviceTensor>> result_;
};

// Op by op: one kernel per op on the chosen device, no graph passes, no
// fusion. The honest baseline that compiled code is measured against.
// A model with symbolic dims runs eagerly at any input shapes: each new shape
// set is prepared once (its kernels and weights), the first and the latest
// eight kept.
class KILN_API EagerModel {
 public:
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);
  // As CompiledModel's: outputs left on the device, calls submitted.
  std::vector<DeviceTensor> call_on_device(const std::vector<CallInput>& inputs);
  PendingCall submit(std::vector<CallInput> inputs);
  DeviceTensor to_device(const Tensor& tensor) const;
  RunStats stats() const;
  const Model& model() const;
  // Runs the model `calls` times with every dispatch in its own submission and
  // returns each dispatch's median time, in execution order. Slower than a
  // call (one submit per kernel): for finding where time goes, not for totals.
  std::vector<KernelTiming> profile(const std::vector<Tensor>& inputs, int calls = 5);

 private:
  friend struct internal::Access;
  friend EagerModel eager(const Model&, const DeviceOptions&);
  std::shared_ptr<Executor> impl_;                // the shapes the model was made for
  std::shared_ptr<runtime::ShapeSets> shape_sets_;  // other shapes (a model with symbolic dims), else null
};

class KILN_API CompiledModel {
 public:
  // The first call compiles; later calls reuse everything. Throws
  // ShapeMismatch naming the input and both shapes if inputs do not match,
  // except for a model with symbolic dims, where new shapes compile once more
  // (CompileOptions::recompile_limit). Calls of one shape set finish in the
  // order submitted; model(), prepare() and to_device() are the first set's.
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);
  // A call whose inputs may be DeviceTensors of this model's device and whose
  // outputs stay on the device: model B can take model A's outputs without a
  // host round trip. Throws ShapeMismatch as operator() does, and
  // InvalidArgument naming the input and both devices for a DeviceTensor of
  // another device.
  std::vector<DeviceTensor> call_on_device(const std::vector<CallInput>& inputs);
  // call_on_device() on the model's own thread: returns at once (after
  // checking the inputs as call_on_device() does and copying host inputs),
  // while the call runs. Calls submitted to one model finish in the order
  // submitted. Destroying the model's last copy waits for its pending calls.
  //   kiln::PendingCall call = model.submit({image});
  //   ... other work ...
  //   kiln::Tensor logits = call.wait()[0].to_host();
  PendingCall submit(std::vector<CallInput> inputs);
  // Copies a host tensor to this model's device, once, for inputs that several calls read.
  DeviceTensor to_device(const Tensor& tensor) const;
  // Compiles now, ahead of the first call: passes, kernels, memory plan, and
  // one warm-up submission of every kernel (drivers such as lavapipe compile a
  // pipeline on its first dispatch), so the first call costs what later ones do.
  void prepare();
  RunStats stats() const;
  // max-autotune with the tune setting "background": returns once the model's
  // tuning jobs (one per shape set compiled so far) have finished, with the
  // tuned plans in place; at once when there are none.
  void wait_for_tuning();
  const Model& model() const;
  // The model that calls with these input shapes run: for a model with
  // symbolic dims, the model at those shapes; for a loaded file, the graph of
  // the shape set it holds for them. Throws ShapeMismatch as such a call would.
  const Model& model_for(const std::vector<Shape>& input_shapes);
  const CompileOptions& options() const;
  // What the compiler did, as text: passes, kernels, memory plan.
  std::string explain() const;
  // As EagerModel::profile(): each fused dispatch's median time, alone.
  std::vector<KernelTiming> profile(const std::vector<Tensor>& inputs, int calls = 5);

 private:
  friend struct internal::Access;
  friend CompiledModel compile(const Model&, const CompileOptions&);
  friend CompiledModel load(const std::string&, const LoadOptions&);
  std::shared_ptr<Executor> impl_;                // the shapes the model was made for
  std::shared_ptr<runtime::ShapeSets> shape_sets_;  // other shapes (symbolic dims), a loaded file's sets, else null
};

KILN_API EagerModel eager(const Model& model, const DeviceOptions& options = {});
KILN_API CompiledModel compile(const Model& model, const CompileOptions& options = {});

// ---- compiled-model files (.kiln) -------------------------------------------
// A model compiled ahead of time for one or more targets: the compiled plan
// and the kernels' binaries of each. `kiln compile` writes one; so does
// compile_to_file().
struct KILN_API AheadOfTimeOptions {
  // "vulkan" (the first Vulkan device here), "vulkan:NAME" (a device by index
  // or name), "cuda:sm_80,sm_90" (CUBIN and PTX per architecture, no GPU
  // needed), "hip:gfx90a,gfx1030" (AMD code objects).
  std::vector<std::string> targets = {"vulkan"};
  Mode mode = Mode::default_;  // max-autotune uses the tuning database's records (it tunes nothing)
  SettingOverrides settings{};
  std::string cache_dir{};     // as CompileOptions::cache_dir: binaries go through the kernel cache
  // For a model with symbolic dims (an ONNX file with dynamic axes): the
  // input shapes the file serves, a plan per set and target; each set names
  // inputs and their shapes (inputs it leaves out keep the model's). Empty:
  // the shapes the model was loaded at. A call with shapes the file does not
  // hold is a ShapeMismatch listing those it holds.
  std::vector<std::map<std::string, Shape>> shape_sets{};
};
// Writes the file atomically (a temporary file, then a rename).
KILN_API void compile_to_file(const Model& model, const std::string& path, const AheadOfTimeOptions& options = {});

struct KILN_API LoadOptions {
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
KILN_API CompiledModel load(const std::string& path, const LoadOptions& options = {});

// ---- the cache folder --------------------------------------------------------
// Compiled kernels, cached plans (their weights in a file each, shared by the
// plans of a model's shape sets and modes), the drivers' pipeline caches and
// the tuning database live in
// one folder: CompileOptions::cache_dir, else $KILN_CACHE_DIR, else
// $XDG_CACHE_HOME/kiln, else ~/.cache/kiln. Kernels, plans and weights are
// kept within a size limit ($KILN_CACHE_LIMIT, "2G" by default), the least
// recently used going first; `kiln cache show|prune|clear` does the same.
struct KILN_API CacheInfo {
  std::string path;               // the folder ("" when the cache is off)
  std::uint64_t kernel_bytes = 0, plan_bytes = 0, weight_bytes = 0;
  std::uint64_t other_bytes = 0;  // pipeline caches, the tuning database, leftovers
  std::int64_t kernels = 0, plans = 0, weight_files = 0;
  std::uint64_t limit_bytes = 0;  // what prune_cache keeps kernels, plans and weights within
};
// `cache_dir` as CompileOptions::cache_dir ("" the default).
KILN_API CacheInfo cache_info(const std::string& cache_dir = "");
// Removes least recently used kernels, plans and weights until they fit
// `limit_bytes` (nullopt: the configured limit); returns the bytes removed.
KILN_API std::uint64_t prune_cache(const std::string& cache_dir = "",
                                   std::optional<std::uint64_t> limit_bytes = std::nullopt);
// Removes every cached kernel, plan and pipeline cache (not the tuning
// database, which holds measurements). Throws Io naming what it cannot remove.
KILN_API void clear_cache(const std::string& cache_dir = "");

// ---- devices ---------------------------------------------------------------
struct KILN_API DeviceDescription {
  int index = 0;
  std::string name;
  std::string type;
  std::string driver;
  std::string api_version;
  std::vector<std::pair<std::string, std::string>> limits;  // key limits, as text
};

struct KILN_API BackendDescription {
  std::string name;
  bool available = false;
  std::string unavailable_reason;
  std::string compiler;  // compiler name and version
  std::vector<DeviceDescription> devices;
  std::vector<std::string> offline_targets;  // archs code is generated for without a device
};

KILN_API std::vector<BackendDescription> list_backends();

// Device memory kiln holds in this process, for a long-running service's
// monitoring: one entry per device that some model, device tensor or call
// still holds open (per cache folder, as models share a device per folder;
// a device nothing holds is closed and not listed, unless some of its
// buffers outlived it, which is a leak: then its name ends in "(closed;
// ...)"). Counts every buffer kiln allocated there: weights, activations,
// device tensors, staging and recorded replays. It returns to its earlier
// level when what held the buffers is gone.
struct KILN_API DeviceMemoryUse {
  std::string device;            // "vulkan:0 'llvmpipe (LLVM 15.0.6, 256 bits)'"
  std::string cache_dir;         // as the models were given it ("" the default)
  std::uint64_t bytes = 0;       // in buffers alive now
  std::uint64_t buffers = 0;
  std::uint64_t peak_bytes = 0;  // the most at once since the device was opened
};
KILN_API std::vector<DeviceMemoryUse> device_memory_use();

}  // namespace kiln

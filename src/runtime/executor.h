// The engine behind kiln::EagerModel and kiln::CompiledModel: binds a
// compiled plan (src/compile/plan.h, the one compile path) to a device and
// runs it.
//
// prepare() builds the plan (compiled: graph passes, fusion, parameterised
// kernels, the static memory plan; eager: one kernel per node, a buffer per
// tensor kept between calls like a caching allocator), compiles and loads its
// kernels, allocates its storage and uploads the weights once; then (compiled
// only) one warm-up submission dispatches every kernel once, because drivers
// finish work they defer to a pipeline's first use there (lavapipe
// JIT-compiles each kernel at its first dispatch: seconds for a model), so the
// first call after prepare() costs what later ones do. A first call without
// prepare() plans without the warm-up: it is the warm-up itself. run() uploads
// the inputs, executes the segments (recorded each call, or recorded once and
// replayed with the replay setting: reduce-overhead), and downloads the
// outputs.
//
// Graph breaks (the plan's host steps) run on the reference implementation
// between device segments, except control flow, whose subgraphs run as
// models of their own (subgraph_models.h). Dynamic values live on the host only; a static
// value a host step produces is uploaded only if a kernel reads it.
//
// Device calls (run_on_device, submit) take DeviceTensors as inputs, copied
// device to device into the inputs' storage, and copy each output into a
// buffer of its own; except an input the model updates in place (a kernel
// writes an output into its storage: TensorScatter on a key/value cache,
// lower::lower_in_place): a DeviceTensor given for it is bound as that
// storage, written where it lies, and returned as the output, with nothing
// copied (its caller's handle sees the update). Replayed recordings are kept
// while the same tensors come back, and recorded again when others do. Threads: the public members that run or describe the
// model (prepare, run, run_on_device, profile, explain) hold one lock per
// executor, so calls run one at a time; stats() copies what the last
// finished call published, without waiting for a running one; submit() queues the call on the
// executor's own thread (call_queue.h) and to_device() touches no executor
// state. The plan inspectors (plan(), graph_breaks(), placement(), ...) are
// not locked: use them once prepare() has returned (and, with background
// tuning, not across the call that switches to the tuned plan).
//
// max-autotune with tune=background: the first plan is records-only; a job
// on the process's tuning thread (background_tuning.h) builds the tuned plan
// and loads its kernels, and the next call rebinds to it before it runs.
#pragma once

#include <kiln/kiln.h>

#include "graph/ir.h"
#include "src/compile/memory_plan.h"
#include "src/compile/plan.h"
#include "src/kernel/ir.h"
#include "src/runtime/call_queue.h"
#include "src/runtime/device_pool.h"

#include <chrono>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kiln {

namespace runtime {
class SubgraphModels;
class TuningJob;
}  // namespace runtime

class Executor {
 public:
  struct Options {
    std::string backend;
    std::string device;
    bool compiled = false;
    CompileOptions compile;  // when compiled
    Settings settings{};     // resolved from compile.mode and compile.settings (compiled)
    // Compiled: the graph passes' choices (PlanRequest::graph_chooser); the
    // tuning worker forces one. Null: the rules, or max-autotune's choices.
    graph::passes::GraphChooser graph_chooser{};
    // A plan read from a file (a compiled-model file, the plan cache): bound
    // as it is, with no graph pass and, where it carries binaries, no kernel
    // compiler. Its backend must be `backend`.
    std::shared_ptr<const compiler::Plan> plan{};
    // Compiled, with dynamic dims: the model at other extents of those dims
    // (PlanRequest::probe_graph), and the dims as text ("input 'x' dim 0"),
    // which the plan cache's key holds.
    std::shared_ptr<const graph::Graph> dynamic_probe{};
    std::string dynamic_dims{};
    std::vector<compiler::SiteKnobs> pinned_sites{};  // PlanRequest::pinned_sites
    std::vector<compiler::GraphChoiceMade> pinned_choices{};  // PlanRequest::pinned_choices
    std::vector<std::shared_ptr<const compiler::Plan>> set_plans{};  // PlanRequest::set_plans
    std::shared_ptr<graph::passes::WeightMemo> weight_memo{};        // PlanRequest::weight_memo
    // New extents of a compiled shape set ("shape set 2"): the compile log
    // names the kernels its kernels did not cover (their code depends on
    // the extents).
    std::string extends{};
  };

  using GraphBreak = compiler::GraphBreak;

  Executor(Model model, Options options);
  ~Executor();

  // Plans, compiles and (compiled mode) warms the device up (see above); only
  // the first call does anything.
  void prepare();
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  // A call with host or device inputs whose outputs stay on the device.
  std::vector<DeviceTensor> run_on_device(const std::vector<CallInput>& inputs);
  // run_on_device() on the executor's thread; inputs checked (and host ones copied) first.
  PendingCall submit(std::vector<CallInput> inputs);
  // `tensor` copied into a buffer of its own on this executor's device.
  DeviceTensor to_device(const Tensor& tensor) const;
  // Each dispatch alone, in execution order, median over `calls` (executor_profile.cpp).
  std::vector<KernelTiming> profile(const std::vector<Tensor>& inputs, int calls);
  // What one call's kernels write, each read back right after it runs
  // (executor_trace.cpp): for `kiln check`, which compares them with another
  // backend's or with the reference implementation's values.
  struct KernelOutput {
    std::string kernel;
    std::vector<std::string> nodes;  // the fused nodes, producer first
    graph::ValueId value = -1;       // in planned_graph(): the last node's first output
    Tensor tensor;
  };
  std::vector<KernelOutput> trace(const std::vector<Tensor>& inputs);

  RunStats stats() const;
  // Returns once this model's background tuning (max-autotune, tune=background)
  // has finished, having switched to the tuned plan; at once without one.
  void wait_for_tuning();
  const Model& model() const { return model_; }
  const Options& options() const { return options_; }
  std::string explain() const;
  // How many nodes of each op run on the backend vs on the host, and why.
  std::string ops_per_backend() const;
  // The fusion groups as text: each kernel and the nodes fused into it, in
  // execution order, and a summary (nodes -> kernels).
  std::string fusion_groups() const;

  // Whether prepare() or a call has planned (and, compiled, compiled) the model.
  // (Lock-free: a shape-set lookup must not wait for a running call.)
  bool prepared() const { return prepared_.load(); }
  // The prepared plan (nullptr before prepare() or the first call).
  const compiler::Plan* plan() const { return plan_.get(); }
  // The plan as of now, safe while calls run on other threads (one may
  // switch to a plan tuned in the background).
  std::shared_ptr<const compiler::Plan> current_plan() const {
    std::lock_guard lock(plan_mutex_);
    return plan_;
  }
  // The graph breaks of the prepared plan, in execution order.
  const std::vector<GraphBreak>& graph_breaks() const { return prepared_plan().breaks; }
  // The memory plan's inputs and result, for tests ("no two live tensors
  // share memory").
  const std::vector<compiler::Lifetime>& lifetimes() const { return prepared_plan().storage.lifetimes; }
  const compiler::MemoryPlan& memory_plan() const { return prepared_plan().storage.memory_plan; }

  // Where a value lives on the device: its buffer (identity only), offset and
  // size; nullopt when it has no device storage (fused away, dynamic).
  struct Placement {
    const void* buffer = nullptr;
    std::uint64_t offset = 0;
    std::uint64_t bytes = 0;
  };
  std::optional<Placement> placement(graph::ValueId value) const;
  // The value whose memory `value` views (itself unless it is a view).
  graph::ValueId storage_root(graph::ValueId value) const {
    return prepared_plan().root.at(static_cast<std::size_t>(value));
  }
  // The graph the plan runs (after passes in compiled mode).
  const graph::Graph& planned_graph() const { return *prepared_plan().graph; }
  // Each dispatch's nodes and bound values, in execution order.
  struct DispatchInfo {
    std::vector<graph::NodeId> nodes;
    std::string kernel_name;
    std::vector<graph::ValueId> values;
  };
  std::vector<DispatchInfo> dispatches() const;

 private:
  struct Storage {
    backend::Buffer* buffer = nullptr;
    std::uint64_t offset = 0;
    std::uint64_t bytes = 0;
  };
  // A plan step bound to the device: a run of dispatches, or one host step.
  struct Segment {
    bool host = false;
    graph::NodeId host_node = graph::kNoNode;
    std::vector<const compiler::Dispatch*> dispatches;  // into plan_
    std::unique_ptr<backend::CommandList> recorded;     // replay: recorded once
  };

  struct TunedPlan;  // what a background tuning job hands over
  struct BindTimes {
    double kernels_ms = 0;
    double upload_ms = 0;
    runtime::KernelCache::LoadCounts counts;
  };

  const compiler::Plan& prepared_plan() const;
  void prepare_locked();
  // Makes stats_ what stats() returns (at the end of every call).
  void publish_stats();
  // Everything prepare() does but the warm-up: plan_ chosen, then bind().
  void plan_and_bind();
  // Binds plan_ to the device: storage and weights, kernels (unless loaded_
  // holds them), segments, recorded command lists (replay).
  BindTimes bind();
  BindTimes bind_once();
  // Forgets what binding made (segments, storage, buffers): the plan binds again from nothing.
  void drop_binding();
  // bind(), and for a plan from the plan cache whose kernels fail to build
  // or load, the entry removed and the model planned and bound again.
  BindTimes bind_or_replan();
  // The info line of a compile at new extents of a shape set (Options::extends).
  void log_new_extents(const std::vector<std::size_t>& new_kernels) const;
  // max-autotune with tune=background and sites the database lacks: queues
  // the job that tunes them and builds the tuned plan (background_tuning.h).
  void start_background_tuning();
  // At a call's start: the tuned plan, if its job handed one over, replaces
  // plan_ (rebound as the first was). Whether it did.
  bool adopt_tuned_plan();
  // Compiled mode: the plan cache's entry for this model, device and
  // settings (src/artifact/plan_cache.h), else build_plan() (then stored).
  std::shared_ptr<const compiler::Plan> cached_or_built_plan();
  // One submission dispatching each distinct kernel once (a single workgroup,
  // on its planned bindings): it writes only intermediates and outputs, which
  // every run rewrites before reading them.
  void warm_up();
  // Loads the plan's kernels; returns what this model's load did.
  runtime::KernelCache::LoadCounts load_kernels();
  void assign_storage();
  void record(const Segment& segment, backend::CommandList& list) const;
  // One dispatch bound to its values' storage (record, profile, trace);
  // `bindings` is scratch space, reused across calls.
  void record_dispatch(const compiler::Dispatch& dispatch, backend::CommandList& list,
                       std::vector<backend::BufferBinding>& bindings) const;
  void run_host_node(const Segment& segment);
  // The inputs written in place (see above) and the values stored in each.
  void find_inputs_written_in_place();
  // Binds input `i` (written in place) to `buffer`, or its planned storage when null.
  void bind_written_input(std::size_t i, backend::Buffer* buffer);
  void record_segments();
  // The count and types of the inputs, and the device of DeviceTensors.
  void check_inputs(const std::vector<CallInput>& inputs) const;
  // A call up to its outputs: checks, plans on the first call, loads the
  // inputs and runs every segment. Returns when the call started.
  std::chrono::steady_clock::time_point run_steps(const std::vector<CallInput>& inputs);
  // run_steps()'s first step: host inputs uploaded and visible to host
  // steps, device inputs copied into the inputs' storage.
  void load_inputs(const std::vector<CallInput>& inputs);
  // Every segment in order; the device time of the dispatches if measured.
  std::optional<double> run_segments();
  // The graph outputs, each in a buffer of its own (or held on the host).
  std::vector<DeviceTensor> device_outputs();
  // The value's tensor: from the host if a host step made it, else from the device.
  Tensor read_value(graph::ValueId id);
  Tensor download(graph::ValueId id);
  void upload(graph::ValueId id, const Tensor& tensor);

  Model model_;
  Options options_;
  std::shared_ptr<runtime::DeviceContext> ctx_;
  std::shared_ptr<const compiler::Plan> plan_;
  mutable std::mutex plan_mutex_;  // held where plan_ is assigned, for current_plan()
  std::vector<std::shared_ptr<backend::LoadedKernel>> loaded_;  // by plan kernel index
  std::vector<Segment> segments_;
  std::vector<Storage> storage_;  // by value id
  // Inputs written in place, by input index: the values stored in it (its
  // own, its views, the outputs written into it) with their bytes, the
  // DeviceTensor this call bound there, and the input's own storage, made at
  // the first call that gives something else (a host tensor).
  struct WrittenInput {
    std::vector<std::pair<graph::ValueId, std::uint64_t>> values;
    std::optional<DeviceTensor> bound;
    std::shared_ptr<backend::Buffer> own;
  };
  std::vector<std::optional<WrittenInput>> written_inputs_;
  std::vector<int> output_written_input_;  // by output index: the written input it is returned as, or -1
  // The buffers the replayed recordings bind for those inputs (null: planned);
  // held so that no other buffer takes one's address while they do.
  std::vector<std::shared_ptr<backend::Buffer>> recorded_bindings_;
  bool replay_ = false;  // segments replay recorded command lists
  std::vector<std::optional<Tensor>> host_values_;  // by value id: made by host steps this run
  std::unique_ptr<runtime::SubgraphModels> subgraphs_;  // control flow's subgraphs, made at their first run
  std::vector<std::shared_ptr<backend::Buffer>> buffers_;
  std::uint64_t constant_bytes_ = 0;         // weights this binding uploaded
  std::uint64_t shared_constant_bytes_ = 0;  // and those it found on the device (SharedWeights)
  std::uint64_t io_bytes_ = 0;
  std::atomic<bool> prepared_ = false;
  RunStats stats_;            // the call in progress writes it
  mutable std::mutex mutex_;  // held by every call (see above)
  // The last finished call's stats, so that stats() never waits for a call.
  RunStats published_;
  mutable std::mutex published_mutex_;
  // tune=background: the job (read by stats() under published_mutex_) and
  // where it hands its plan over (under mutex_).
  std::shared_ptr<runtime::TuningJob> tuning_job_;
  std::shared_ptr<TunedPlan> tuned_;
  // Last: destroyed first, so that pending calls finish while the executor is whole.
  runtime::CallQueue calls_;
};

using compiler::graph_break_line;

}  // namespace kiln

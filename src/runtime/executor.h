// The engine behind kiln::EagerModel and kiln::CompiledModel.
//
// prepare() turns a graph into a plan: (compiled only) graph passes; the
// kernel plan of src/fuse/schedule.h (eager: one kernel per node; compiled:
// pointwise epilogues fused into their producers, so one dispatch runs a
// fusion group of nodes), views for ops that move no data, and host steps for
// graph breaks; storage for every value that reaches memory (eager: one buffer
// per tensor, kept between calls like a caching allocator; compiled: one arena
// laid out by the static memory plan; values fused away get none); weights
// uploaded once; then (compiled only) one warm-up submission that dispatches
// every kernel once, because drivers finish work they defer to a pipeline's
// first use there (lavapipe JIT-compiles each kernel at its first dispatch:
// seconds for a model), so the first call after prepare() costs what later
// ones do. A first call without prepare() plans without the warm-up: it is the
// warm-up itself. run() uploads
// the inputs, executes the segments (recorded each call, or recorded once and
// replayed in reduce-overhead mode), and downloads the outputs.
//
// Graph breaks: a node that cannot be lowered, or that touches a dynamic
// (data-dependent) value, is a host step run on the reference implementation
// between device segments. Dynamic values live on the host only; a static
// value a host step produces is uploaded only if a kernel reads it.
#pragma once

#include <kiln/kiln.h>

#include "graph/ir.h"
#include "src/fuse/schedule.h"
#include "src/kernel/ir.h"
#include "src/runtime/device_pool.h"
#include "src/runtime/memory_plan.h"

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kiln {

class Executor {
 public:
  struct Options {
    std::string backend;
    std::string device;
    bool compiled = false;
    CompileOptions compile;  // when compiled
  };

  // A node run on the host instead of as a kernel, and why.
  struct GraphBreak {
    graph::NodeId node = graph::kNoNode;
    std::string op;
    std::string node_name;
    std::string reason;  // "output shape depends on data"
    std::string kind;    // the reason without value names, to group breaks by ("input shape depends on data")
  };

  Executor(Model model, Options options);
  ~Executor();

  // Plans, compiles and (compiled mode) warms the device up (see above); only
  // the first call does anything. Thread-compatible, not thread-safe.
  void prepare();
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  // Each dispatch alone, in execution order, median over `calls` (executor_profile.cpp).
  std::vector<KernelTiming> profile(const std::vector<Tensor>& inputs, int calls);

  const RunStats& stats() const { return stats_; }
  const Model& model() const { return model_; }
  const Options& options() const { return options_; }
  std::string explain() const;
  // How many nodes of each op run on the backend vs on the host, and why.
  std::string ops_per_backend() const;
  // The fusion groups as text: each kernel and the nodes fused into it, in
  // execution order, and a summary (nodes -> kernels).
  std::string fusion_groups() const;
  // The graph breaks of the prepared plan, in execution order.
  const std::vector<GraphBreak>& graph_breaks() const { return breaks_; }

  // The memory plan's inputs and result, for tests ("no two live tensors
  // share memory").
  const std::vector<runtime::Lifetime>& lifetimes() const { return lifetimes_; }
  const runtime::MemoryPlan& memory_plan() const { return memory_plan_; }

  // Where a value lives on the device: its buffer (identity only), offset and
  // size; nullopt when it has no device storage (fused away, dynamic).
  struct Placement {
    const void* buffer = nullptr;
    std::uint64_t offset = 0;
    std::uint64_t bytes = 0;
  };
  std::optional<Placement> placement(graph::ValueId value) const;
  // The value whose memory `value` views (itself unless it is a view).
  graph::ValueId storage_root(graph::ValueId value) const { return root_.at(static_cast<std::size_t>(value)); }
  // The graph the plan runs (after passes in compiled mode).
  const graph::Graph& planned_graph() const { return *graph_; }
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
  // One kernel launch: a fusion group of nodes (one node in eager mode).
  struct Dispatch {
    std::vector<graph::NodeId> nodes;  // in execution order; the first is the producer
    std::shared_ptr<backend::LoadedKernel> kernel;
    std::string kernel_name;
    std::array<std::uint32_t, 3> grid{};
    std::vector<graph::ValueId> values;  // bindings, in kernel buffer order
    std::vector<std::int32_t> params;    // the kernel's per-dispatch parameters
  };
  struct Segment {
    bool host = false;           // a graph break run on the reference implementation
    graph::NodeId host_node = graph::kNoNode;
    std::vector<Dispatch> dispatches;
    std::unique_ptr<backend::CommandList> recorded;  // reduce-overhead: recorded once
  };

  // Everything prepare() does but the warm-up.
  void plan();
  // One submission dispatching each distinct kernel once (a single workgroup,
  // on its planned bindings): it writes only intermediates and outputs, which
  // every run rewrites before reading them.
  void warm_up();
  void lower_graph();
  // Differing literals of same-structure kernels -> per-dispatch parameters
  // (src/kernel/parameterise.h), unless KILN_NO_PARAMETERISE=1. Returns, per
  // kernel, the first kernel that renders the same source (itself if none).
  std::vector<std::size_t> parameterise_kernels(std::span<kir::Kernel* const> kernels) const;
  void assign_storage();
  void record(Segment& segment, backend::CommandList& list) const;
  void run_host_node(const Segment& segment);
  void check_inputs(const std::vector<Tensor>& inputs) const;
  // run()'s first step: the inputs uploaded and visible to host steps.
  void load_inputs(const std::vector<Tensor>& inputs);
  // The value's tensor: from the host if a host step made it, else from the device.
  Tensor read_value(graph::ValueId id) const;
  Tensor download(graph::ValueId id) const;
  void upload(graph::ValueId id, const Tensor& tensor);

  Model model_;
  Options options_;
  std::shared_ptr<runtime::DeviceContext> ctx_;
  std::shared_ptr<const graph::Graph> graph_;  // after passes
  std::vector<std::string> pass_log_;
  std::vector<Segment> segments_;
  std::vector<graph::ValueId> root_;  // storage owner of each value (views share it)
  std::vector<Storage> storage_;      // by value id
  std::vector<GraphBreak> breaks_;
  std::vector<bool> fused_away_;      // by value id: never reaches memory
  int kernel_nodes_ = 0;              // nodes lowered to kernels, before fusion
  std::vector<bool> read_by_kernel_;  // by root value id: some dispatch binds it
  std::vector<std::optional<Tensor>> host_values_;  // by value id: made by host steps this run
  std::vector<std::shared_ptr<backend::Buffer>> buffers_;
  std::vector<runtime::Lifetime> lifetimes_;
  runtime::MemoryPlan memory_plan_;
  std::uint64_t constant_bytes_ = 0;
  std::uint64_t io_bytes_ = 0;
  bool prepared_ = false;
  RunStats stats_;
};

// "graph break: NonZero 'postprocess.nonzero': output shape depends on data"
std::string graph_break_line(const Executor::GraphBreak& b);

}  // namespace kiln

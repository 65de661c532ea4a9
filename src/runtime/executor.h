// The engine behind kiln::EagerModel and kiln::CompiledModel.
//
// prepare() turns a graph into a Plan: (compiled only) graph passes; one
// lowered kernel per node (or a view for ops that move no data, or a host
// step for a graph break); storage for every value (eager: one buffer per
// tensor, kept between calls like a caching allocator; compiled: one arena
// laid out by the static memory plan); weights uploaded once. run() uploads
// the inputs, executes the segments (recorded each call, or recorded once and
// replayed in reduce-overhead mode), and downloads the outputs.
#pragma once

#include <kiln/kiln.h>

#include "graph/ir.h"
#include "src/kernel/ir.h"
#include "src/runtime/device_pool.h"
#include "src/runtime/memory_plan.h"

#include <chrono>
#include <memory>
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

  Executor(Model model, Options options);
  ~Executor();

  // Compiles (first call only). Thread-compatible, not thread-safe.
  void prepare();
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);

  const RunStats& stats() const { return stats_; }
  const Model& model() const { return model_; }
  const Options& options() const { return options_; }
  std::string explain() const;

  // The memory plan's inputs and result, for tests ("no two live tensors
  // share memory").
  const std::vector<runtime::Lifetime>& lifetimes() const { return lifetimes_; }
  const runtime::MemoryPlan& memory_plan() const { return memory_plan_; }

 private:
  struct Storage {
    backend::Buffer* buffer = nullptr;
    std::uint64_t offset = 0;
    std::uint64_t bytes = 0;
  };
  struct Dispatch {
    graph::NodeId node;
    std::shared_ptr<backend::LoadedKernel> kernel;
    std::string kernel_name;
    std::array<std::uint32_t, 3> grid{};
    std::vector<graph::ValueId> values;  // bindings, in kernel buffer order
  };
  struct Segment {
    bool host = false;           // a graph break run on the reference implementation
    graph::NodeId host_node = graph::kNoNode;
    std::vector<Dispatch> dispatches;
    std::unique_ptr<backend::CommandList> recorded;  // reduce-overhead: recorded once
  };

  void lower_graph();
  void assign_storage();
  void record(Segment& segment, backend::CommandList& list) const;
  void run_host_node(const Segment& segment);
  void check_inputs(const std::vector<Tensor>& inputs) const;
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
  std::vector<std::shared_ptr<backend::Buffer>> buffers_;
  std::vector<runtime::Lifetime> lifetimes_;
  runtime::MemoryPlan memory_plan_;
  std::uint64_t constant_bytes_ = 0;
  std::uint64_t io_bytes_ = 0;
  bool prepared_ = false;
  RunStats stats_;
};

}  // namespace kiln

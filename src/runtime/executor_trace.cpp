// Executor::trace: one call run dispatch by dispatch, each dispatch's output
// read back before the next runs (later dispatches may reuse its memory).
#include "src/runtime/executor.h"

namespace kiln {

std::vector<Executor::KernelOutput> Executor::trace(const std::vector<Tensor>& inputs) {
  const std::vector<CallInput> arguments(inputs.begin(), inputs.end());
  std::lock_guard lock(mutex_);
  check_inputs(arguments);
  prepare_locked();
  load_inputs(arguments);

  const graph::Graph& g = *plan_->graph;
  std::vector<KernelOutput> outputs;
  std::vector<backend::BufferBinding> bindings;
  for (Segment& segment : segments_) {
    if (segment.host) {
      run_host_node(segment);
      continue;
    }
    for (std::size_t i = 0; i < segment.dispatches.size(); ++i) {
      const compiler::Dispatch* d = segment.dispatches[i];
      std::unique_ptr<backend::CommandList> list = ctx_->device->create_command_list();
      record_dispatch(*d, *list, bindings);
      list->finish();
      list->submit();
      // A node run as several dispatches (split-K's partial sums, then their
      // reduction) has its output only after the last of them.
      const graph::NodeId last = d->nodes.back();
      if (i + 1 < segment.dispatches.size() && segment.dispatches[i + 1]->nodes.back() == last) continue;
      KernelOutput out;
      out.kernel = d->kernel_name;
      for (graph::NodeId n : d->nodes) out.nodes.push_back(g.node(n).name);
      out.value = g.node(last).outputs[0];
      out.tensor = read_value(out.value);
      outputs.push_back(std::move(out));
    }
  }
  host_values_.clear();
  publish_stats();
  return outputs;
}

}  // namespace kiln

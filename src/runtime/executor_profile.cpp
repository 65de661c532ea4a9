// Executor::profile: where a call's time goes, one dispatch at a time.
//
// Each call of the profile runs the plan as run() does (host steps included,
// so every kernel reads the data it would read in a real call), but submits
// every dispatch in its own command list and reads its time: device time from
// the list's timestamps when the device has them, else the host wall time of
// the submit (which then includes the submit's own overhead).
#include "src/base/check.h"
#include "src/runtime/executor.h"

#include <algorithm>
#include <chrono>

namespace kiln {
namespace {

double median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  return n % 2 == 1 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
}

}  // namespace

std::vector<KernelTiming> Executor::profile(const std::vector<Tensor>& inputs, int calls) {
  KILN_CHECK(calls > 0, ErrorKind::InvalidArgument, "profile needs at least one call, got " + std::to_string(calls));
  const std::vector<CallInput> arguments(inputs.begin(), inputs.end());
  std::lock_guard lock(mutex_);
  check_inputs(arguments);
  prepare_locked();

  const graph::Graph& g = *plan_->graph;
  std::vector<KernelTiming> timings;
  for (const Segment& segment : segments_) {
    for (const compiler::Dispatch* d : segment.dispatches) {
      KernelTiming t;
      t.kernel = d->kernel_name;
      for (graph::NodeId n : d->nodes) t.nodes.push_back(g.node(n).name);
      // The group's last node writes what the dispatch leaves in memory.
      t.output = graph::type_str(g.value(g.node(d->nodes.back()).outputs[0]).type);
      timings.push_back(std::move(t));
    }
  }
  std::vector<std::vector<double>> samples(timings.size());
  bool all_device_time = true;

  std::vector<backend::BufferBinding> bindings;
  for (int call = 0; call < calls; ++call) {
    load_inputs(arguments);
    std::size_t index = 0;
    for (Segment& segment : segments_) {
      if (segment.host) {
        run_host_node(segment);
        continue;
      }
      for (const compiler::Dispatch* d : segment.dispatches) {
        std::unique_ptr<backend::CommandList> list = ctx_->device->create_command_list();
        record_dispatch(*d, *list, bindings);
        list->finish();
        const auto start = std::chrono::steady_clock::now();
        list->submit();
        const double host_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        const std::optional<double> device_ms = list->last_device_ms();
        if (!device_ms) all_device_time = false;
        samples[index++].push_back(device_ms.value_or(host_ms));
      }
    }
    host_values_.clear();
  }

  for (std::size_t i = 0; i < timings.size(); ++i) {
    timings[i].ms = median(samples[i]);
    timings[i].device_time = all_device_time;
  }
  publish_stats();  // a first call's compile figures
  return timings;
}

}  // namespace kiln

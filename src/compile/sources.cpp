#include "src/compile/sources.h"

#include "backends/registry.h"
#include "src/compile/plan.h"
#include "src/render/cstyle.h"
#include "graph/model_access.h"

#include <kiln/error.h>

#include <cstdio>
#include <memory>
#include <string>

namespace kiln::compiler {
namespace {


backend::TargetDesc plan_target(const backend::Backend& b) {
  if (!b.unavailable_reason()) {
    const std::vector<backend::DeviceInfo> devices = b.enumerate_devices();
    if (!devices.empty()) return devices.front().target;
  }
  const std::vector<backend::TargetDesc> offline = b.offline_targets();
  if (!offline.empty()) return offline.front();
  backend::TargetDesc generic;
  generic.backend = b.name();
  generic.device_name = "generic " + b.name() + " target";
  return generic;
}

}  // namespace

std::shared_ptr<const Plan> plan_from_records(const Model& model, const backend::Backend& b,
                                              const backend::TargetDesc& target, const Settings& settings,
                                              const std::string& cache_dir) {
  PlanRequest request{.model_name = model.name(), .compiled = true, .fullgraph = false, .settings = settings};
  tune::AutotuneOptions options;
  options.database_path = tune::database_path(settings, cache_dir);
  options.tune_missing = false;
  auto tuner = std::make_shared<tune::Autotuner>(target, std::move(options));
  if (settings.flag("autotune"))
    request.graph_chooser = [tuner](const graph::passes::GraphChoice& choice) { return tuner->choose(choice); };
  request.autotune = [tuner](const graph::Graph& passed, const lower::LowerTarget& lower_target) {
    return tuner->finish(passed, lower_target);
  };
  return build_plan(kiln::internal::graph_ptr(model), b, target, request);
}

KernelSources generate_sources(const Model& model, const std::string& backend_name, const Settings& settings) {
  const backend::Backend& b = backend::get_backend(backend_name);
  const backend::TargetDesc target = plan_target(b);
  const std::shared_ptr<const compiler::Plan> plan = plan_from_records(model, b, target, settings, "");
  const graph::Graph& g = *plan->graph;

  KernelSources out;
  out.backend = b.name();
  out.language = b.language().name;
  out.target = target.device_name.empty() ? target.arch : target.device_name;
  std::vector<std::string> rendered(plan->kernels.size());
  int index = 0;
  for (const compiler::Step& step : plan->steps) {
    if (step.host) {
      const graph::Node& node = g.node(step.host_node);
      std::string reason;
      for (const compiler::GraphBreak& br : plan->breaks)
        if (br.node == node.id) reason = br.reason;
      out.host_steps.push_back(node.name + " (" + node.op + "): " + reason);
      continue;
    }
    const compiler::Dispatch& d = *step.dispatch;
    KernelSourceFile file;
    file.kernel_name = d.kernel_name;
    char number[16];
    std::snprintf(number, sizeof number, "%03d_", index++);
    file.file_name = number + file.kernel_name + b.language().file_extension;
    for (graph::NodeId id : d.nodes) file.nodes.emplace_back(g.node(id).name, g.node(id).op);
    // Dispatches that share a kernel share its source (rendered once).
    if (rendered[d.kernel].empty()) rendered[d.kernel] = render::render(plan->kernels[d.kernel], b.language_for(plan->target));
    file.source = rendered[d.kernel];
    out.kernels.push_back(std::move(file));
  }
  return out;
}

std::vector<std::string> source_backends() {
  std::vector<std::string> names;
  for (const backend::Backend* b : backend::all_backends()) names.push_back(b->name());
  return names;
}

}  // namespace kiln::compiler

namespace kiln {

std::vector<std::string> source_targets() {
  std::vector<std::string> names;
  for (const backend::Backend* b : backend::all_backends())
    if (const std::string target = b->source_target(); !target.empty()) names.push_back(target);
  return names;
}

KernelSources kernel_sources(const Model& model, const std::string& target, const Settings& settings) {
  for (const backend::Backend* b : backend::all_backends())
    if (b->source_target() == target) return compiler::generate_sources(model, b->name(), settings);
  std::string known;
  for (const std::string& name : source_targets()) known += (known.empty() ? "" : ", ") + name;
  throw_error(ErrorKind::NotFound, "no kernel source target '" + target + "' (built in: " + known + ")");
}

}  // namespace kiln

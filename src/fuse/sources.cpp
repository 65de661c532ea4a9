#include "src/fuse/sources.h"

#include "backends/registry.h"
#include "graph/passes/passes.h"
#include "src/fuse/schedule.h"
#include "src/render/cstyle.h"

#include <kiln/error.h>

#include <cstdio>

namespace kiln::fuse {
namespace {

// A file extension editors and compilers recognise for each language.
std::string extension(const std::string& language) {
  if (language == "glsl") return ".comp";
  if (language == "cuda") return ".cu";
  if (language == "hip") return ".hip";
  if (language == "c99") return ".c";
  return "." + language;
}

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

BackendSources generate_sources(const Model& model, const std::string& backend_name) {
  const backend::Backend& b = backend::get_backend(backend_name);
  const backend::TargetDesc target = plan_target(b);
  const graph::Graph g = graph::passes::run_compile_passes(model.graph()).graph;

  PlanOptions options;
  options.fuse = true;
  options.target = lower_target(target);
  options.max_kernel_buffers = target.max_kernel_buffers;
  options.kernel_unsupported = [&](const kir::Kernel& kernel) -> std::optional<std::string> {
    backend::KernelRequirements needs;
    needs.kernel_name = kernel.name;
    needs.workgroup_size = kernel.workgroup_size;
    needs.num_buffers = static_cast<std::uint32_t>(kernel.buffers.size());
    needs.shared_memory_bytes = kir::shared_memory_bytes(kernel);
    return b.supports(needs, target);
  };
  const KernelPlan plan = plan_kernels(g, options);

  BackendSources out;
  out.backend = b.name();
  out.language = b.language().name;
  out.target = target.device_name.empty() ? target.arch : target.device_name;
  int index = 0;
  for (const PlanStep& step : plan.steps) {
    if (step.host) {
      const graph::Node& node = g.node(step.nodes[0]);
      out.host_steps.push_back(node.name + " (" + node.op + "): " + step.host_reason);
      continue;
    }
    KernelSourceFile file;
    file.kernel_name = step.kernel->kernel.name;
    char number[16];
    std::snprintf(number, sizeof number, "%03d_", index++);
    file.file_name = number + file.kernel_name + extension(out.language);
    for (graph::NodeId id : step.nodes) file.nodes.emplace_back(g.node(id).name, g.node(id).op);
    file.source = render::render(step.kernel->kernel, b.language());
    out.kernels.push_back(std::move(file));
  }
  return out;
}

std::vector<std::string> source_backends() {
  std::vector<std::string> names;
  for (const backend::Backend* b : backend::all_backends()) names.push_back(b->name());
  return names;
}

}  // namespace kiln::fuse

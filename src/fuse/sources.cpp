#include "src/fuse/sources.h"

#include "backends/registry.h"
#include "graph/passes/passes.h"
#include "src/fuse/schedule.h"
#include "src/render/cstyle.h"

#include <kiln/error.h>

#include <cstdio>
#include <cstdlib>
#include <string>

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

// As the graph passes' KILN_NO_* switches: set and not "0" means on.
bool switched_on(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' && std::string(value) != "0";
}

}  // namespace

kir::ParameteriseReport parameterise_for_target(std::span<kir::Kernel* const> kernels,
                                                const backend::TargetDesc& target) {
  // KILN_NO_PARAMETERISE=1 keeps every shape baked in, for A/B measurements.
  if (switched_on("KILN_NO_PARAMETERISE")) return {};
  constexpr std::uint32_t kParamBytes = sizeof(std::int32_t);
  constexpr std::uint32_t kUnstatedLimitBytes = 128;  // what every Vulkan device offers
  const std::uint32_t limit = target.max_kernel_param_bytes;
  kir::ParameteriseOptions options;
  options.max_params = (limit != 0 ? limit : kUnstatedLimitBytes) / kParamBytes;
  // Loop bounds as parameters: fewer kernels (faster cold compiles) for
  // loops whose trip count the driver does not know (ParameteriseOptions::
  // loop_bounds). Worth it where the driver's compiler is the cost of a cold
  // compile: on a CPU device (lavapipe's LLVM: ResNet-50 compiles 6.6 -> 4.4 s
  // cold, ConvNeXt-T 6.7 -> 4.2 s; 1x1 GEMM device time 0-4% longer, ConvNeXt's
  // packed MatMuls 4-9%). GPU drivers compile a kernel in tens of
  // milliseconds, so there the bounds stay constants.
  const char* loop_bounds = std::getenv("KILN_PARAMETERISE_LOOP_BOUNDS");
  options.loop_bounds = loop_bounds != nullptr && *loop_bounds != '\0' ? switched_on("KILN_PARAMETERISE_LOOP_BOUNDS")
                                                                       : target.device_type == "cpu";
  return kir::parameterise(kernels, options);
}

BackendSources generate_sources(const Model& model, const std::string& backend_name) {
  const backend::Backend& b = backend::get_backend(backend_name);
  const backend::TargetDesc target = plan_target(b);
  const graph::Graph g =
      graph::passes::run_compile_passes(model.graph(), {.cpu_device = target.device_type == "cpu"}).graph;

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
  KernelPlan plan = plan_kernels(g, options);
  std::vector<kir::Kernel*> kernels;
  for (PlanStep& step : plan.steps)
    if (!step.host) kernels.push_back(&step.kernel->kernel);
  parameterise_for_target(kernels, target);

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

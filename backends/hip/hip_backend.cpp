// The HIP backend: hiprtc code generation for AMD GPUs (works without a GPU),
// and the CUDA-style runtime (backends/cuda_style) over the HIP runtime API,
// both through libraries opened at run time. What differs from CUDA is here.
#include "backends/hip/hip_backend.h"

#include "backends/cuda_style/backend.h"
#include "backends/hip/compiler.h"
#include "backends/hip/device_table.h"
#include "backends/hip/language.h"
#include "backends/hip/runtime.h"

namespace kiln::backend {
namespace {

// A code object runs on its own architecture only.
std::optional<std::string> code_object_refusal(const TargetDesc& planned, const TargetDesc& device,
                                               const std::set<std::string>&) {
  if (planned.arch == device.arch) return std::nullopt;
  return "its code objects are for " + planned.arch + ", the device is " + device.arch;
}

}  // namespace

std::unique_ptr<Backend> create_hip_backend() {
  static const hip::HiprtcCompiler compiler;
  return cuda_style::make_backend({
      .name = "hip",
      .compiler = &compiler,
      .probe = &hip::probe_runtime,
      .device_table = &hip::device_table,
      .language = &hip_language,
      .offline_targets = &hip::offline_targets,
      .compile_target = {},  // a device's own architecture
      .binary_targets = {},  // a plan's code objects alone
      .foreign_plan_refusal = &code_object_refusal,
  });
}

}  // namespace kiln::backend

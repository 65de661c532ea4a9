// The CUDA backend: NVRTC code generation (works without a GPU), and the
// CUDA-style runtime (backends/cuda_style) over the driver API, both through
// libraries opened at run time. What differs from HIP is here.
#include "backends/cuda/cuda_backend.h"

#include "backends/cuda/compiler.h"
#include "backends/cuda/device_table.h"
#include "backends/cuda/driver.h"
#include "backends/cuda/language.h"
#include "backends/cuda/nvrtc_library.h"
#include "backends/cuda_style/backend.h"

#include <algorithm>

namespace kiln::backend {
namespace {

// What kernels for a device are compiled to: CUBIN for its own architecture
// when NVRTC knows it, else PTX for the newest architecture NVRTC knows below
// it (the driver compiles that for the device when loading). Unchanged when
// NVRTC is missing or knows nothing old enough: compiling then says why.
TargetDesc with_compile_arch(TargetDesc target) {
  const cuda::NvrtcLibrary& nvrtc = cuda::nvrtc_library();
  if (!nvrtc.loaded() || !target.arch.starts_with("sm_")) return target;
  const int capability = std::stoi(target.arch.substr(3));
  const auto& archs = nvrtc.supported_archs;
  if (std::find(archs.begin(), archs.end(), capability) != archs.end()) return target;
  int below = 0;
  for (int arch : archs)
    if (arch <= capability) below = std::max(below, arch);
  if (below > 0) target.arch = "compute_" + std::to_string(below);
  return target;
}

// A compiled-model file carries the CUBIN of an sm_ architecture and PTX for
// the same compute capability, which newer GPUs JIT.
std::vector<TargetDesc> cubin_and_ptx(const TargetDesc& target) {
  std::vector<TargetDesc> targets = {target};
  if (target.arch.starts_with("sm_")) {
    TargetDesc ptx = target;
    ptx.arch = "compute_" + target.arch.substr(3);
    targets.push_back(ptx);
  }
  return targets;
}

// A CUBIN runs only on its own architecture; PTX on that compute capability
// and newer (a plan made on a device carries both).
std::optional<std::string> cubin_refusal(const TargetDesc& planned, const TargetDesc& device,
                                         const std::set<std::string>& formats) {
  if (device.offline || !planned.offline || planned.arch == device.arch || formats.contains("ptx"))
    return std::nullopt;
  return "its CUBIN is for " + planned.arch + ", the device is " + device.arch;
}

}  // namespace

std::unique_ptr<Backend> create_cuda_backend() {
  static const cuda::NvrtcCompiler compiler;
  return cuda_style::make_backend({
      .name = "cuda",
      .compiler = &compiler,
      .probe = &cuda::probe_driver,
      .device_table = &cuda::device_table,
      .language = &cuda_language,
      .offline_targets = &cuda::offline_targets,
      .compile_target = &with_compile_arch,
      .binary_targets = &cubin_and_ptx,
      .foreign_plan_refusal = &cubin_refusal,
  });
}

}  // namespace kiln::backend

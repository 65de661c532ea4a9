// The CUDA backend: NVRTC code generation (works without a GPU), and the
// CUDA-style runtime (backends/cuda_style) over the driver API, both through
// libraries opened at run time.
#include "backends/cuda/cuda_backend.h"

#include "backends/cuda/compiler.h"
#include "backends/cuda/device_table.h"
#include "backends/cuda/driver.h"
#include "backends/cuda/language.h"
#include "backends/cuda/nvrtc_library.h"
#include "backends/cuda_style/device.h"

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

class CudaBackend final : public Backend {
 public:
  std::string name() const override { return "cuda"; }

  // Running needs both NVRTC and the driver: a machine with a driver but no
  // toolkit (the usual case) reports NVRTC, one with neither reports both.
  std::optional<std::string> unavailable_reason() const override {
    std::optional<std::string> compiler = compiler_.unavailable_reason();
    const std::optional<std::string>& driver = cuda::probe_driver().unavailable_reason;
    if (compiler && driver) return *compiler + "; " + *driver;
    return compiler ? compiler : driver;
  }

  std::vector<DeviceInfo> enumerate_devices() const override {
    std::vector<DeviceInfo> devices;
    const auto& targets = cuda::probe_driver().devices;
    for (std::size_t index = 0; index < targets.size(); ++index)
      devices.push_back(DeviceInfo{static_cast<int>(index), with_compile_arch(targets[index])});
    return devices;
  }

  std::shared_ptr<Device> create_device(int index) const override {
    if (auto reason = unavailable_reason()) throw_error(ErrorKind::DeviceUnavailable, "cuda: " + *reason);
    const cuda::DriverProbe& probe = cuda::probe_driver();
    KILN_CHECK(index >= 0 && static_cast<std::size_t>(index) < probe.devices.size(), ErrorKind::NotFound,
               "cuda: no device " + std::to_string(index) + " (" + std::to_string(probe.devices.size()) +
                   " found)");
    return cuda_style::create_device(cuda::device_table(), index, with_compile_arch(probe.devices[index]));
  }

  const LanguageTable& language() const override { return cuda_language(); }
  const KernelCompiler& compiler() const override { return compiler_; }
  std::vector<TargetDesc> offline_targets() const override { return cuda::offline_targets(); }
  // A compiled-model file carries the CUBIN of an sm_ architecture and PTX
  // for the same compute capability, which newer GPUs JIT.
  std::vector<TargetDesc> binary_targets(const TargetDesc& target) const override {
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
  std::optional<std::string> foreign_plan_refusal(const TargetDesc& planned, const TargetDesc& device,
                                                  const std::set<std::string>& formats) const override {
    if (device.offline || !planned.offline || planned.arch == device.arch || formats.contains("ptx"))
      return std::nullopt;
    return "its CUBIN is for " + planned.arch + ", the device is " + device.arch;
  }

 private:
  cuda::NvrtcCompiler compiler_;
};

}  // namespace

std::unique_ptr<Backend> create_cuda_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace kiln::backend

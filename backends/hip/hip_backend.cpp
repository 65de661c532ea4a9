// The HIP backend: hiprtc code generation for AMD GPUs (works without a GPU),
// and the CUDA-style runtime (backends/cuda_style) over the HIP runtime API,
// both through libraries opened at run time.
#include "backends/hip/hip_backend.h"

#include "backends/cuda_style/device.h"
#include "backends/hip/compiler.h"
#include "backends/hip/device_table.h"
#include "backends/hip/language.h"
#include "backends/hip/runtime.h"

namespace kiln::backend {
namespace {

class HipBackend final : public Backend {
 public:
  std::string name() const override { return "hip"; }

  // Running needs both hiprtc and the runtime; without either, each missing
  // one is named.
  std::optional<std::string> unavailable_reason() const override {
    std::optional<std::string> compiler = compiler_.unavailable_reason();
    const std::optional<std::string>& runtime = hip::probe_runtime().unavailable_reason;
    if (compiler && runtime) return *compiler + "; " + *runtime;
    return compiler ? compiler : runtime;
  }

  std::vector<DeviceInfo> enumerate_devices() const override {
    std::vector<DeviceInfo> devices;
    const auto& targets = hip::probe_runtime().devices;
    for (std::size_t index = 0; index < targets.size(); ++index)
      devices.push_back(DeviceInfo{static_cast<int>(index), targets[index]});
    return devices;
  }

  std::shared_ptr<Device> create_device(int index) const override {
    if (auto reason = unavailable_reason()) throw_error(ErrorKind::DeviceUnavailable, "hip: " + *reason);
    const hip::RuntimeProbe& probe = hip::probe_runtime();
    KILN_CHECK(index >= 0 && static_cast<std::size_t>(index) < probe.devices.size(), ErrorKind::NotFound,
               "hip: no device " + std::to_string(index) + " (" + std::to_string(probe.devices.size()) +
                   " found)");
    return cuda_style::create_device(hip::device_table(), index, probe.devices[index]);
  }

  const LanguageTable& language() const override { return hip_language(); }
  const KernelCompiler& compiler() const override { return compiler_; }
  std::vector<TargetDesc> offline_targets() const override { return hip::offline_targets(); }
  // A code object runs on its own architecture only.
  std::optional<std::string> foreign_plan_refusal(const TargetDesc& planned, const TargetDesc& device,
                                                  const std::set<std::string>&) const override {
    if (planned.arch == device.arch) return std::nullopt;
    return "its code objects are for " + planned.arch + ", the device is " + device.arch;
  }

 private:
  hip::HiprtcCompiler compiler_;
};

}  // namespace

std::unique_ptr<Backend> create_hip_backend() { return std::make_unique<HipBackend>(); }

}  // namespace kiln::backend

// The CUDA backend: NVRTC code generation (works without a GPU) and driver
// probing, both through libraries opened at run time. Running kernels on CUDA
// devices is not implemented yet.
#include "backends/cuda/cuda_backend.h"

#include "backends/cuda/compiler.h"
#include "backends/cuda/driver.h"
#include "backends/cuda/language.h"

namespace kiln::backend {
namespace {

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
      devices.push_back(DeviceInfo{static_cast<int>(index), targets[index]});
    return devices;
  }

  std::shared_ptr<Device> create_device(int index) const override {
    if (auto reason = unavailable_reason()) throw_error(ErrorKind::DeviceUnavailable, "cuda: " + *reason);
    const cuda::DriverProbe& probe = cuda::probe_driver();
    KILN_CHECK(index >= 0 && static_cast<std::size_t>(index) < probe.devices.size(), ErrorKind::NotFound,
               "cuda: no device " + std::to_string(index) + " (" + std::to_string(probe.devices.size()) +
                   " found)");
    throw_error(ErrorKind::Unsupported, "cuda: running kernels on " + probe.devices[index].device_name +
                                            " is not implemented yet; code generation (" + compiler_.version() +
                                            ") is, see offline_targets()");
  }

  const LanguageTable& language() const override { return cuda_language(); }
  const KernelCompiler& compiler() const override { return compiler_; }
  std::vector<TargetDesc> offline_targets() const override { return cuda::offline_targets(); }

 private:
  cuda::NvrtcCompiler compiler_;
};

}  // namespace

std::unique_ptr<Backend> create_cuda_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace kiln::backend

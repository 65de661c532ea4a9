// The cpu backend: kiln's second executing backend, runnable wherever kiln
// builds. Kernels are rendered as C (language.cpp), compiled by the system C
// compiler into shared objects (compiler.cpp), loaded with dlopen and run on
// the host's threads (device.cpp, workers.cpp). It is a correctness backend
// first: a compiler independent of the GPU drivers' that must agree with
// them on every kernel; speed is not its purpose.
#include "backends/cpu/cpu_backend.h"

#include "backends/cpu/compiler.h"
#include "backends/cpu/device.h"
#include "backends/cpu/language.h"
#include "src/base/check.h"

#include <algorithm>
#include <thread>

namespace kiln::backend {
namespace {

unsigned host_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }

  std::optional<std::string> unavailable_reason() const override { return compiler_.unavailable_reason(); }

  std::vector<DeviceInfo> enumerate_devices() const override {
    if (unavailable_reason()) return {};
    return {DeviceInfo{0, cpu::host_target(compiler_.version(), host_threads())}};
  }

  std::shared_ptr<Device> create_device(int index) const override {
    if (auto reason = unavailable_reason()) throw_error(ErrorKind::DeviceUnavailable, "cpu: " + *reason);
    KILN_CHECK(index == 0, ErrorKind::NotFound,
               "the cpu backend has one device (0), not " + std::to_string(index));
    return cpu::create_host_device(cpu::host_target(compiler_.version(), host_threads()), host_threads());
  }

  const LanguageTable& language() const override { return cpu::cpu_language(); }
  // The null backend's C99 with the host's barrier: `kiln dump --target c`.
  std::string source_target() const override { return ""; }
  const KernelCompiler& compiler() const override { return compiler_; }

  // The host is the one target; compiling for it needs only the C compiler.
  std::vector<TargetDesc> offline_targets() const override {
    if (unavailable_reason()) return {};
    return {cpu::host_target(compiler_.version(), host_threads())};
  }

 private:
  cpu::CCompiler compiler_;
};

}  // namespace

std::unique_ptr<Backend> create_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace kiln::backend

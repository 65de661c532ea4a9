#include "backends/cuda_style/backend.h"

#include "backends/cuda_style/device.h"
#include "src/base/check.h"

namespace kiln::backend::cuda_style {
namespace {

class StyleBackend final : public Backend {
 public:
  explicit StyleBackend(Vendor vendor) : vendor_(std::move(vendor)) {}

  std::string name() const override { return vendor_.name; }

  std::optional<std::string> unavailable_reason() const override {
    std::optional<std::string> compiler = vendor_.compiler->unavailable_reason();
    const std::optional<std::string>& runtime = vendor_.probe().unavailable_reason;
    if (compiler && runtime) return *compiler + "; " + *runtime;
    return compiler ? compiler : runtime;
  }

  std::vector<DeviceInfo> enumerate_devices() const override {
    std::vector<DeviceInfo> devices;
    const std::vector<TargetDesc>& targets = vendor_.probe().devices;
    for (std::size_t index = 0; index < targets.size(); ++index)
      devices.push_back(DeviceInfo{static_cast<int>(index), compile_target(targets[index])});
    return devices;
  }

  std::shared_ptr<Device> create_device(int index) const override {
    if (auto reason = unavailable_reason()) throw_error(ErrorKind::DeviceUnavailable, vendor_.name + ": " + *reason);
    const RuntimeProbe& probe = vendor_.probe();
    KILN_CHECK(index >= 0 && static_cast<std::size_t>(index) < probe.devices.size(), ErrorKind::NotFound,
               vendor_.name + ": no device " + std::to_string(index) + " (" + std::to_string(probe.devices.size()) +
                   " found)");
    return cuda_style::create_device(vendor_.device_table(), index, compile_target(probe.devices[index]));
  }

  const LanguageTable& language() const override { return vendor_.language(); }
  const KernelCompiler& compiler() const override { return *vendor_.compiler; }
  std::vector<TargetDesc> offline_targets() const override { return vendor_.offline_targets(); }

  std::vector<TargetDesc> binary_targets(const TargetDesc& target) const override {
    return vendor_.binary_targets ? vendor_.binary_targets(target) : Backend::binary_targets(target);
  }
  std::optional<std::string> foreign_plan_refusal(const TargetDesc& planned, const TargetDesc& device,
                                                  const std::set<std::string>& formats) const override {
    return vendor_.foreign_plan_refusal ? vendor_.foreign_plan_refusal(planned, device, formats)
                                        : Backend::foreign_plan_refusal(planned, device, formats);
  }

 private:
  TargetDesc compile_target(TargetDesc target) const {
    return vendor_.compile_target ? vendor_.compile_target(std::move(target)) : target;
  }

  Vendor vendor_;
};

}  // namespace

std::unique_ptr<Backend> make_backend(Vendor vendor) { return std::make_unique<StyleBackend>(std::move(vendor)); }

}  // namespace kiln::backend::cuda_style

// The Vulkan backend: GLSL -> SPIR-V, run through the Vulkan API.
#include "backends/vulkan/vulkan_backend.h"

#include "backends/vulkan/compiler.h"
#include "backends/vulkan/device.h"
#include "backends/vulkan/instance.h"
#include "backends/vulkan/language.h"
#include "backends/vulkan/physical_device.h"
#include "src/base/check.h"

#include <kiln/error.h>

namespace kiln::backend {
namespace {

using vulkan::Instance;
using vulkan::PhysicalDevice;

// What any Vulkan 1.1 device guarantees (the specification's minimum limits),
// for code generated without a device.
TargetDesc generic_spirv_target() {
  TargetDesc t;
  t.backend = "vulkan";
  t.device_name = "generic SPIR-V 1.3 (Vulkan 1.1 minimum limits)";
  t.device_type = "offline";
  t.offline = true;
  t.driver = "none";
  t.api_version = "Vulkan 1.1";
  t.arch = "spirv1.3";
  t.subgroup_size = 1;  // the guaranteed minimum
  t.max_workgroup_size = {128, 128, 64};
  t.max_workgroup_invocations = 128;
  t.max_workgroup_count = {65535, 65535, 65535};
  t.max_shared_memory_bytes = 16384;
  t.max_buffer_bytes = 1u << 27;
  t.device_memory_bytes = 0;  // unknown
  t.min_buffer_offset_alignment = 256;
  // The specification's minimum (4) would rule out BatchNormalization's 6
  // bindings; kiln assumes 8. A real device's TargetDesc has its own limit.
  t.max_kernel_buffers = 8;
  t.max_kernel_param_bytes = 128;  // the specification's minimum maxPushConstantsSize
  return t;
}

class VulkanBackend final : public Backend {
 public:
  std::string name() const override { return "vulkan"; }

  std::optional<std::string> unavailable_reason() const override {
    try {
      if (query_physical_devices(*Instance::shared()).empty())
        return std::string("no Vulkan 1.1 device with a compute queue");
      return std::nullopt;
    } catch (const Error& error) {
      return std::string(error.what());
    }
  }

  std::vector<DeviceInfo> enumerate_devices() const override {
    std::vector<DeviceInfo> devices;
    try {
      const std::vector<PhysicalDevice> physical = query_physical_devices(*Instance::shared());
      for (std::size_t i = 0; i < physical.size(); ++i) devices.push_back({static_cast<int>(i), physical[i].target});
    } catch (const Error&) {
      // Unavailable: no devices (unavailable_reason() says why).
    }
    return devices;
  }

  std::shared_ptr<Device> create_device(int index) const override {
    std::shared_ptr<Instance> instance;
    try {
      instance = Instance::shared();
    } catch (const Error& error) {
      throw_error(ErrorKind::DeviceUnavailable, std::string("the Vulkan backend cannot run here: ") + error.what());
    }
    std::vector<PhysicalDevice> physical = query_physical_devices(*instance);
    KILN_CHECK(index >= 0 && static_cast<std::size_t>(index) < physical.size(), ErrorKind::NotFound,
               "Vulkan device " + std::to_string(index) + " does not exist (" + std::to_string(physical.size()) +
                   " device(s) found)");
    return std::make_shared<vulkan::VulkanDevice>(std::move(instance), std::move(physical[index]), index);
  }

  const LanguageTable& language() const override { return glsl_language(); }
  const LanguageTable& language_for(const TargetDesc& target) const override {
    return glsl_language(target.f16_conversion);
  }
  const KernelCompiler& compiler() const override { return compiler_; }
  std::vector<TargetDesc> offline_targets() const override { return {generic_spirv_target()}; }
  // SPIR-V runs on any device; `vulkan:NAME` picks one of this machine's.
  bool target_spec_names_a_device() const override { return true; }

 private:
  vulkan::GlslCompiler compiler_;
};

}  // namespace

std::unique_ptr<Backend> create_vulkan_backend() { return std::make_unique<VulkanBackend>(); }

}  // namespace kiln::backend

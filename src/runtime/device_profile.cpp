#include "src/runtime/device_profile.h"

#include "src/runtime/forwarding_device.h"

#include <kiln/error.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

namespace kiln::runtime {

namespace {

// A limit of 0 states none: the profile's then applies.
template <class T> T lower(T own, T profile) { return own == 0 ? profile : std::min(own, profile); }

class ProfiledDevice final : public ForwardingDevice {
 public:
  ProfiledDevice(std::shared_ptr<backend::Device> device, backend::TargetDesc target)
      : ForwardingDevice(std::move(device)), target_(std::move(target)) {}

  const backend::TargetDesc& target() const override { return target_; }

 private:
  backend::TargetDesc target_;
};

}  // namespace

const std::vector<DeviceProfile>& device_profiles() {
  static const std::vector<DeviceProfile> profiles = {
      {.name = "android-baseline",
       .summary = "a baseline mobile (Android) GPU",
       .max_workgroup_invocations = 128,
       .max_shared_memory_bytes = 32 * 1024,
       .max_buffer_bytes = 256ull << 20,
       .max_kernel_param_bytes = 128,
       .subgroup_sizes = {16, 64}},
  };
  return profiles;
}

const DeviceProfile& device_profile(std::string_view name) {
  std::string names;
  for (const DeviceProfile& p : device_profiles()) {
    if (p.name == name) return p;
    names += (names.empty() ? "" : ", ") + p.name;
  }
  throw_error(ErrorKind::InvalidArgument,
              "device profile '" + std::string(name) + "' is not one kiln has (profiles: " + names + ")");
}

backend::TargetDesc clamped_target(const backend::TargetDesc& target, const DeviceProfile& profile) {
  backend::TargetDesc t = target;
  t.max_workgroup_invocations = lower(t.max_workgroup_invocations, profile.max_workgroup_invocations);
  for (std::uint32_t& size : t.max_workgroup_size) size = lower(size, profile.max_workgroup_invocations);
  t.max_shared_memory_bytes = lower(t.max_shared_memory_bytes, profile.max_shared_memory_bytes);
  t.max_buffer_bytes = lower(t.max_buffer_bytes, profile.max_buffer_bytes);
  t.max_kernel_param_bytes = lower(t.max_kernel_param_bytes, profile.max_kernel_param_bytes);
  t.max_texel_buffer_elements = std::min(t.max_texel_buffer_elements, t.max_buffer_bytes / sizeof(float));
  if (profile.subgroup_sizes.size() != 1) {
    // Kernels written for one size would be wrong on the profile's others.
    t.subgroup_basic = false;
    t.subgroup_broadcast = false;
  }
  // Such devices may not promise exact f16 conversions (and the
  // profile's kernels must run on all of them).
  t.f16_conversion = backend::F16Conversion::integer;
  // Mobile GPUs' matrix units (where any) are not ones kiln renders.
  t.matrix_shapes.clear();
  t.limits_profile = profile.name;
  return t;
}

std::shared_ptr<backend::Device> with_profile(std::shared_ptr<backend::Device> device, const DeviceProfile& profile) {
  backend::TargetDesc target = clamped_target(device->target(), profile);
  return std::make_shared<ProfiledDevice>(std::move(device), std::move(target));
}

const DeviceProfile* profile_from_environment() {
  static const std::optional<std::string> name = []() -> std::optional<std::string> {
    const char* value = std::getenv("KILN_DEVICE_PROFILE");
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
  }();
  if (!name) return nullptr;
  try {
    return &device_profile(*name);
  } catch (const Error& e) {
    throw_error(ErrorKind::InvalidArgument, std::string("KILN_DEVICE_PROFILE: ") + e.what());
  }
}

}  // namespace kiln::runtime

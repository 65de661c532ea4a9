// Device-limits profiles: what kiln plans for, clamped to a class of device
// it is not running on, so that a model checked here (lavapipe, a desktop
// GPU) plans only kernels such devices can run. KILN_DEVICE_PROFILE=NAME
// applies one to every device the process opens: the planner, the backend's
// supports() check and the caches (the profile is part of the target's
// fingerprint) then see the clamped limits, and `kiln devices` shows them.
//
// A profile lowers limits and never raises them; subgroup operations are
// planned only where the profile promises one subgroup size, since on
// Vulkan a kernel's subgroup assumptions must match the device's size.
#pragma once

#include "backends/backend.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

struct DeviceProfile {
  std::string name;
  std::string summary;  // for messages: what class of device it stands for
  std::uint32_t max_workgroup_invocations = 0;
  std::uint64_t max_shared_memory_bytes = 0;
  std::uint64_t max_buffer_bytes = 0;        // per storage buffer binding
  std::uint32_t max_kernel_param_bytes = 0;  // push constants
  std::vector<std::uint32_t> subgroup_sizes;  // the sizes such devices have
};

// The built-in profiles ("android-baseline": 128 invocations per workgroup,
// 32 KiB shared memory, 256 MiB per storage buffer, 128-byte push constants,
// subgroups of 16 or 64).
const std::vector<DeviceProfile>& device_profiles();
// Throws InvalidArgument naming `name` and the profiles there are.
const DeviceProfile& device_profile(std::string_view name);

// `target` within `profile`'s limits, with limits_profile set.
backend::TargetDesc clamped_target(const backend::TargetDesc& target, const DeviceProfile& profile);
// `device` as the planner sees it under `profile`: target() clamped, every
// other call passed through.
std::shared_ptr<backend::Device> with_profile(std::shared_ptr<backend::Device> device, const DeviceProfile& profile);

// The profile KILN_DEVICE_PROFILE names (read once per process), or nullptr
// when it is unset or empty. Throws InvalidArgument for an unknown name, on
// every call.
const DeviceProfile* profile_from_environment();

}  // namespace kiln::runtime

// A physical device's capabilities, read once, as kiln needs them.
#pragma once

#include "backends/backend.h"
#include "backends/vulkan/instance.h"

#include <array>
#include <cstdint>
#include <vector>

namespace kiln::backend::vulkan {

struct PhysicalDevice {
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  TargetDesc target;
  std::uint32_t api_version = 0;           // min(the device's, the instance's)
  std::uint32_t compute_queue_family = 0;  // a family with VK_QUEUE_COMPUTE_BIT
  std::uint32_t timestamp_valid_bits = 0;  // of that family; 0: no timestamps
  double timestamp_period_ns = 0;
  std::uint64_t max_allocation_bytes = 0;  // maxMemoryAllocationSize
  std::uint32_t max_bound_storage_buffers = 0;
  VkPhysicalDeviceMemoryProperties memory{};
  // What a pipeline cache's header names (VkPipelineCacheHeaderVersionOne).
  std::uint32_t vendor_id = 0;
  std::uint32_t device_id = 0;
  std::uint32_t driver_version = 0;
  std::array<std::uint8_t, VK_UUID_SIZE> pipeline_cache_uuid{};
  // Optional features kiln enables when present.
  bool shader_float16 = false;
  // Float controls (Vulkan 1.2): the RoundingModeRTE and DenormPreserve
  // execution modes for 16-bit floats.
  bool f16_rounding_rte = false;
  bool f16_denorm_preserve = false;
  bool storage_buffer_16bit = false;
  bool shader_int64 = false;
  bool storage_buffer_8bit = false;  // Vulkan 1.2's storageBuffer8BitAccess
  bool portability_subset = false;  // the device requires VK_KHR_portability_subset
  // Out-of-range accesses of a binding stay inside it (writes dropped, reads
  // in range or zero): core Vulkan, required of every device.
  bool robust_buffer_access = false;
};

// The devices kiln can use (Vulkan 1.1 or newer, with a compute queue), in
// the loader's order; DeviceInfo::index and create_device() index this list.
std::vector<PhysicalDevice> query_physical_devices(const Instance& instance);

}  // namespace kiln::backend::vulkan

// The driver's pipeline cache of one device: the VkPipelineCache every
// pipeline on it is created with, its contents for the runtime to keep, and
// the checks saved data passes before the driver sees it.
#pragma once

#include "backends/vulkan/context.h"
#include "backends/vulkan/physical_device.h"

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln::backend::vulkan {

// Why `data` is not a pipeline cache this device's driver wrote, or "" when
// its VkPipelineCacheHeaderVersionOne matches: headerSize at least the
// header's 32 bytes and within the data, version ONE, and vendorID, deviceID
// and pipelineCacheUUID equal to the device's. Drivers should ignore data
// whose header does not match, but not every driver checks all of it.
std::string check_pipeline_cache_header(std::span<const std::byte> data, const PhysicalDevice& device);

// The name of the device's cache data, unique per (vendorID, deviceID,
// driverVersion, pipelineCacheUUID): "vulkan-10005-0-...-<uuid in hex>".
std::string pipeline_cache_name(const PhysicalDevice& device);

class PipelineCache {
 public:
  // An empty cache (internally synchronised: pipelines may be created with it
  // on several threads at once).
  explicit PipelineCache(std::shared_ptr<const DeviceContext> context);

  VkPipelineCache handle() const { return cache_.get(); }

  // Checks `data` (check_pipeline_cache_header), then replaces this cache by
  // one the driver creates from it. Returns "" or why the data was refused.
  // Not thread-safe: no pipeline may be created with handle() meanwhile.
  std::string restore(std::span<const std::byte> data);

  // The cache's contents (vkGetPipelineCacheData).
  std::vector<std::byte> data() const;

 private:
  std::shared_ptr<const DeviceContext> context_;
  Owned<VkPipelineCache, &DeviceFunctions::vkDestroyPipelineCache> cache_;
};

}  // namespace kiln::backend::vulkan

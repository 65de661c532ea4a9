// Host <-> buffer copies through a staging buffer, for device memory the host
// cannot map (discrete GPUs).
#pragma once

#include "backends/vulkan/buffer.h"

#include <cstddef>
#include <memory>
#include <mutex>
#include <span>

namespace kiln::backend::vulkan {

class StagingCopier {
 public:
  explicit StagingCopier(std::shared_ptr<const DeviceContext> context);

  // Copies `data` into `buffer` at `offset`, in chunks; returns when done. Thread-safe.
  void upload(const VulkanBuffer& buffer, std::uint64_t offset, std::span<const std::byte> data);
  // Copies `buffer` from `offset` into `data`; returns when done. Thread-safe.
  void download(const VulkanBuffer& buffer, std::uint64_t offset, std::span<std::byte> data);

 private:
  enum class Direction { to_buffer, from_buffer };
  // Records and runs one copy between the staging buffer and `buffer`.
  void copy(const VulkanBuffer& buffer, std::uint64_t offset, std::uint64_t bytes, Direction direction);
  // The staging buffer, grown to hold `bytes` (at most one chunk).
  VulkanBuffer& staging_for(std::uint64_t bytes);

  std::shared_ptr<const DeviceContext> context_;
  std::mutex mutex_;
  Owned<VkCommandPool, &DeviceFunctions::vkDestroyCommandPool> pool_;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;  // freed with the pool
  Owned<VkFence, &DeviceFunctions::vkDestroyFence> fence_;
  std::unique_ptr<VulkanBuffer> staging_;
};

}  // namespace kiln::backend::vulkan

// Vulkan buffers: one VkBuffer with its own memory allocation each.
#pragma once

#include "backends/backend.h"
#include "backends/vulkan/context.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace kiln::backend::vulkan {

enum class BufferRole {
  storage,  // bound to kernels; device-local memory
  staging,  // host-visible memory for copies to and from storage buffers
};

class VulkanBuffer final : public Buffer, public std::enable_shared_from_this<VulkanBuffer> {
 public:
  // Allocates `bytes` (0 is allowed). A storage buffer is mapped for direct
  // host copies when `allow_mapping` and the device has device-local memory
  // that is host-visible, coherent and cached (lavapipe, integrated GPUs).
  // Throws Error(OutOfMemory) naming the size and the device, before calling
  // Vulkan when the size exceeds the device's limits.
  VulkanBuffer(std::shared_ptr<const DeviceContext> context, std::uint64_t bytes, BufferRole role,
               bool allow_mapping);

  std::uint64_t size() const override { return size_; }
  VkBuffer handle() const { return buffer_.get(); }
  // The persistent host mapping of the whole buffer, or nullptr when copies
  // must go through a staging buffer.
  std::byte* mapped() const { return mapped_; }
  const DeviceContext& context() const { return *context_; }

 private:
  std::shared_ptr<const DeviceContext> context_;
  std::uint64_t size_ = 0;
  Owned<VkDeviceMemory, &DeviceFunctions::vkFreeMemory> memory_;  // declared first: freed last
  Owned<VkBuffer, &DeviceFunctions::vkDestroyBuffer> buffer_;
  std::byte* mapped_ = nullptr;
};

// "96 MiB (100663296 bytes)", for messages.
std::string byte_count_text(std::uint64_t bytes);

}  // namespace kiln::backend::vulkan

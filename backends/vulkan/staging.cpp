// Host <-> buffer copies through a staging buffer.
#include "backends/vulkan/staging.h"

#include "backends/vulkan/result.h"

#include <algorithm>
#include <cstring>

namespace kiln::backend::vulkan {
namespace {

// Big enough to run at copy speed, small enough not to double a large upload's memory.
constexpr std::uint64_t kChunkBytes = 32ull << 20;

void memory_barrier(const DeviceFunctions& vk, VkCommandBuffer commands, VkPipelineStageFlags src_stages,
                    VkAccessFlags src_access, VkPipelineStageFlags dst_stages, VkAccessFlags dst_access) {
  VkMemoryBarrier barrier{};
  barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  barrier.srcAccessMask = src_access;
  barrier.dstAccessMask = dst_access;
  vk.vkCmdPipelineBarrier(commands, src_stages, dst_stages, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

}  // namespace

StagingCopier::StagingCopier(std::shared_ptr<const DeviceContext> context) : context_(std::move(context)) {
  const DeviceFunctions& vk = context_->vk();
  VkCommandPoolCreateInfo pool_info{};
  pool_info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT | VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  pool_info.queueFamilyIndex = context_->physical().compute_queue_family;
  VkCommandPool pool = VK_NULL_HANDLE;
  check_vk(vk.vkCreateCommandPool(context_->handle(), &pool_info, nullptr, &pool), "vkCreateCommandPool");
  pool_ = {context_, pool};

  VkCommandBufferAllocateInfo allocate_info{};
  allocate_info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  allocate_info.commandPool = pool;
  allocate_info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  allocate_info.commandBufferCount = 1;
  check_vk(vk.vkAllocateCommandBuffers(context_->handle(), &allocate_info, &commands_), "vkAllocateCommandBuffers");

  VkFenceCreateInfo fence_info{};
  fence_info.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  VkFence fence = VK_NULL_HANDLE;
  check_vk(vk.vkCreateFence(context_->handle(), &fence_info, nullptr, &fence), "vkCreateFence");
  fence_ = {context_, fence};
}

VulkanBuffer& StagingCopier::staging_for(std::uint64_t bytes) {
  if (!staging_ || staging_->size() < bytes)
    staging_ = std::make_unique<VulkanBuffer>(context_, bytes, BufferRole::staging, true);
  return *staging_;
}

void StagingCopier::upload(const VulkanBuffer& buffer, std::uint64_t offset, std::span<const std::byte> data) {
  std::lock_guard lock(mutex_);
  for (std::uint64_t done = 0; done < data.size();) {
    const std::uint64_t bytes = std::min<std::uint64_t>(kChunkBytes, data.size() - done);
    std::memcpy(staging_for(bytes).mapped(), data.data() + done, bytes);
    copy(buffer, offset + done, bytes, Direction::to_buffer);
    done += bytes;
  }
}

void StagingCopier::download(const VulkanBuffer& buffer, std::uint64_t offset, std::span<std::byte> data) {
  std::lock_guard lock(mutex_);
  for (std::uint64_t done = 0; done < data.size();) {
    const std::uint64_t bytes = std::min<std::uint64_t>(kChunkBytes, data.size() - done);
    VulkanBuffer& staging = staging_for(bytes);
    copy(buffer, offset + done, bytes, Direction::from_buffer);
    std::memcpy(data.data() + done, staging.mapped(), bytes);
    done += bytes;
  }
}

void StagingCopier::copy(const VulkanBuffer& buffer, std::uint64_t offset, std::uint64_t bytes,
                         Direction direction) {
  const DeviceFunctions& vk = context_->vk();
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check_vk(vk.vkBeginCommandBuffer(commands_, &begin), "vkBeginCommandBuffer");

  // Order the copy after every earlier kernel and copy on the queue (reads
  // and writes of the same region, and earlier use of the staging buffer).
  memory_barrier(vk, commands_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                 VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
                 VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
  VkBufferCopy region{};
  region.size = bytes;
  if (direction == Direction::to_buffer) {
    region.dstOffset = offset;
    vk.vkCmdCopyBuffer(commands_, staging_->handle(), buffer.handle(), 1, &region);
  } else {
    region.srcOffset = offset;
    vk.vkCmdCopyBuffer(commands_, buffer.handle(), staging_->handle(), 1, &region);
  }
  // Make the copied bytes visible to the host (downloads) and to later kernels.
  memory_barrier(vk, commands_, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                 VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                 VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  check_vk(vk.vkEndCommandBuffer(commands_), "vkEndCommandBuffer");

  VkFence fence = fence_.get();
  check_vk(vk.vkResetFences(context_->handle(), 1, &fence), "vkResetFences");
  context_->submit_and_wait(commands_, fence);
}

}  // namespace kiln::backend::vulkan

// Recorded dispatches and copies in one VkCommandBuffer, replayable.
//
// Recording starts at creation. Every dispatch and copy is preceded by a
// memory barrier (earlier shader and transfer writes -> its reads and
// writes), so each one sees every write before it, including those of
// earlier submissions; the list ends with a barrier that makes shader and
// transfer writes visible to the host and to later copies.
// Timestamps bracket the whole list when the device has them. Texel-buffer
// bindings get a VkBufferView each, made once per (buffer, offset, range,
// format) in this list and destroyed with it (after its last submit, which
// waited), before the buffers it retains.
#pragma once

#include "backends/backend.h"
#include "backends/vulkan/context.h"

#include <cstdint>
#include <map>
#include <tuple>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kiln::backend::vulkan {

class VulkanBuffer;

class VulkanCommandList final : public CommandList {
 public:
  explicit VulkanCommandList(std::shared_ptr<const DeviceContext> context);

  // Records a dispatch of `kernel` (loaded on this list's device). A binding
  // whose size is 0 covers the rest of its buffer. Throws InvalidArgument for
  // bindings that do not fit the kernel, the buffer or the device's limits, or
  // a parameter count other than the kernel's; Internal after finish().
  void dispatch(LoadedKernel& kernel, std::array<std::uint32_t, 3> groups, std::span<const BufferBinding> bindings,
                std::span<const std::int32_t> params) override;
  using CommandList::dispatch;
  // Records a vkCmdCopyBuffer behind a barrier (earlier shader and transfer
  // writes -> this copy); the next dispatch's barrier and finish()'s cover
  // its writes. Throws InvalidArgument as dispatch() does for buffers;
  // Internal after finish().
  void copy(const Buffer& src, std::uint64_t src_offset, Buffer& dst, std::uint64_t dst_offset,
            std::uint64_t bytes) override;
  // Ends recording. Throws Internal when called twice.
  void finish() override;
  // Runs the recorded work and waits for it. Throws Internal before finish().
  void submit() override;
  std::optional<double> last_device_ms() const override { return last_device_ms_; }

 private:
  VkDescriptorSet allocate_descriptor_set(VkDescriptorSetLayout layout, std::uint32_t num_storage,
                                         std::uint32_t num_texel);
  VkBufferView texel_view(VkBuffer buffer, std::uint64_t offset, std::uint64_t range, VkFormat format);
  void memory_barrier(VkPipelineStageFlags src_stages, VkAccessFlags src_access, VkPipelineStageFlags dst_stages,
                      VkAccessFlags dst_access);
  std::optional<double> read_device_ms() const;
  // The Vulkan buffer behind `buffer`, checked to be on this list's device
  // and to hold [offset, offset + bytes); `where` names it in errors.
  const VulkanBuffer& own_buffer(const Buffer& buffer, std::uint64_t offset, std::uint64_t bytes,
                                       const std::string& where) const;

  std::shared_ptr<const DeviceContext> context_;
  Owned<VkCommandPool, &DeviceFunctions::vkDestroyCommandPool> command_pool_;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;  // freed with the pool
  Owned<VkFence, &DeviceFunctions::vkDestroyFence> fence_;
  Owned<VkQueryPool, &DeviceFunctions::vkDestroyQueryPool> timestamps_;  // null without timestamps

  // Descriptor sets come from pools owned here, each bigger than the last.
  std::vector<Owned<VkDescriptorPool, &DeviceFunctions::vkDestroyDescriptorPool>> descriptor_pools_;
  std::uint32_t pool_sets_left_ = 0;
  std::uint32_t pool_descriptors_left_ = 0;
  std::uint32_t pool_texel_descriptors_left_ = 0;
  std::uint32_t next_pool_sets_ = 64;

  // Kernels and buffers the recording refers to, kept alive while it can run.
  std::vector<std::shared_ptr<const void>> retained_;
  std::vector<VkDescriptorBufferInfo> buffer_infos_;  // scratch, reused per dispatch
  std::vector<VkWriteDescriptorSet> writes_;          // scratch, reused per dispatch
  std::vector<VkBufferView> view_handles_;            // scratch, reused per dispatch
  // Texel views, after retained_ so that they go before the buffers they view.
  struct ViewKey {
    VkBuffer buffer;
    std::uint64_t offset, range;
    VkFormat format;
    friend bool operator<(const ViewKey& a, const ViewKey& b) {
      return std::tie(a.buffer, a.offset, a.range, a.format) < std::tie(b.buffer, b.offset, b.range, b.format);
    }
  };
  std::map<ViewKey, Owned<VkBufferView, &DeviceFunctions::vkDestroyBufferView>> views_;

  bool finished_ = false;
  std::optional<double> last_device_ms_;
};

}  // namespace kiln::backend::vulkan

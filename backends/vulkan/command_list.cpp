// Recording, barriers, descriptor sets, replayed submission and timestamps.
#include "backends/vulkan/command_list.h"

#include "backends/vulkan/buffer.h"
#include "backends/vulkan/pipeline.h"
#include "backends/vulkan/result.h"
#include "src/base/check.h"

#include <kiln/error.h>

#include <algorithm>

namespace kiln::backend::vulkan {
namespace {

constexpr std::uint32_t kMaxPoolSets = 4096;
constexpr std::uint32_t kDescriptorsPerSetEstimate = 4;
constexpr std::uint32_t kTexelsPerSetEstimate = 2;

constexpr VkPipelineStageFlags kWritingStages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
constexpr VkAccessFlags kWrites = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
constexpr VkAccessFlags kShaderAccess = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;

std::string groups_text(const std::array<std::uint32_t, 3>& groups) {
  return std::to_string(groups[0]) + " x " + std::to_string(groups[1]) + " x " + std::to_string(groups[2]);
}

}  // namespace

VulkanCommandList::VulkanCommandList(std::shared_ptr<const DeviceContext> context) : context_(std::move(context)) {
  const DeviceFunctions& vk = context_->vk();
  const VkDevice device = context_->handle();

  VkCommandPoolCreateInfo pool_info{};
  pool_info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool_info.queueFamilyIndex = context_->physical().compute_queue_family;
  VkCommandPool pool = VK_NULL_HANDLE;
  check_vk(vk.vkCreateCommandPool(device, &pool_info, nullptr, &pool), "vkCreateCommandPool");
  command_pool_ = {context_, pool};

  VkCommandBufferAllocateInfo allocate_info{};
  allocate_info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  allocate_info.commandPool = pool;
  allocate_info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  allocate_info.commandBufferCount = 1;
  check_vk(vk.vkAllocateCommandBuffers(device, &allocate_info, &commands_), "vkAllocateCommandBuffers");

  VkFenceCreateInfo fence_info{};
  fence_info.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  VkFence fence = VK_NULL_HANDLE;
  check_vk(vk.vkCreateFence(device, &fence_info, nullptr, &fence), "vkCreateFence");
  fence_ = {context_, fence};

  if (context_->target().timestamps) {
    VkQueryPoolCreateInfo query_info{};
    query_info.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
    query_info.queryType = VK_QUERY_TYPE_TIMESTAMP;
    query_info.queryCount = 2;
    VkQueryPool queries = VK_NULL_HANDLE;
    check_vk(vk.vkCreateQueryPool(device, &query_info, nullptr, &queries), "vkCreateQueryPool");
    timestamps_ = {context_, queries};
  }

  // No ONE_TIME_SUBMIT: the list may be replayed (never concurrently, submit waits).
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  check_vk(vk.vkBeginCommandBuffer(commands_, &begin), "vkBeginCommandBuffer");
  if (timestamps_.get() != VK_NULL_HANDLE) {
    vk.vkCmdResetQueryPool(commands_, timestamps_.get(), 0, 2);
    vk.vkCmdWriteTimestamp(commands_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, timestamps_.get(), 0);
  }
}

void VulkanCommandList::memory_barrier(VkPipelineStageFlags src_stages, VkAccessFlags src_access,
                                       VkPipelineStageFlags dst_stages, VkAccessFlags dst_access) {
  VkMemoryBarrier barrier{};
  barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  barrier.srcAccessMask = src_access;
  barrier.dstAccessMask = dst_access;
  context_->vk().vkCmdPipelineBarrier(commands_, src_stages, dst_stages, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

VkDescriptorSet VulkanCommandList::allocate_descriptor_set(VkDescriptorSetLayout layout, std::uint32_t num_storage,
                                                           std::uint32_t num_texel) {
  const DeviceFunctions& vk = context_->vk();
  if (pool_sets_left_ == 0 || pool_descriptors_left_ < num_storage || pool_texel_descriptors_left_ < num_texel) {
    const std::uint32_t sets = next_pool_sets_;
    const std::uint32_t descriptors = std::max(sets * kDescriptorsPerSetEstimate, num_storage);
    const bool texels = context_->target().max_texel_buffer_elements != 0;
    const std::uint32_t texel_descriptors = texels ? std::max(sets * kTexelsPerSetEstimate, num_texel) : 0;
    VkDescriptorPoolSize sizes[2] = {};
    sizes[0].type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    sizes[0].descriptorCount = descriptors;
    sizes[1].type = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
    sizes[1].descriptorCount = texel_descriptors;
    VkDescriptorPoolCreateInfo pool_info{};
    pool_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
    pool_info.maxSets = sets;
    pool_info.poolSizeCount = texels ? 2 : 1;
    pool_info.pPoolSizes = sizes;
    VkDescriptorPool pool = VK_NULL_HANDLE;
    check_vk(vk.vkCreateDescriptorPool(context_->handle(), &pool_info, nullptr, &pool), "vkCreateDescriptorPool");
    descriptor_pools_.emplace_back(context_, pool);
    pool_sets_left_ = sets;
    pool_descriptors_left_ = descriptors;
    pool_texel_descriptors_left_ = texel_descriptors;
    next_pool_sets_ = std::min(next_pool_sets_ * 2, kMaxPoolSets);
  }
  VkDescriptorSetAllocateInfo allocate_info{};
  allocate_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  allocate_info.descriptorPool = descriptor_pools_.back().get();
  allocate_info.descriptorSetCount = 1;
  allocate_info.pSetLayouts = &layout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  check_vk(vk.vkAllocateDescriptorSets(context_->handle(), &allocate_info, &set), "vkAllocateDescriptorSets");
  --pool_sets_left_;
  pool_descriptors_left_ -= num_storage;
  pool_texel_descriptors_left_ -= num_texel;
  return set;
}

VkBufferView VulkanCommandList::texel_view(VkBuffer buffer, std::uint64_t offset, std::uint64_t range,
                                           VkFormat format) {
  const ViewKey key{buffer, offset, range, format};
  if (auto found = views_.find(key); found != views_.end()) return found->second.get();
  VkBufferViewCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO;
  info.buffer = buffer;
  info.format = format;
  info.offset = offset;
  info.range = range;
  VkBufferView view = VK_NULL_HANDLE;
  check_vk(context_->vk().vkCreateBufferView(context_->handle(), &info, nullptr, &view), "vkCreateBufferView");
  views_.emplace(key, Owned<VkBufferView, &DeviceFunctions::vkDestroyBufferView>(context_, view));
  return view;
}

void VulkanCommandList::dispatch(LoadedKernel& kernel, std::array<std::uint32_t, 3> groups,
                                 std::span<const BufferBinding> bindings, std::span<const std::int32_t> params) {
  context_->raise_validation_errors();
  KILN_CHECK(!finished_, ErrorKind::InvalidArgument,
             "dispatch of kernel '" + kernel.name() + "' into a command list after finish()");
  auto* vulkan_kernel = dynamic_cast<VulkanKernel*>(&kernel);
  KILN_CHECK(vulkan_kernel != nullptr, ErrorKind::InvalidArgument,
             "kernel '" + kernel.name() + "' was not loaded by the Vulkan backend");
  KILN_CHECK(&vulkan_kernel->context() == context_.get(), ErrorKind::InvalidArgument,
             "kernel '" + kernel.name() + "' was loaded on another device than " + context_->label());
  const VulkanPipeline& pipeline = vulkan_kernel->pipeline();
  KILN_CHECK(bindings.size() == pipeline.num_buffers(), ErrorKind::InvalidArgument,
             "kernel '" + kernel.name() + "' takes " + std::to_string(pipeline.num_buffers()) + " buffers, got " +
                 std::to_string(bindings.size()));
  KILN_CHECK(params.size() == pipeline.num_params(), ErrorKind::InvalidArgument,
             "kernel '" + kernel.name() + "' takes " + std::to_string(pipeline.num_params()) + " parameters, got " +
                 std::to_string(params.size()));
  const TargetDesc& target = context_->target();
  for (int axis = 0; axis < 3; ++axis)
    KILN_CHECK(groups[axis] <= target.max_workgroup_count[axis], ErrorKind::InvalidArgument,
               "kernel '" + kernel.name() + "': " + groups_text(groups) + " workgroups exceed " +
                   context_->label() + "'s limit of " + groups_text(target.max_workgroup_count));

  buffer_infos_.clear();
  view_handles_.assign(bindings.size(), VK_NULL_HANDLE);
  for (std::size_t i = 0; i < bindings.size(); ++i) {
    const BufferBinding& binding = bindings[i];
    // Messages are built only on failure: no allocation per binding.
    const auto where = [&] { return "kernel '" + kernel.name() + "' buffer " + std::to_string(i); };
    auto* buffer = dynamic_cast<VulkanBuffer*>(binding.buffer);
    KILN_CHECK(buffer != nullptr, ErrorKind::InvalidArgument, where() + " is not a Vulkan buffer");
    KILN_CHECK(&buffer->context() == context_.get(), ErrorKind::InvalidArgument,
               where() + " belongs to another device than " + context_->label());
    KILN_CHECK(binding.offset <= buffer->size() && binding.size <= buffer->size() - binding.offset,
               ErrorKind::InvalidArgument,
               where() + ": bytes [" + std::to_string(binding.offset) + ", " +
                   std::to_string(binding.offset + binding.size) + ") exceed the buffer's " +
                   std::to_string(buffer->size()) + " bytes");
    KILN_CHECK(binding.offset % target.min_buffer_offset_alignment == 0, ErrorKind::InvalidArgument,
               where() + ": offset " + std::to_string(binding.offset) + " is not a multiple of " +
                   std::to_string(target.min_buffer_offset_alignment));
    const std::uint64_t range = binding.size != 0 ? binding.size : buffer->size() - binding.offset;
    KILN_CHECK(range <= target.max_buffer_bytes, ErrorKind::InvalidArgument,
               where() + ": " + std::to_string(range) + " bytes exceed the device's largest binding of " +
                   std::to_string(target.max_buffer_bytes));
    VkDescriptorBufferInfo info{};
    info.buffer = buffer->handle();
    // An empty range binds the first word instead; the kernel reads none of it.
    info.offset = range != 0 ? binding.offset : 0;
    info.range = range != 0 ? range : VK_WHOLE_SIZE;
    buffer_infos_.push_back(info);
    if (pipeline.texel_width(i) != 0) {
      // The view holds the binding's whole texels (a kernel reads no others);
      // a binding smaller than one texel views the buffer's first texel
      // instead (every buffer has at least 16 bytes), which it reads none of.
      const std::uint64_t texel_bytes = pipeline.texel_bytes(i);
      const VkFormat format = pipeline.texel_format(i);
      const std::uint64_t texels = range / texel_bytes;
      KILN_CHECK(texels <= target.max_texel_buffer_elements, ErrorKind::InvalidArgument,
                 where() + ": " + std::to_string(texels) + " texels exceed the device's largest texel buffer of " +
                     std::to_string(target.max_texel_buffer_elements));
      view_handles_[i] = texels != 0 ? texel_view(buffer->handle(), binding.offset, texels * texel_bytes, format)
                                     : texel_view(buffer->handle(), 0, texel_bytes, format);
    }
  }

  const DeviceFunctions& vk = context_->vk();
  const std::uint32_t num_texel = pipeline.num_texel_buffers();
  const VkDescriptorSet set =
      allocate_descriptor_set(pipeline.set_layout(), pipeline.num_buffers() - num_texel, num_texel);
  writes_.assign(bindings.size(), VkWriteDescriptorSet{});
  for (std::uint32_t i = 0; i < bindings.size(); ++i) {
    VkWriteDescriptorSet& write = writes_[i];
    write.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    write.dstSet = set;
    write.dstBinding = i;
    write.descriptorCount = 1;
    if (view_handles_[i] != VK_NULL_HANDLE) {
      write.descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
      write.pTexelBufferView = &view_handles_[i];
    } else {
      write.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      write.pBufferInfo = &buffer_infos_[i];
    }
  }
  vk.vkUpdateDescriptorSets(context_->handle(), static_cast<std::uint32_t>(writes_.size()), writes_.data(), 0,
                            nullptr);

  retained_.push_back(vulkan_kernel->shared_from_this());
  for (const BufferBinding& binding : bindings)
    retained_.push_back(static_cast<VulkanBuffer*>(binding.buffer)->shared_from_this());

  // Earlier kernels, copies and submissions -> this kernel (RAW, WAR, WAW).
  memory_barrier(kWritingStages, kWrites, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, kShaderAccess);
  vk.vkCmdBindPipeline(commands_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.handle());
  vk.vkCmdBindDescriptorSets(commands_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.layout(), 0, 1, &set, 0, nullptr);
  // Recorded into the command buffer by value, so a replayed list keeps them.
  if (!params.empty())
    vk.vkCmdPushConstants(commands_, pipeline.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                          static_cast<std::uint32_t>(params.size_bytes()), params.data());
  vk.vkCmdDispatch(commands_, groups[0], groups[1], groups[2]);
}

const VulkanBuffer& VulkanCommandList::own_buffer(const Buffer& buffer, std::uint64_t offset, std::uint64_t bytes,
                                                  const std::string& where) const {
  const auto* vulkan_buffer = dynamic_cast<const VulkanBuffer*>(&buffer);
  KILN_CHECK(vulkan_buffer != nullptr, ErrorKind::InvalidArgument, where + " is not a Vulkan buffer");
  KILN_CHECK(&vulkan_buffer->context() == context_.get(), ErrorKind::InvalidArgument,
             where + " belongs to another device than " + context_->label());
  KILN_CHECK(offset <= buffer.size() && bytes <= buffer.size() - offset, ErrorKind::InvalidArgument,
             where + ": bytes [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) +
                 ") exceed the buffer's " + std::to_string(buffer.size()) + " bytes");
  return *vulkan_buffer;
}

void VulkanCommandList::copy(const Buffer& src, std::uint64_t src_offset, Buffer& dst, std::uint64_t dst_offset,
                             std::uint64_t bytes) {
  context_->raise_validation_errors();
  KILN_CHECK(!finished_, ErrorKind::InvalidArgument, "copy into a command list after finish()");
  const VulkanBuffer& from = own_buffer(src, src_offset, bytes, "copy source");
  const VulkanBuffer& to = own_buffer(dst, dst_offset, bytes, "copy destination");
  KILN_CHECK(&from != &to || src_offset + bytes <= dst_offset || dst_offset + bytes <= src_offset,
             ErrorKind::InvalidArgument,
             "copy of " + std::to_string(bytes) + " bytes from offset " + std::to_string(src_offset) + " to offset " +
                 std::to_string(dst_offset) + " of one buffer: the regions overlap");
  if (bytes == 0) return;  // Vulkan forbids empty copies
  retained_.push_back(from.shared_from_this());
  retained_.push_back(to.shared_from_this());
  // Earlier kernels, copies and submissions -> this copy (RAW, WAR, WAW).
  memory_barrier(kWritingStages, kWrites, VK_PIPELINE_STAGE_TRANSFER_BIT,
                 VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
  VkBufferCopy region{};
  region.srcOffset = src_offset;
  region.dstOffset = dst_offset;
  region.size = bytes;
  context_->vk().vkCmdCopyBuffer(commands_, from.handle(), to.handle(), 1, &region);
}

void VulkanCommandList::finish() {
  context_->raise_validation_errors();
  KILN_CHECK(!finished_, ErrorKind::InvalidArgument, "finish() called twice on a command list");
  // Shader and copy writes -> host reads after the fence, and later copies.
  memory_barrier(kWritingStages, kWrites, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                 VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
  if (timestamps_.get() != VK_NULL_HANDLE)
    context_->vk().vkCmdWriteTimestamp(commands_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, timestamps_.get(), 1);
  check_vk(context_->vk().vkEndCommandBuffer(commands_), "vkEndCommandBuffer");
  finished_ = true;
  context_->raise_validation_errors();
}

void VulkanCommandList::submit() {
  context_->raise_validation_errors();
  KILN_CHECK(finished_, ErrorKind::InvalidArgument, "submit() of a command list before finish()");
  VkFence fence = fence_.get();
  check_vk(context_->vk().vkResetFences(context_->handle(), 1, &fence), "vkResetFences");
  context_->submit_and_wait(commands_, fence);
  last_device_ms_ = read_device_ms();
  context_->raise_validation_errors();
}

std::optional<double> VulkanCommandList::read_device_ms() const {
  if (timestamps_.get() == VK_NULL_HANDLE) return std::nullopt;
  std::uint64_t ticks[2] = {};
  const VkResult result = context_->vk().vkGetQueryPoolResults(
      context_->handle(), timestamps_.get(), 0, 2, sizeof ticks, ticks, sizeof ticks[0],
      VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
  check_vk(result, "vkGetQueryPoolResults");
  const std::uint32_t valid_bits = context_->physical().timestamp_valid_bits;
  const std::uint64_t mask = valid_bits >= 64 ? ~0ull : (1ull << valid_bits) - 1;
  const std::uint64_t elapsed = (ticks[1] - ticks[0]) & mask;
  return static_cast<double>(elapsed) * context_->physical().timestamp_period_ns * 1e-6;
}

}  // namespace kiln::backend::vulkan

// Vulkan buffers: size checks, memory type choice, allocation and mapping.
#include "backends/vulkan/buffer.h"

#include "backends/vulkan/result.h"
#include "src/base/check.h"

#include <kiln/error.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <optional>

namespace kiln::backend::vulkan {
namespace {

// Vulkan forbids empty buffers; a small kiln buffer gets at least one RGBA32
// texel, so that any buffer can back a texel view.
constexpr std::uint64_t kMinimumAllocation = 16;

constexpr VkMemoryPropertyFlags kMappable = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;

// The allowed memory type with every `required` flag and the most `preferred`
// ones; among equals, the first (drivers list the best first).
std::optional<std::uint32_t> find_memory_type(const VkPhysicalDeviceMemoryProperties& memory,
                                              std::uint32_t allowed_types, VkMemoryPropertyFlags required,
                                              VkMemoryPropertyFlags preferred) {
  std::optional<std::uint32_t> best;
  int best_score = -1;
  for (std::uint32_t i = 0; i < memory.memoryTypeCount; ++i) {
    const VkMemoryPropertyFlags flags = memory.memoryTypes[i].propertyFlags;
    if ((allowed_types & (1u << i)) == 0 || (flags & required) != required) continue;
    const int score = std::popcount(static_cast<std::uint32_t>(flags & preferred));
    if (score > best_score) {
      best = i;
      best_score = score;
    }
  }
  return best;
}

struct MemoryChoice {
  std::uint32_t type_index = 0;
  bool map = false;
};

MemoryChoice choose_memory(const DeviceContext& context, std::uint32_t allowed_types, BufferRole role,
                           bool allow_mapping) {
  const VkPhysicalDeviceMemoryProperties& memory = context.physical().memory;
  if (role == BufferRole::staging) {
    const auto type = find_memory_type(memory, allowed_types, kMappable, VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    KILN_CHECK(type.has_value(), ErrorKind::Internal,
               context.label() + " has no host-visible coherent memory for staging buffers");
    return {*type, true};
  }
  // Uncached host-visible device memory (a discrete GPU's BAR) reads back
  // very slowly, so only cached unified memory is mapped directly.
  if (allow_mapping) {
    const VkMemoryPropertyFlags unified =
        VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | kMappable | VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
    if (const auto type = find_memory_type(memory, allowed_types, unified, 0)) return {*type, true};
  }
  if (const auto type = find_memory_type(memory, allowed_types, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0))
    return {*type, false};
  const auto type = find_memory_type(memory, allowed_types, 0, 0);
  KILN_CHECK(type.has_value(), ErrorKind::Internal, context.label() + " offers no memory type for storage buffers");
  return {*type, false};
}

[[noreturn]] void throw_out_of_memory(const DeviceContext& context, std::uint64_t bytes, const std::string& why) {
  throw_error(ErrorKind::OutOfMemory,
              "cannot allocate a buffer of " + byte_count_text(bytes) + " on " + context.label() + ": " + why);
}

}  // namespace

std::string byte_count_text(std::uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  double value = static_cast<double>(bytes);
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  if (unit == 0) return std::to_string(bytes) + " bytes";
  char text[64];
  std::snprintf(text, sizeof text, "%.1f %s (%llu bytes)", value, units[unit],
                static_cast<unsigned long long>(bytes));
  return text;
}

VulkanBuffer::VulkanBuffer(std::shared_ptr<const DeviceContext> context, std::uint64_t bytes, BufferRole role,
                           bool allow_mapping)
    : context_(std::move(context)), size_(bytes) {
  const DeviceContext& ctx = *context_;
  const PhysicalDevice& physical = ctx.physical();
  if (role == BufferRole::storage && bytes > ctx.target().max_buffer_bytes)
    throw_out_of_memory(ctx, bytes,
                        "larger than the biggest storage buffer it can bind (maxStorageBufferRange = " +
                            byte_count_text(ctx.target().max_buffer_bytes) + ")");
  if (physical.max_allocation_bytes != 0 && bytes > physical.max_allocation_bytes)
    throw_out_of_memory(ctx, bytes,
                        "larger than its biggest allocation (maxMemoryAllocationSize = " +
                            byte_count_text(physical.max_allocation_bytes) + ")");

  const DeviceFunctions& vk = ctx.vk();
  VkBufferCreateInfo create_info{};
  create_info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  create_info.size = std::max(bytes, kMinimumAllocation);
  create_info.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  if (role == BufferRole::storage) create_info.usage |= VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  // Any storage buffer may also be bound as a texel buffer (a view per binding).
  if (role == BufferRole::storage && ctx.target().max_texel_buffer_elements != 0)
    create_info.usage |= VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT;
  create_info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer buffer = VK_NULL_HANDLE;
  check_vk(vk.vkCreateBuffer(ctx.handle(), &create_info, nullptr, &buffer), "vkCreateBuffer");
  buffer_ = {context_, buffer};

  VkMemoryRequirements requirements{};
  vk.vkGetBufferMemoryRequirements(ctx.handle(), buffer, &requirements);
  const MemoryChoice choice = choose_memory(ctx, requirements.memoryTypeBits, role, allow_mapping);
  const std::uint32_t heap = physical.memory.memoryTypes[choice.type_index].heapIndex;
  const std::uint64_t heap_bytes = physical.memory.memoryHeaps[heap].size;
  if (requirements.size > heap_bytes)
    throw_out_of_memory(ctx, bytes, "larger than its memory heap (" + byte_count_text(heap_bytes) + ")");

  VkMemoryAllocateInfo allocate_info{};
  allocate_info.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  allocate_info.allocationSize = requirements.size;
  allocate_info.memoryTypeIndex = choice.type_index;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  const VkResult allocated = vk.vkAllocateMemory(ctx.handle(), &allocate_info, nullptr, &memory);
  if (allocated == VK_ERROR_OUT_OF_DEVICE_MEMORY || allocated == VK_ERROR_OUT_OF_HOST_MEMORY)
    throw_out_of_memory(ctx, bytes, "vkAllocateMemory returned " + vk_result_name(allocated));
  check_vk(allocated, "vkAllocateMemory");
  memory_ = {context_, memory};
  check_vk(vk.vkBindBufferMemory(ctx.handle(), buffer, memory, 0), "vkBindBufferMemory");

  if (choice.map) {
    void* pointer = nullptr;
    check_vk(vk.vkMapMemory(ctx.handle(), memory, 0, VK_WHOLE_SIZE, 0, &pointer), "vkMapMemory");
    mapped_ = static_cast<std::byte*>(pointer);
  }
}

}  // namespace kiln::backend::vulkan

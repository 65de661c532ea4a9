// The driver's pipeline cache: creation, restore from checked data, contents.
#include "backends/vulkan/pipeline_cache.h"

#include "backends/vulkan/result.h"

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace kiln::backend::vulkan {
namespace {

// VkPipelineCacheHeaderVersionOne: five fields, 16 + VK_UUID_SIZE bytes.
constexpr std::size_t kHeaderBytes = 16 + VK_UUID_SIZE;

// Header integers are in the host's byte order (the spec says so).
std::uint32_t read_u32(std::span<const std::byte> data, std::size_t offset) {
  std::uint32_t v = 0;
  std::memcpy(&v, data.data() + offset, sizeof v);
  return v;
}

std::string hex(std::uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "%x", v);
  return text;
}

std::string uuid_hex(const std::uint8_t* uuid) {
  std::string text;
  for (std::size_t i = 0; i < VK_UUID_SIZE; ++i) {
    char pair[3];
    std::snprintf(pair, sizeof pair, "%02x", uuid[i]);
    text += pair;
  }
  return text;
}

}  // namespace

std::string check_pipeline_cache_header(std::span<const std::byte> data, const PhysicalDevice& device) {
  if (data.size() < kHeaderBytes)
    return std::to_string(data.size()) + " bytes, shorter than a pipeline cache header (" +
           std::to_string(kHeaderBytes) + ")";
  const std::uint32_t header_size = read_u32(data, 0);
  if (header_size < kHeaderBytes || header_size > data.size())
    return "header size " + std::to_string(header_size) + " is not within " + std::to_string(kHeaderBytes) + " to " +
           std::to_string(data.size()) + " bytes";
  const std::uint32_t version = read_u32(data, 4);
  if (version != VK_PIPELINE_CACHE_HEADER_VERSION_ONE)
    return "header version " + std::to_string(version) + ", not VK_PIPELINE_CACHE_HEADER_VERSION_ONE";
  const std::uint32_t vendor = read_u32(data, 8);
  const std::uint32_t device_id = read_u32(data, 12);
  if (vendor != device.vendor_id || device_id != device.device_id)
    return "written for vendor " + hex(vendor) + " device " + hex(device_id) + ", this is vendor " +
           hex(device.vendor_id) + " device " + hex(device.device_id);
  const auto* uuid = reinterpret_cast<const std::uint8_t*>(data.data() + 16);
  if (std::memcmp(uuid, device.pipeline_cache_uuid.data(), VK_UUID_SIZE) != 0)
    return "written for pipeline cache UUID " + uuid_hex(uuid) + ", this driver's is " +
           uuid_hex(device.pipeline_cache_uuid.data());
  return "";
}

std::string pipeline_cache_name(const PhysicalDevice& device) {
  return "vulkan-" + hex(device.vendor_id) + "-" + hex(device.device_id) + "-" + hex(device.driver_version) + "-" +
         uuid_hex(device.pipeline_cache_uuid.data());
}

namespace {

VkPipelineCache create_cache(const DeviceContext& context, std::span<const std::byte> initial) {
  VkPipelineCacheCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
  info.initialDataSize = initial.size();
  info.pInitialData = initial.empty() ? nullptr : initial.data();
  VkPipelineCache cache = VK_NULL_HANDLE;
  check_vk(context.vk().vkCreatePipelineCache(context.handle(), &info, nullptr, &cache),
           "vkCreatePipelineCache on " + context.label());
  return cache;
}

}  // namespace

PipelineCache::PipelineCache(std::shared_ptr<const DeviceContext> context) : context_(std::move(context)) {
  cache_ = {context_, create_cache(*context_, {})};
}

std::string PipelineCache::restore(std::span<const std::byte> data) {
  if (std::string problem = check_pipeline_cache_header(data, context_->physical()); !problem.empty())
    return problem;
  cache_ = {context_, create_cache(*context_, data)};
  return "";
}

std::vector<std::byte> PipelineCache::data() const {
  const DeviceFunctions& vk = context_->vk();
  // Another thread may add pipelines between the size query and the copy:
  // VK_INCOMPLETE then, and a new size is asked for.
  for (;;) {
    std::size_t size = 0;
    check_vk(vk.vkGetPipelineCacheData(context_->handle(), cache_.get(), &size, nullptr),
             "vkGetPipelineCacheData on " + context_->label());
    std::vector<std::byte> bytes(size);
    const VkResult copied = vk.vkGetPipelineCacheData(context_->handle(), cache_.get(), &size, bytes.data());
    if (copied == VK_INCOMPLETE) continue;
    check_vk(copied, "vkGetPipelineCacheData on " + context_->label());
    bytes.resize(size);
    return bytes;
  }
}

}  // namespace kiln::backend::vulkan

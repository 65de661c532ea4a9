// A kiln Device on one Vulkan physical device.
#include "backends/vulkan/device.h"

#include "backends/vulkan/buffer.h"
#include "backends/vulkan/command_list.h"
#include "src/base/check.h"

#include <kiln/error.h>

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace kiln::backend::vulkan {

namespace {

// A kernel's texel views, one character per buffer ('-' a storage buffer,
// else width and element), for the pipeline key.
std::string texel_layout(const KernelSource& source) {
  std::string layout;
  for (std::size_t i = 0; i < source.texel_widths.size(); ++i) {
    const TexelElement element = i < source.texel_elements.size() ? source.texel_elements[i] : TexelElement::f32;
    layout += source.texel_widths[i] == 0 ? '-' : static_cast<char>('0' + source.texel_widths[i] * 4 +
                                                                     static_cast<std::uint32_t>(element));
  }
  return layout;
}

}  // namespace

VulkanDevice::VulkanDevice(std::shared_ptr<Instance> instance, PhysicalDevice physical, int index,
                           DeviceOptions options)
    : context_(std::make_shared<const DeviceContext>(std::move(instance), std::move(physical), index)),
      options_(options),
      staging_(context_),
      pipeline_cache_(context_) {}

std::shared_ptr<Buffer> VulkanDevice::allocate(std::uint64_t bytes) {
  context_->raise_validation_errors();
  auto buffer = std::make_shared<VulkanBuffer>(context_, bytes, BufferRole::storage, options_.map_device_memory);
  context_->raise_validation_errors();
  return buffer;
}

const VulkanBuffer& VulkanDevice::own_buffer(const Buffer& buffer, std::uint64_t offset, std::uint64_t bytes,
                                             const char* operation) const {
  const auto* vulkan_buffer = dynamic_cast<const VulkanBuffer*>(&buffer);
  KILN_CHECK(vulkan_buffer != nullptr && &vulkan_buffer->context() == context_.get(), ErrorKind::InvalidArgument,
             std::string(operation) + ": the buffer was not allocated on " + context_->label());
  KILN_CHECK(offset <= buffer.size() && bytes <= buffer.size() - offset, ErrorKind::InvalidArgument,
             std::string(operation) + " of " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
                 " exceeds the buffer's " + std::to_string(buffer.size()) + " bytes");
  return *vulkan_buffer;
}

void VulkanDevice::upload(Buffer& buffer, std::uint64_t offset, std::span<const std::byte> data) {
  context_->raise_validation_errors();
  const VulkanBuffer& target_buffer = own_buffer(buffer, offset, data.size(), "upload");
  if (data.empty()) return;
  // Mapped memory is coherent and every submission waits, so a plain copy is safe.
  if (std::byte* mapped = target_buffer.mapped())
    std::memcpy(mapped + offset, data.data(), data.size());
  else
    staging_.upload(target_buffer, offset, data);
  context_->raise_validation_errors();
}

void VulkanDevice::download(const Buffer& buffer, std::uint64_t offset, std::span<std::byte> data) {
  context_->raise_validation_errors();
  const VulkanBuffer& source_buffer = own_buffer(buffer, offset, data.size(), "download");
  if (data.empty()) return;
  // Command lists end with a shader-write -> host-read barrier, so a finished
  // submission's results are visible here.
  if (const std::byte* mapped = source_buffer.mapped())
    std::memcpy(data.data(), mapped + offset, data.size());
  else
    staging_.download(source_buffer, offset, data);
  context_->raise_validation_errors();
}

std::shared_ptr<LoadedKernel> VulkanDevice::load_kernel(const KernelSource& source, const KernelBinary& binary) {
  context_->raise_validation_errors();
  const TargetDesc& target = context_->target();
  KILN_CHECK(source.workgroup_size >= 1 && source.workgroup_size <= target.max_workgroup_invocations &&
                 source.workgroup_size <= target.max_workgroup_size[0],
             ErrorKind::Unsupported,
             "kernel '" + source.name + "' has a workgroup size of " + std::to_string(source.workgroup_size) + "; " +
                 context_->label() + " allows 1 to " +
                 std::to_string(std::min(target.max_workgroup_invocations, target.max_workgroup_size[0])));
  const XXH128_hash_t hash = XXH3_128bits(binary.data.data(), binary.data.size());
  const PipelineKey key{hash.high64, hash.low64, source.num_buffers, texel_layout(source)};
  std::shared_ptr<const VulkanPipeline> pipeline;
  {
    std::lock_guard lock(kernels_mutex_);
    if (auto found = kernels_.find({key, source.name}); found != kernels_.end()) return found->second;
    if (auto found = pipelines_.find(key); found != pipelines_.end()) pipeline = found->second;
  }
  // Pipeline creation can take milliseconds: do it unlocked; a racing load of
  // the same binary wastes one pipeline, never correctness.
  const bool new_pipeline = !pipeline;
  if (new_pipeline) {
    std::shared_lock cache_lock(pipeline_cache_mutex_);
    pipeline = std::make_shared<const VulkanPipeline>(context_, binary, source, pipeline_cache_.handle());
    ++pipelines_since_cache_data_;
  }
  auto kernel = std::make_shared<VulkanKernel>(source.name, pipeline, context_);
  if (new_pipeline && target.cpu_cores) compile_now(*kernel);
  context_->raise_validation_errors();
  std::lock_guard lock(kernels_mutex_);
  pipelines_.try_emplace(key, pipeline);
  return kernels_.try_emplace({key, source.name}, kernel).first->second;
}

void VulkanDevice::compile_now(VulkanKernel& kernel) {
  std::call_once(placeholder_once_, [this] { placeholder_ = allocate(16); });
  const std::vector<BufferBinding> bindings(kernel.pipeline().num_buffers(), {placeholder_.get(), 0, 16});
  VulkanCommandList list(context_);
  const std::vector<std::int32_t> params(kernel.pipeline().num_params(), 0);  // no workgroup reads them
  list.dispatch(kernel, {0, 1, 1}, bindings, params);
  list.finish();
  list.submit();
}

std::unique_ptr<CommandList> VulkanDevice::create_command_list() {
  context_->raise_validation_errors();
  return std::make_unique<VulkanCommandList>(context_);
}

std::optional<std::string> VulkanDevice::pipeline_cache_name() const {
  return vulkan::pipeline_cache_name(context_->physical());
}

std::string VulkanDevice::restore_pipeline_cache(std::span<const std::byte> data) {
  std::unique_lock cache_lock(pipeline_cache_mutex_);
  try {
    return pipeline_cache_.restore(data);
  } catch (const Error& error) {
    return error.what();  // the driver refused it: the device keeps its empty cache
  }
}

std::optional<std::vector<std::byte>> VulkanDevice::pipeline_cache_data() {
  if (pipelines_since_cache_data_.exchange(0) == 0) return std::nullopt;
  return pipeline_cache_contents();
}

std::vector<std::byte> VulkanDevice::pipeline_cache_contents() const {
  std::shared_lock cache_lock(pipeline_cache_mutex_);
  return pipeline_cache_.data();
}

std::size_t VulkanDevice::pipeline_count() const {
  std::lock_guard lock(kernels_mutex_);
  return pipelines_.size();
}

}  // namespace kiln::backend::vulkan

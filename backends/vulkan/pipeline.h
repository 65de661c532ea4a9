// Loaded kernels: a SPIR-V compute pipeline with its descriptor set layout
// (buffers at bindings 0..n-1 of set 0: storage buffers, or uniform texel
// buffers where KernelSource::texel_widths says so, of the format its
// texel_elements give; the kernel's i32
// parameters, if any, as push constants at offset 0).
#pragma once

#include "backends/backend.h"
#include "backends/vulkan/context.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::backend::vulkan {

// The Vulkan objects of one SPIR-V binary; shared by every kernel loaded from
// the same binary.
class VulkanPipeline {
 public:
  // Creates the shader module, layouts and compute pipeline (entry point
  // "main"). Throws Error(InvalidArgument) or Error(Corrupt) for a binary that
  // is not SPIR-V, Error(Internal) when the driver rejects it. `kernel_name`
  // is for messages; `cache` is the driver's pipeline cache (or VK_NULL_HANDLE).
  VulkanPipeline(std::shared_ptr<const DeviceContext> context, const KernelBinary& binary, const KernelSource& source,
                 VkPipelineCache cache);

  VkPipeline handle() const { return pipeline_.get(); }
  VkPipelineLayout layout() const { return layout_.get(); }
  VkDescriptorSetLayout set_layout() const { return set_layout_.get(); }
  std::uint32_t num_buffers() const { return num_buffers_; }
  std::uint32_t num_params() const { return num_params_; }
  // 0: binding i is a storage buffer; 1 or 4: a texel buffer of that many elements per texel.
  std::uint32_t texel_width(std::size_t binding) const {
    return binding < texel_widths_.size() ? texel_widths_[binding] : 0;
  }
  // A texel buffer's view format and bytes per texel.
  VkFormat texel_format(std::size_t binding) const { return texel_formats_[binding]; }
  std::uint64_t texel_bytes(std::size_t binding) const { return texel_bytes_[binding]; }
  std::uint32_t num_texel_buffers() const { return num_texel_buffers_; }

 private:
  std::uint32_t num_buffers_ = 0;
  std::uint32_t num_params_ = 0;
  std::vector<std::uint32_t> texel_widths_;
  std::vector<VkFormat> texel_formats_;
  std::vector<std::uint64_t> texel_bytes_;
  std::uint32_t num_texel_buffers_ = 0;
  Owned<VkDescriptorSetLayout, &DeviceFunctions::vkDestroyDescriptorSetLayout> set_layout_;
  Owned<VkPipelineLayout, &DeviceFunctions::vkDestroyPipelineLayout> layout_;
  Owned<VkPipeline, &DeviceFunctions::vkDestroyPipeline> pipeline_;
};

class VulkanKernel final : public LoadedKernel, public std::enable_shared_from_this<VulkanKernel> {
 public:
  VulkanKernel(std::string name, std::shared_ptr<const VulkanPipeline> pipeline,
               std::shared_ptr<const DeviceContext> context)
      : name_(std::move(name)), pipeline_(std::move(pipeline)), context_(std::move(context)) {}

  const std::string& name() const override { return name_; }
  const VulkanPipeline& pipeline() const { return *pipeline_; }
  const DeviceContext& context() const { return *context_; }

 private:
  std::string name_;
  std::shared_ptr<const VulkanPipeline> pipeline_;
  std::shared_ptr<const DeviceContext> context_;
};

}  // namespace kiln::backend::vulkan

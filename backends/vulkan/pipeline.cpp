// SPIR-V binaries -> Vulkan compute pipelines.
#include "backends/vulkan/pipeline.h"

#include "backends/vulkan/result.h"

#include <kiln/error.h>

#include <cstring>
#include <vector>

namespace kiln::backend::vulkan {
namespace {

constexpr std::uint32_t kSpirvMagic = 0x07230203;

void check_spirv(const KernelBinary& binary, const std::string& kernel_name) {
  KILN_CHECK(binary.format == "spirv", ErrorKind::InvalidArgument,
             "kernel '" + kernel_name + "': the Vulkan backend loads SPIR-V, not '" + binary.format + "'");
  std::uint32_t magic = 0;
  if (binary.data.size() >= sizeof magic) std::memcpy(&magic, binary.data.data(), sizeof magic);
  KILN_CHECK(binary.data.size() % 4 == 0 && binary.data.size() >= 20 && magic == kSpirvMagic, ErrorKind::Corrupt,
             "kernel '" + kernel_name + "': the " + std::to_string(binary.data.size()) +
                 "-byte binary is not a SPIR-V module");
}

}  // namespace

VulkanPipeline::VulkanPipeline(std::shared_ptr<const DeviceContext> context, const KernelBinary& binary,
                               std::uint32_t num_buffers, std::uint32_t num_params,
                               std::vector<std::uint32_t> texel_widths, const std::string& kernel_name,
                               VkPipelineCache cache)
    : num_buffers_(num_buffers), num_params_(num_params), texel_widths_(std::move(texel_widths)) {
  check_spirv(binary, kernel_name);
  const DeviceFunctions& vk = context->vk();
  const VkDevice device = context->handle();
  const std::string where = " for kernel '" + kernel_name + "'";

  KILN_CHECK(texel_widths_.empty() || texel_widths_.size() == num_buffers, ErrorKind::Internal,
             "kernel '" + kernel_name + "' has " + std::to_string(num_buffers) + " buffers but " +
                 std::to_string(texel_widths_.size()) + " texel widths");
  const TargetDesc& target = context->target();
  for (std::uint32_t width : texel_widths_) {
    KILN_CHECK(width == 0 || width == 1 || width == 4, ErrorKind::Internal,
               "kernel '" + kernel_name + "' has a texel buffer of width " + std::to_string(width));
    KILN_CHECK(width == 0 || (width == 1 ? target.texel_r32f : target.texel_rgba32f), ErrorKind::Unsupported,
               "kernel '" + kernel_name + "' reads " + (width == 1 ? "R32" : "RGBA32") +
                   " float texel buffers, which " + target.device_name + " does not support");
    num_texel_buffers_ += width != 0 ? 1 : 0;
  }
  std::vector<VkDescriptorSetLayoutBinding> bindings(num_buffers);
  for (std::uint32_t i = 0; i < num_buffers; ++i) {
    bindings[i].binding = i;
    bindings[i].descriptorType =
        texel_width(i) != 0 ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo set_info{};
  set_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  set_info.bindingCount = num_buffers;
  set_info.pBindings = bindings.data();
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  check_vk(vk.vkCreateDescriptorSetLayout(device, &set_info, nullptr, &set_layout),
           "vkCreateDescriptorSetLayout" + where);
  set_layout_ = {context, set_layout};

  VkPipelineLayoutCreateInfo layout_info{};
  layout_info.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &set_layout;
  VkPushConstantRange params_range{};
  params_range.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  params_range.offset = 0;
  params_range.size = num_params * static_cast<std::uint32_t>(sizeof(std::int32_t));
  const std::uint32_t max_bytes = context->target().max_kernel_param_bytes;
  KILN_CHECK(max_bytes == 0 || params_range.size <= max_bytes, ErrorKind::Unsupported,
             "kernel '" + kernel_name + "' takes " + std::to_string(params_range.size) +
                 " bytes of push constants; the device allows " + std::to_string(max_bytes));
  if (num_params > 0) {
    layout_info.pushConstantRangeCount = 1;
    layout_info.pPushConstantRanges = &params_range;
  }
  VkPipelineLayout layout = VK_NULL_HANDLE;
  check_vk(vk.vkCreatePipelineLayout(device, &layout_info, nullptr, &layout), "vkCreatePipelineLayout" + where);
  layout_ = {context, layout};

  VkShaderModuleCreateInfo module_info{};
  module_info.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  module_info.codeSize = binary.data.size();
  // Vulkan wants 4-byte aligned words; copy rather than trust the vector's alignment.
  std::vector<std::uint32_t> words(binary.data.size() / 4);
  std::memcpy(words.data(), binary.data.data(), binary.data.size());
  module_info.pCode = words.data();
  VkShaderModule module = VK_NULL_HANDLE;
  check_vk(vk.vkCreateShaderModule(device, &module_info, nullptr, &module), "vkCreateShaderModule" + where);
  // The pipeline keeps what it needs; the module goes when this scope ends.
  Owned<VkShaderModule, &DeviceFunctions::vkDestroyShaderModule> module_owner(context, module);

  VkComputePipelineCreateInfo pipeline_info{};
  pipeline_info.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  pipeline_info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  pipeline_info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  pipeline_info.stage.module = module;
  pipeline_info.stage.pName = "main";
  pipeline_info.layout = layout;
  VkPipeline pipeline = VK_NULL_HANDLE;
  check_vk(vk.vkCreateComputePipelines(device, cache, 1, &pipeline_info, nullptr, &pipeline),
           "vkCreateComputePipelines" + where);
  pipeline_ = {context, pipeline};
}

}  // namespace kiln::backend::vulkan

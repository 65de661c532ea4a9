// SPIR-V binaries -> Vulkan compute pipelines.
#include "backends/vulkan/pipeline.h"

#include "backends/vulkan/result.h"
#include "src/base/check.h"

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
                               const KernelSource& source, VkPipelineCache cache)
    : num_buffers_(source.num_buffers), num_params_(source.num_params), texel_widths_(source.texel_widths) {
  const std::uint32_t num_buffers = num_buffers_;
  const std::uint32_t num_params = num_params_;
  const std::string& kernel_name = source.name;
  check_spirv(binary, kernel_name);
  const DeviceFunctions& vk = context->vk();
  const VkDevice device = context->handle();
  const std::string where = " for kernel '" + kernel_name + "'";

  KILN_CHECK(texel_widths_.empty() || texel_widths_.size() == num_buffers, ErrorKind::Internal,
             "kernel '" + kernel_name + "' has " + std::to_string(num_buffers) + " buffers but " +
                 std::to_string(texel_widths_.size()) + " texel widths");
  const TargetDesc& target = context->target();
  KILN_CHECK(source.texel_elements.empty() || source.texel_elements.size() == num_buffers, ErrorKind::Internal,
             "kernel '" + kernel_name + "' has " + std::to_string(num_buffers) + " buffers but " +
                 std::to_string(source.texel_elements.size()) + " texel element types");
  texel_formats_.assign(num_buffers, VK_FORMAT_UNDEFINED);
  texel_bytes_.assign(num_buffers, 0);
  for (std::size_t i = 0; i < texel_widths_.size(); ++i) {
    const std::uint32_t width = texel_widths_[i];
    if (width == 0) continue;
    KILN_CHECK(width == 1 || width == 4, ErrorKind::Internal,
               "kernel '" + kernel_name + "' has a texel buffer of width " + std::to_string(width));
    const TexelElement element = i < source.texel_elements.size() ? source.texel_elements[i] : TexelElement::f32;
    if (element == TexelElement::f32) {
      KILN_CHECK(width == 1 ? target.texel_r32f : target.texel_rgba32f, ErrorKind::Unsupported,
                 "kernel '" + kernel_name + "' reads " + (width == 1 ? "R32" : "RGBA32") +
                     " float texel buffers, which " + target.device_name + " does not support");
      texel_formats_[i] = width == 1 ? VK_FORMAT_R32_SFLOAT : VK_FORMAT_R32G32B32A32_SFLOAT;
      texel_bytes_[i] = std::uint64_t{width} * 4;
    } else {
      KILN_CHECK(target.texel_16bit, ErrorKind::Unsupported,
                 "kernel '" + kernel_name + "' reads 16-bit texel buffers, which " + target.device_name +
                     " does not support");
      // bf16 elements are read as unsigned integers and widened by the kernel.
      const bool bf16 = element == TexelElement::bf16;
      texel_formats_[i] = width == 1 ? (bf16 ? VK_FORMAT_R16_UINT : VK_FORMAT_R16_SFLOAT)
                                     : (bf16 ? VK_FORMAT_R16G16B16A16_UINT : VK_FORMAT_R16G16B16A16_SFLOAT);
      texel_bytes_[i] = std::uint64_t{width} * 2;
    }
    ++num_texel_buffers_;
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

// The VkDevice, its compute queue and queue submission.
#include "backends/vulkan/context.h"

#include "backends/vulkan/result.h"
#include "src/base/check.h"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

namespace kiln::backend::vulkan {

DeviceContext::DeviceContext(std::shared_ptr<Instance> instance, PhysicalDevice physical, int index)
    : instance_(std::move(instance)),
      physical_(std::move(physical)),
      label_("Vulkan device " + std::to_string(index) + " '" + physical_.target.device_name + "'") {
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info{};
  queue_info.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  queue_info.queueFamilyIndex = physical_.compute_queue_family;
  queue_info.queueCount = 1;
  queue_info.pQueuePriorities = &priority;

  // Chain only the feature structs the device's API version knows.
  VkPhysicalDeviceShaderFloat16Int8Features float16{};
  float16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
  float16.shaderFloat16 = physical_.shader_float16 ? VK_TRUE : VK_FALSE;
  VkPhysicalDevice8BitStorageFeatures storage8{};
  storage8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES;
  storage8.storageBuffer8BitAccess = physical_.storage_buffer_8bit ? VK_TRUE : VK_FALSE;
  float16.pNext = &storage8;
  VkPhysicalDevice16BitStorageFeatures storage16{};
  storage16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  storage16.storageBuffer16BitAccess = physical_.storage_buffer_16bit ? VK_TRUE : VK_FALSE;
  if (physical_.api_version >= VK_API_VERSION_1_2) storage16.pNext = &float16;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &storage16;
  features.features.shaderInt64 = physical_.shader_int64 ? VK_TRUE : VK_FALSE;
  // Bounds checks in the driver, so that no kernel writes past what kiln bound
  // (a compiled-model file is code: docs/compiled-models.md). Desktop GPUs
  // check buffer bounds in hardware; KILN_VULKAN_ROBUST_ACCESS=0 turns it off.
  const char* robust_setting = std::getenv("KILN_VULKAN_ROBUST_ACCESS");
  robust_buffer_access_ = physical_.robust_buffer_access && !(robust_setting && std::string(robust_setting) == "0");
  features.features.robustBufferAccess = robust_buffer_access_ ? VK_TRUE : VK_FALSE;

  std::vector<const char*> extensions;
  if (physical_.portability_subset) extensions.push_back("VK_KHR_portability_subset");

  VkDeviceCreateInfo create_info{};
  create_info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  create_info.pNext = &features;
  create_info.queueCreateInfoCount = 1;
  create_info.pQueueCreateInfos = &queue_info;
  create_info.enabledExtensionCount = static_cast<std::uint32_t>(extensions.size());
  create_info.ppEnabledExtensionNames = extensions.data();

  const InstanceFunctions& ivk = instance_->functions();
  const VkResult created = ivk.vkCreateDevice(physical_.handle, &create_info, nullptr, &device_);
  KILN_CHECK(created == VK_SUCCESS, ErrorKind::DeviceUnavailable,
             "vkCreateDevice for " + label_ + " failed: " + vk_result_name(created));
  try {
    functions_ = load_device_functions(ivk, device_);
  } catch (...) {
    auto destroy_device = reinterpret_cast<PFN_vkDestroyDevice>(ivk.vkGetDeviceProcAddr(device_, "vkDestroyDevice"));
    if (destroy_device != nullptr) destroy_device(device_, nullptr);
    throw;
  }
  functions_.vkGetDeviceQueue(device_, physical_.compute_queue_family, 0, &queue_);
}

DeviceContext::~DeviceContext() {
  functions_.vkDestroyDevice(device_, nullptr);
  if (instance_->validation() == ValidationMode::fatal && instance_->has_validation_messages()) {
    for (const std::string& message : instance_->take_validation_messages())
      std::fprintf(stderr, "kiln: Vulkan validation (unreported at destruction of %s): %s\n", label_.c_str(),
                   message.c_str());
    std::abort();
  }
}

void DeviceContext::submit_and_wait(VkCommandBuffer commands, VkFence fence) const {
  VkSubmitInfo submit{};
  submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &commands;
  {
    std::lock_guard lock(queue_mutex_);
    const VkResult submitted = functions_.vkQueueSubmit(queue_, 1, &submit, fence);
    if (submitted != VK_SUCCESS) check_vk(submitted, "vkQueueSubmit on " + label_);
  }
  const VkResult waited =
      functions_.vkWaitForFences(device_, 1, &fence, VK_TRUE, std::numeric_limits<std::uint64_t>::max());
  if (waited != VK_SUCCESS) check_vk(waited, "vkWaitForFences on " + label_);
}

}  // namespace kiln::backend::vulkan

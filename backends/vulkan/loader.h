// The Vulkan loader, opened at run time (dlopen) so that kiln starts on
// machines without Vulkan, and the function tables kiln calls through.
//
// Every Vulkan function kiln uses is listed once below; the tables are filled
// from vkGetInstanceProcAddr / vkGetDeviceProcAddr, so device calls go
// straight to the driver (through any enabled layers).
#pragma once

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

#include <string>

namespace kiln::backend::vulkan {

#define KILN_VK_GLOBAL_FUNCTIONS(X)       \
  X(vkCreateInstance)                     \
  X(vkEnumerateInstanceVersion)           \
  X(vkEnumerateInstanceLayerProperties)   \
  X(vkEnumerateInstanceExtensionProperties)

#define KILN_VK_INSTANCE_FUNCTIONS(X)         \
  X(vkDestroyInstance)                        \
  X(vkEnumeratePhysicalDevices)               \
  X(vkGetPhysicalDeviceProperties)            \
  X(vkGetPhysicalDeviceProperties2)           \
  X(vkGetPhysicalDeviceFeatures2)             \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkGetPhysicalDeviceMemoryProperties)      \
  X(vkGetPhysicalDeviceFormatProperties)      \
  X(vkEnumerateDeviceExtensionProperties)     \
  X(vkCreateDevice)                           \
  X(vkGetDeviceProcAddr)

// From VK_EXT_debug_utils: null unless validation is on.
#define KILN_VK_DEBUG_FUNCTIONS(X)   \
  X(vkCreateDebugUtilsMessengerEXT)  \
  X(vkDestroyDebugUtilsMessengerEXT)

#define KILN_VK_DEVICE_FUNCTIONS(X)    \
  X(vkDestroyDevice)                   \
  X(vkGetDeviceQueue)                  \
  X(vkQueueSubmit)                     \
  X(vkCreateBuffer)                    \
  X(vkDestroyBuffer)                   \
  X(vkCreateBufferView)                \
  X(vkDestroyBufferView)               \
  X(vkGetBufferMemoryRequirements)     \
  X(vkAllocateMemory)                  \
  X(vkFreeMemory)                      \
  X(vkBindBufferMemory)                \
  X(vkMapMemory)                       \
  X(vkUnmapMemory)                     \
  X(vkCreateShaderModule)              \
  X(vkDestroyShaderModule)             \
  X(vkCreateDescriptorSetLayout)       \
  X(vkDestroyDescriptorSetLayout)      \
  X(vkCreatePipelineLayout)            \
  X(vkDestroyPipelineLayout)           \
  X(vkCreateComputePipelines)          \
  X(vkDestroyPipeline)                 \
  X(vkCreatePipelineCache)             \
  X(vkDestroyPipelineCache)            \
  X(vkGetPipelineCacheData)            \
  X(vkCreateDescriptorPool)            \
  X(vkDestroyDescriptorPool)           \
  X(vkAllocateDescriptorSets)          \
  X(vkUpdateDescriptorSets)            \
  X(vkCreateCommandPool)               \
  X(vkDestroyCommandPool)              \
  X(vkAllocateCommandBuffers)          \
  X(vkBeginCommandBuffer)              \
  X(vkEndCommandBuffer)                \
  X(vkCmdBindPipeline)                 \
  X(vkCmdBindDescriptorSets)           \
  X(vkCmdPushConstants)                \
  X(vkCmdDispatch)                     \
  X(vkCmdPipelineBarrier)              \
  X(vkCmdCopyBuffer)                   \
  X(vkCmdResetQueryPool)               \
  X(vkCmdWriteTimestamp)               \
  X(vkCreateQueryPool)                 \
  X(vkDestroyQueryPool)                \
  X(vkGetQueryPoolResults)             \
  X(vkCreateFence)                     \
  X(vkDestroyFence)                    \
  X(vkResetFences)                     \
  X(vkWaitForFences)

#define KILN_VK_DECLARE_FUNCTION(name) PFN_##name name = nullptr;

struct GlobalFunctions {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  KILN_VK_GLOBAL_FUNCTIONS(KILN_VK_DECLARE_FUNCTION)
};

struct InstanceFunctions {
  KILN_VK_INSTANCE_FUNCTIONS(KILN_VK_DECLARE_FUNCTION)
  KILN_VK_DEBUG_FUNCTIONS(KILN_VK_DECLARE_FUNCTION)
};

struct DeviceFunctions {
  KILN_VK_DEVICE_FUNCTIONS(KILN_VK_DECLARE_FUNCTION)
};

#undef KILN_VK_DECLARE_FUNCTION

// The process's Vulkan loader, opened once and never closed. Returns nullptr
// and sets `reason` ("no Vulkan loader: libvulkan.so.1: cannot open ...") when
// it is missing. Thread-safe.
const GlobalFunctions* load_vulkan_loader(std::string& reason);

// Fills the instance table; the debug functions only when `with_debug_utils`.
// Throws Error(DeviceUnavailable) naming a function the loader lacks.
InstanceFunctions load_instance_functions(const GlobalFunctions& global, VkInstance instance, bool with_debug_utils);

// Fills the device table. Throws Error(DeviceUnavailable) naming a missing function.
DeviceFunctions load_device_functions(const InstanceFunctions& instance_functions, VkDevice device);

}  // namespace kiln::backend::vulkan

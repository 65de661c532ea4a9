// VkResult names and their translation into kiln::Error.
#pragma once

#include "backends/vulkan/loader.h"

#include <string>
#include <string_view>

namespace kiln::backend::vulkan {

// "VK_ERROR_OUT_OF_DEVICE_MEMORY"; "VkResult(-13)" for codes this file does not know.
std::string vk_result_name(VkResult result);

// Throws when `result` is an error: OutOfMemory for the two out-of-memory
// codes, DeviceUnavailable for a lost device, Internal otherwise. The message
// names the call (`what`, e.g. "vkCreateComputePipelines") and the result.
void check_vk(VkResult result, std::string_view what);

}  // namespace kiln::backend::vulkan

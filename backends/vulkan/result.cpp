// VkResult names and their translation into kiln::Error.
#include "backends/vulkan/result.h"

#include <kiln/error.h>

#include <string>

namespace kiln::backend::vulkan {

std::string vk_result_name(VkResult result) {
  switch (result) {
#define KILN_VK_RESULT_CASE(name) \
  case name: return #name;
    KILN_VK_RESULT_CASE(VK_SUCCESS)
    KILN_VK_RESULT_CASE(VK_NOT_READY)
    KILN_VK_RESULT_CASE(VK_TIMEOUT)
    KILN_VK_RESULT_CASE(VK_EVENT_SET)
    KILN_VK_RESULT_CASE(VK_EVENT_RESET)
    KILN_VK_RESULT_CASE(VK_INCOMPLETE)
    KILN_VK_RESULT_CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
    KILN_VK_RESULT_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    KILN_VK_RESULT_CASE(VK_ERROR_INITIALIZATION_FAILED)
    KILN_VK_RESULT_CASE(VK_ERROR_DEVICE_LOST)
    KILN_VK_RESULT_CASE(VK_ERROR_MEMORY_MAP_FAILED)
    KILN_VK_RESULT_CASE(VK_ERROR_LAYER_NOT_PRESENT)
    KILN_VK_RESULT_CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    KILN_VK_RESULT_CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    KILN_VK_RESULT_CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    KILN_VK_RESULT_CASE(VK_ERROR_TOO_MANY_OBJECTS)
    KILN_VK_RESULT_CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
    KILN_VK_RESULT_CASE(VK_ERROR_FRAGMENTED_POOL)
    KILN_VK_RESULT_CASE(VK_ERROR_UNKNOWN)
    KILN_VK_RESULT_CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
    KILN_VK_RESULT_CASE(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    KILN_VK_RESULT_CASE(VK_ERROR_FRAGMENTATION)
    KILN_VK_RESULT_CASE(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    KILN_VK_RESULT_CASE(VK_PIPELINE_COMPILE_REQUIRED)
    KILN_VK_RESULT_CASE(VK_ERROR_VALIDATION_FAILED_EXT)
#undef KILN_VK_RESULT_CASE
    default: return "VkResult(" + std::to_string(static_cast<int>(result)) + ")";
  }
}

void check_vk(VkResult result, std::string_view what) {
  if (result >= 0) return;
  const std::string message = std::string(what) + " failed: " + vk_result_name(result);
  switch (result) {
    case VK_ERROR_OUT_OF_HOST_MEMORY:
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: throw_error(ErrorKind::OutOfMemory, message);
    case VK_ERROR_DEVICE_LOST: throw_error(ErrorKind::DeviceUnavailable, message + ": the device was lost (make its models again)");
    default: throw_error(ErrorKind::Internal, message);
  }
}

}  // namespace kiln::backend::vulkan

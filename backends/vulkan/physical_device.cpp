// Reads a physical device's properties, features and queues into a
// PhysicalDevice (and its TargetDesc).
#include "backends/vulkan/physical_device.h"

#include "src/base/check.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

namespace kiln::backend::vulkan {
namespace {

constexpr std::uint32_t kVendorNvidia = 0x10DE;

std::string device_type_name(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete-gpu";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated-gpu";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual-gpu";
    default: return "other";
  }
}

std::string api_version_text(std::uint32_t version) {
  return std::to_string(VK_API_VERSION_MAJOR(version)) + "." + std::to_string(VK_API_VERSION_MINOR(version)) + "." +
         std::to_string(VK_API_VERSION_PATCH(version));
}

// driverVersion's encoding is vendor-specific; most follow VK_MAKE_API_VERSION.
std::string driver_version_text(std::uint32_t vendor, std::uint32_t version) {
  if (vendor == kVendorNvidia)
    return std::to_string((version >> 22) & 0x3ff) + "." + std::to_string((version >> 14) & 0xff) + "." +
           std::to_string((version >> 6) & 0xff) + "." + std::to_string(version & 0x3f);
  return api_version_text(version);
}

std::vector<std::string> device_extensions(const InstanceFunctions& vk, VkPhysicalDevice device) {
  std::uint32_t count = 0;
  if (vk.vkEnumerateDeviceExtensionProperties(device, nullptr, &count, nullptr) != VK_SUCCESS) return {};
  std::vector<VkExtensionProperties> properties(count);
  if (vk.vkEnumerateDeviceExtensionProperties(device, nullptr, &count, properties.data()) < 0) return {};
  properties.resize(count);
  std::vector<std::string> names;
  for (const VkExtensionProperties& p : properties) names.emplace_back(p.extensionName);
  return names;
}

// Prefers a compute family with timestamps; any compute family otherwise.
std::optional<std::uint32_t> pick_compute_queue_family(const std::vector<VkQueueFamilyProperties>& families) {
  std::optional<std::uint32_t> chosen;
  for (std::uint32_t i = 0; i < families.size(); ++i) {
    if ((families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) == 0 || families[i].queueCount == 0) continue;
    if (!chosen) chosen = i;
    if (families[i].timestampValidBits > 0 && families[*chosen].timestampValidBits == 0) chosen = i;
  }
  return chosen;
}

std::uint64_t device_local_bytes(const VkPhysicalDeviceMemoryProperties& memory) {
  std::uint64_t largest_local = 0;
  std::uint64_t largest_any = 0;
  for (std::uint32_t i = 0; i < memory.memoryHeapCount; ++i) {
    const VkMemoryHeap& heap = memory.memoryHeaps[i];
    largest_any = std::max<std::uint64_t>(largest_any, heap.size);
    if ((heap.flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0)
      largest_local = std::max<std::uint64_t>(largest_local, heap.size);
  }
  return largest_local != 0 ? largest_local : largest_any;
}

// Native f16 conversions where the driver promises kir's rule (round to
// nearest even, subnormals kept); KILN_VULKAN_F16_CONVERSION=integer,
// native or native-rte asks for one, where the driver offers its execution
// modes (native-rte: a test of the native spelling on a driver that keeps
// subnormals without promising it, such as lavapipe).
F16Conversion f16_conversion_for(const PhysicalDevice& device) {
  const bool promised = device.storage_buffer_16bit && device.f16_rounding_rte && device.f16_denorm_preserve;
  const char* setting = std::getenv("KILN_VULKAN_F16_CONVERSION");
  if (setting == nullptr || *setting == '\0') return promised ? F16Conversion::native : F16Conversion::integer;
  F16Conversion asked;
  try {
    asked = parse_f16_conversion(setting);
  } catch (const Error& e) {
    throw_error(ErrorKind::InvalidArgument, std::string("KILN_VULKAN_F16_CONVERSION: ") + e.what());
  }
  const bool offered = asked == F16Conversion::integer ||
                       (asked == F16Conversion::native_rte && device.storage_buffer_16bit && device.f16_rounding_rte) ||
                       (asked == F16Conversion::native && promised);
  KILN_CHECK(offered, ErrorKind::Unsupported,
             "KILN_VULKAN_F16_CONVERSION=" + std::string(setting) + ": the device does not offer " +
                 (asked == F16Conversion::native ? "shaderRoundingModeRTEFloat16 and shaderDenormPreserveFloat16"
                                                 : "shaderRoundingModeRTEFloat16") +
                 " with 16-bit storage buffers");
  return asked;
}

std::optional<PhysicalDevice> query_physical_device(const Instance& instance, VkPhysicalDevice handle) {
  const InstanceFunctions& vk = instance.functions();
  VkPhysicalDeviceProperties basic{};
  vk.vkGetPhysicalDeviceProperties(handle, &basic);
  PhysicalDevice device;
  device.handle = handle;
  device.api_version = std::min(basic.apiVersion, instance.api_version());
  if (device.api_version < VK_API_VERSION_1_1) return std::nullopt;
  const bool vulkan_1_2 = device.api_version >= VK_API_VERSION_1_2;

  std::uint32_t family_count = 0;
  vk.vkGetPhysicalDeviceQueueFamilyProperties(handle, &family_count, nullptr);
  std::vector<VkQueueFamilyProperties> families(family_count);
  vk.vkGetPhysicalDeviceQueueFamilyProperties(handle, &family_count, families.data());
  const std::optional<std::uint32_t> family = pick_compute_queue_family(families);
  if (!family) return std::nullopt;
  device.compute_queue_family = *family;
  device.timestamp_valid_bits = families[*family].timestampValidBits;

  VkPhysicalDeviceFloatControlsProperties float_controls{};
  float_controls.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES;
  VkPhysicalDeviceDriverProperties driver{};
  driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
  driver.pNext = &float_controls;
  VkPhysicalDeviceMaintenance3Properties maintenance3{};
  maintenance3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
  maintenance3.pNext = vulkan_1_2 ? &driver : nullptr;
  VkPhysicalDeviceSubgroupProperties subgroup{};
  subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  subgroup.pNext = &maintenance3;
  VkPhysicalDeviceProperties2 properties{};
  properties.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  properties.pNext = &subgroup;
  vk.vkGetPhysicalDeviceProperties2(handle, &properties);

  VkPhysicalDeviceShaderFloat16Int8Features float16{};
  float16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
  VkPhysicalDevice8BitStorageFeatures storage8{};
  storage8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES;
  float16.pNext = &storage8;
  VkPhysicalDevice16BitStorageFeatures storage16{};
  storage16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  storage16.pNext = vulkan_1_2 ? &float16 : nullptr;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &storage16;
  vk.vkGetPhysicalDeviceFeatures2(handle, &features);

  vk.vkGetPhysicalDeviceMemoryProperties(handle, &device.memory);
  // Uniform texel buffers of the formats kernels read through.
  auto texel_format = [&](VkFormat format) {
    VkFormatProperties format_properties{};
    vk.vkGetPhysicalDeviceFormatProperties(handle, format, &format_properties);
    return (format_properties.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT) != 0;
  };
  const std::vector<std::string> extensions = device_extensions(vk, handle);
  device.portability_subset =
      std::find(extensions.begin(), extensions.end(), "VK_KHR_portability_subset") != extensions.end();

  const VkPhysicalDeviceLimits& limits = basic.limits;
  device.shader_float16 = float16.shaderFloat16 == VK_TRUE;
  device.f16_rounding_rte = vulkan_1_2 && float_controls.shaderRoundingModeRTEFloat16 == VK_TRUE;
  device.f16_denorm_preserve = vulkan_1_2 && float_controls.shaderDenormPreserveFloat16 == VK_TRUE;
  device.storage_buffer_16bit = storage16.storageBuffer16BitAccess == VK_TRUE;
  device.shader_int64 = features.features.shaderInt64 == VK_TRUE;
  device.robust_buffer_access = features.features.robustBufferAccess == VK_TRUE;
  device.storage_buffer_8bit = vulkan_1_2 && storage8.storageBuffer8BitAccess == VK_TRUE;
  device.timestamp_period_ns = limits.timestampPeriod;
  device.vendor_id = basic.vendorID;
  device.device_id = basic.deviceID;
  device.driver_version = basic.driverVersion;
  std::copy(std::begin(basic.pipelineCacheUUID), std::end(basic.pipelineCacheUUID),
            device.pipeline_cache_uuid.begin());
  device.max_allocation_bytes = maintenance3.maxMemoryAllocationSize;
  device.max_bound_storage_buffers = std::min({limits.maxPerStageDescriptorStorageBuffers,
                                               limits.maxDescriptorSetStorageBuffers, limits.maxPerStageResources});

  TargetDesc& t = device.target;
  t.backend = "vulkan";
  t.device_name = basic.deviceName;
  t.device_type = device_type_name(basic.deviceType);
  t.cpu_cores = basic.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  t.discrete_gpu = basic.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
  // driverInfo carries the version where drivers fill it in (Mesa, NVIDIA, AMD).
  const std::string driver_version = driver_version_text(basic.vendorID, basic.driverVersion);
  const std::string driver_info = vulkan_1_2 ? driver.driverInfo : "";
  t.driver = (vulkan_1_2 ? std::string(driver.driverName) + " " : std::string()) +
             (driver_info.empty() ? "driver version " + driver_version : driver_info);
  t.api_version = "Vulkan " + api_version_text(basic.apiVersion);
  t.arch = "spirv1.3";
  t.subgroup_size = subgroup.subgroupSize;
  std::copy(std::begin(limits.maxComputeWorkGroupSize), std::end(limits.maxComputeWorkGroupSize),
            t.max_workgroup_size.begin());
  t.max_workgroup_invocations = limits.maxComputeWorkGroupInvocations;
  std::copy(std::begin(limits.maxComputeWorkGroupCount), std::end(limits.maxComputeWorkGroupCount),
            t.max_workgroup_count.begin());
  t.max_shared_memory_bytes = limits.maxComputeSharedMemorySize;
  t.max_buffer_bytes = limits.maxStorageBufferRange;
  t.device_memory_bytes = device_local_bytes(device.memory);
  t.texel_r32f = texel_format(VK_FORMAT_R32_SFLOAT);
  t.texel_rgba32f = texel_format(VK_FORMAT_R32G32B32A32_SFLOAT);
  t.max_texel_buffer_elements = t.texel_r32f || t.texel_rgba32f ? limits.maxTexelBufferElements : 0;
  // f16 views read as floats, bf16 ones as unsigned integers the kernel widens.
  t.texel_16bit = t.max_texel_buffer_elements != 0 && texel_format(VK_FORMAT_R16_SFLOAT) &&
                  texel_format(VK_FORMAT_R16G16B16A16_SFLOAT) && texel_format(VK_FORMAT_R16_UINT) &&
                  texel_format(VK_FORMAT_R16G16B16A16_UINT);
  // One alignment for every binding into an arena: storage buffers' and, where
  // kernels may read texel buffers, texel views' (both powers of two).
  t.min_buffer_offset_alignment = limits.minStorageBufferOffsetAlignment;
  if (t.max_texel_buffer_elements != 0)
    t.min_buffer_offset_alignment =
        std::max<std::uint64_t>(t.min_buffer_offset_alignment, limits.minTexelBufferOffsetAlignment);
  const bool compute_subgroups = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
  t.subgroup_basic = compute_subgroups && (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT) != 0;
  t.subgroup_broadcast = t.subgroup_basic && (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_BALLOT_BIT) != 0;
  t.subgroup_partitions = false;
  t.max_kernel_buffers = device.max_bound_storage_buffers;
  t.max_kernel_param_bytes = limits.maxPushConstantsSize;
  t.fp16 = device.shader_float16;
  t.int64 = device.shader_int64;
  t.storage8 = device.storage_buffer_8bit;
  t.storage16 = device.storage_buffer_16bit;
  t.f16_conversion = f16_conversion_for(device);
  t.timestamps = limits.timestampComputeAndGraphics == VK_TRUE && device.timestamp_valid_bits > 0;
  return device;
}

}  // namespace

std::vector<PhysicalDevice> query_physical_devices(const Instance& instance) {
  std::vector<PhysicalDevice> usable;
  for (VkPhysicalDevice handle : instance.physical_devices())
    if (std::optional<PhysicalDevice> device = query_physical_device(instance, handle))
      usable.push_back(std::move(*device));
  return usable;
}

}  // namespace kiln::backend::vulkan

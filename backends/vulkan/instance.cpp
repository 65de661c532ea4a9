// The VkInstance, the validation layer and its message channel.
#include "backends/vulkan/instance.h"

#include "backends/vulkan/result.h"
#include "src/base/check.h"

#include <kiln/error.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>

namespace kiln::backend::vulkan {
namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";
// The highest version kiln is written against; drivers may report less.
constexpr std::uint32_t kRequestedApiVersion = VK_API_VERSION_1_3;

std::string version_text(std::uint32_t version) {
  return std::to_string(VK_API_VERSION_MAJOR(version)) + "." + std::to_string(VK_API_VERSION_MINOR(version)) + "." +
         std::to_string(VK_API_VERSION_PATCH(version));
}

bool has_layer(const GlobalFunctions& vk, const char* name) {
  std::uint32_t count = 0;
  if (vk.vkEnumerateInstanceLayerProperties(&count, nullptr) != VK_SUCCESS) return false;
  std::vector<VkLayerProperties> layers(count);
  if (vk.vkEnumerateInstanceLayerProperties(&count, layers.data()) < 0) return false;
  layers.resize(count);
  return std::any_of(layers.begin(), layers.end(),
                     [&](const VkLayerProperties& layer) { return std::strcmp(layer.layerName, name) == 0; });
}

// Extensions of the implementation and, if `layer` is set, of that layer.
std::vector<std::string> instance_extensions(const GlobalFunctions& vk, const char* layer) {
  std::uint32_t count = 0;
  if (vk.vkEnumerateInstanceExtensionProperties(layer, &count, nullptr) != VK_SUCCESS) return {};
  std::vector<VkExtensionProperties> properties(count);
  if (vk.vkEnumerateInstanceExtensionProperties(layer, &count, properties.data()) < 0) return {};
  properties.resize(count);
  std::vector<std::string> names;
  for (const VkExtensionProperties& p : properties) names.emplace_back(p.extensionName);
  return names;
}

bool contains(const std::vector<std::string>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string_view mode_name(ValidationMode mode) {
  switch (mode) {
    case ValidationMode::off: return "off";
    case ValidationMode::report: return "report";
    case ValidationMode::fatal: return "fatal";
    case ValidationMode::collect: return "collect";
  }
  return "?";
}

}  // namespace

ValidationMode validation_mode_from_environment() {
  const char* value = std::getenv("KILN_VULKAN_VALIDATION");
  if (value == nullptr) return ValidationMode::off;
  const std::string_view text(value);
  if (text.empty() || text == "0") return ValidationMode::off;
  if (text == "1") return ValidationMode::report;
  if (text == "fatal") return ValidationMode::fatal;
  throw_error(ErrorKind::InvalidArgument,
              "KILN_VULKAN_VALIDATION='" + std::string(text) + "' is not one of 0, 1, fatal");
}

Instance::Instance(ValidationMode mode) : mode_(mode) {
  std::string reason;
  global_ = load_vulkan_loader(reason);
  KILN_CHECK(global_ != nullptr, ErrorKind::DeviceUnavailable, reason);

  std::uint32_t loader_version = VK_API_VERSION_1_0;
  if (global_->vkEnumerateInstanceVersion != nullptr) global_->vkEnumerateInstanceVersion(&loader_version);
  KILN_CHECK(loader_version >= VK_API_VERSION_1_1, ErrorKind::DeviceUnavailable,
             "the Vulkan loader supports only Vulkan " + version_text(loader_version) + "; kiln needs 1.1");
  api_version_ = kRequestedApiVersion;

  std::vector<const char*> layers;
  std::vector<const char*> extensions;
  const std::vector<std::string> available = instance_extensions(*global_, nullptr);
  VkInstanceCreateFlags flags = 0;
  // Lists portability (layered) implementations such as MoltenVK too.
  if (contains(available, VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
    extensions.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
    flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  }

  bool validation_features = false;
  if (mode_ != ValidationMode::off) {
    const bool layer_found = has_layer(*global_, kValidationLayer);
    const std::vector<std::string> layer_extensions =
        layer_found ? instance_extensions(*global_, kValidationLayer) : std::vector<std::string>{};
    const bool debug_utils = contains(available, VK_EXT_DEBUG_UTILS_EXTENSION_NAME) ||
                             contains(layer_extensions, VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    if (!layer_found || !debug_utils) {
      const std::string missing = std::string(!layer_found ? kValidationLayer : VK_EXT_DEBUG_UTILS_EXTENSION_NAME) +
                                  " is not available (install the vulkan-validationlayers package)";
      KILN_CHECK(mode_ == ValidationMode::report, ErrorKind::DeviceUnavailable,
                 "Vulkan validation in " + std::string(mode_name(mode_)) + " mode is required, but " + missing);
      std::fprintf(stderr, "kiln: KILN_VULKAN_VALIDATION=1 ignored: %s\n", missing.c_str());
      mode_ = ValidationMode::off;
    } else {
      layers.push_back(kValidationLayer);
      // The layer stops reporting a message after 10 occurrences by default;
      // a fatal run must see every one. The layer reads this at vkCreateInstance.
      // A value the user set is kept.
      if (mode_ != ValidationMode::report) setenv("VK_LAYER_DUPLICATE_MESSAGE_LIMIT", "1000000000", 0);
      extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
      validation_features = contains(layer_extensions, VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
      if (validation_features) extensions.push_back(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
    }
  }
  const bool validating = mode_ != ValidationMode::off;

  VkApplicationInfo application{};
  application.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  application.pApplicationName = "kiln";
  application.pEngineName = "kiln";
  application.apiVersion = api_version_;

  VkDebugUtilsMessengerCreateInfoEXT messenger_info{};
  messenger_info.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
  messenger_info.messageSeverity =
      VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger_info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT;
  messenger_info.pfnUserCallback = &Instance::on_debug_message;
  messenger_info.pUserData = this;

  const VkValidationFeatureEnableEXT enabled_features[] = {
      VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT features{};
  features.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT;
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = enabled_features;
  // The chained messenger also reports during vkCreateInstance/vkDestroyInstance.
  features.pNext = &messenger_info;

  VkInstanceCreateInfo create_info{};
  create_info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  create_info.flags = flags;
  create_info.pApplicationInfo = &application;
  create_info.enabledLayerCount = static_cast<std::uint32_t>(layers.size());
  create_info.ppEnabledLayerNames = layers.data();
  create_info.enabledExtensionCount = static_cast<std::uint32_t>(extensions.size());
  create_info.ppEnabledExtensionNames = extensions.data();
  if (validating) create_info.pNext = validation_features ? static_cast<const void*>(&features) : &messenger_info;

  const VkResult created = global_->vkCreateInstance(&create_info, nullptr, &instance_);
  KILN_CHECK(created == VK_SUCCESS, ErrorKind::DeviceUnavailable,
             "vkCreateInstance failed: " + vk_result_name(created) +
                 (created == VK_ERROR_INCOMPATIBLE_DRIVER ? " (no Vulkan 1.1 driver is installed)" : ""));
  try {
    functions_ = load_instance_functions(*global_, instance_, validating);
    if (validating)
      check_vk(functions_.vkCreateDebugUtilsMessengerEXT(instance_, &messenger_info, nullptr, &messenger_),
               "vkCreateDebugUtilsMessengerEXT");
  } catch (...) {
    if (functions_.vkDestroyInstance != nullptr) functions_.vkDestroyInstance(instance_, nullptr);
    throw;
  }
}

Instance::~Instance() {
  if (messenger_ != VK_NULL_HANDLE) functions_.vkDestroyDebugUtilsMessengerEXT(instance_, messenger_, nullptr);
  functions_.vkDestroyInstance(instance_, nullptr);
  if (mode_ == ValidationMode::fatal && has_validation_messages()) {
    for (const std::string& message : take_validation_messages())
      std::fprintf(stderr, "kiln: Vulkan validation (at instance destruction): %s\n", message.c_str());
    std::abort();
  }
}

std::shared_ptr<Instance> Instance::shared() {
  struct SharedInstance {
    std::shared_ptr<Instance> instance;
    std::optional<Error> failure;
  };
  static const SharedInstance shared = []() -> SharedInstance {
    try {
      return {std::make_shared<Instance>(validation_mode_from_environment()), std::nullopt};
    } catch (const Error& error) {
      return {nullptr, error};
    }
  }();
  if (shared.failure) throw *shared.failure;
  return shared.instance;
}

std::vector<VkPhysicalDevice> Instance::physical_devices() const {
  std::uint32_t count = 0;
  check_vk(functions_.vkEnumeratePhysicalDevices(instance_, &count, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> devices(count);
  check_vk(functions_.vkEnumeratePhysicalDevices(instance_, &count, devices.data()), "vkEnumeratePhysicalDevices");
  devices.resize(count);
  return devices;
}

std::vector<std::string> Instance::take_validation_messages() {
  std::lock_guard lock(messages_mutex_);
  std::vector<std::string> taken;
  taken.swap(messages_);
  has_messages_.store(false, std::memory_order_release);
  return taken;
}

void Instance::raise_validation_errors() {
  if (mode_ != ValidationMode::fatal || !has_validation_messages()) return;
  std::string text = "Vulkan validation:";
  for (const std::string& message : take_validation_messages()) text += "\n  " + message;
  throw_error(ErrorKind::Internal, text);
}

void Instance::receive(std::string message) {
  if (mode_ == ValidationMode::report) {
    std::fprintf(stderr, "kiln: Vulkan validation: %s\n", message.c_str());
    return;
  }
  std::lock_guard lock(messages_mutex_);
  messages_.push_back(std::move(message));
  has_messages_.store(true, std::memory_order_release);
}

VKAPI_ATTR VkBool32 VKAPI_CALL Instance::on_debug_message(VkDebugUtilsMessageSeverityFlagBitsEXT /*severity*/,
                                                          VkDebugUtilsMessageTypeFlagsEXT /*types*/,
                                                          const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                          void* user_data) {
  auto* instance = static_cast<Instance*>(user_data);
  std::string message = data->pMessage != nullptr ? data->pMessage : "(no message)";
  instance->receive(std::move(message));
  // VK_FALSE: let the call proceed, as the specification requires.
  return VK_FALSE;
}

}  // namespace kiln::backend::vulkan

// The VkInstance and the validation layer's message channel.
//
// KILN_VULKAN_VALIDATION selects the validation mode of the shared instance:
// unset or "0": off; "1": on, messages printed to stderr; "fatal": on, and
// every message makes the next call on a device throw Error(Internal)
// "Vulkan validation: ...". Validation always includes synchronisation
// validation. Tests create private instances in `collect` mode to check that
// the layer really reports.
#pragma once

#include "backends/vulkan/loader.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::backend::vulkan {

enum class ValidationMode {
  off,
  report,   // print each message to stderr
  fatal,    // keep messages; raise_validation_errors() throws them
  collect,  // keep messages for take_validation_messages(); never throw or print
};

// Parses KILN_VULKAN_VALIDATION. Throws Error(InvalidArgument) on an unknown value.
ValidationMode validation_mode_from_environment();

class Instance {
 public:
  // Creates an instance with the given validation mode. Throws
  // Error(DeviceUnavailable) naming the cause (no loader, Vulkan 1.0 only,
  // vkCreateInstance's VkResult, or a missing validation layer when the mode
  // is fatal or collect).
  explicit Instance(ValidationMode mode);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  // The process-wide instance in the environment's mode, created on first use
  // (thread-safe). Throws like the constructor, every time, when that failed.
  static std::shared_ptr<Instance> shared();

  VkInstance handle() const { return instance_; }
  const GlobalFunctions& global_functions() const { return *global_; }
  const InstanceFunctions& functions() const { return functions_; }
  ValidationMode validation() const { return mode_; }
  // The instance-level API version kiln requested (at least 1.1).
  std::uint32_t api_version() const { return api_version_; }

  // The physical devices as the loader lists them.
  std::vector<VkPhysicalDevice> physical_devices() const;

  // Removes and returns the messages kept so far (fatal and collect modes).
  std::vector<std::string> take_validation_messages();
  // Fatal mode: throws Error(Internal) "Vulkan validation: ..." with every kept
  // message, if any. Other modes: does nothing. Cheap when there is none.
  void raise_validation_errors();
  bool has_validation_messages() const { return has_messages_.load(std::memory_order_acquire); }

 private:
  static VKAPI_ATTR VkBool32 VKAPI_CALL on_debug_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                         VkDebugUtilsMessageTypeFlagsEXT types,
                                                         const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                         void* user_data);
  void receive(std::string message);

  ValidationMode mode_;
  const GlobalFunctions* global_ = nullptr;
  InstanceFunctions functions_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  std::uint32_t api_version_ = 0;

  std::mutex messages_mutex_;
  std::vector<std::string> messages_;
  std::atomic<bool> has_messages_{false};
};

}  // namespace kiln::backend::vulkan

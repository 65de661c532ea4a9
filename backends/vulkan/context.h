// The VkDevice and its compute queue, shared (by shared_ptr) by every object
// made on it, so buffers, kernels and command lists may outlive the kiln
// Device that made them.
#pragma once

#include "backends/vulkan/instance.h"
#include "backends/vulkan/physical_device.h"

#include <memory>
#include <mutex>

namespace kiln::backend::vulkan {

class DeviceContext {
 public:
  // Creates the VkDevice with one compute queue and the optional features the
  // device has (fp16, 8- and 16-bit storage, int64), and robust buffer
  // access unless KILN_VULKAN_ROBUST_ACCESS=0: a kernel's access outside a
  // binding (a forged compiled-model file's, a kernel bug's) then never
  // reaches memory kiln did not bind to it. `index` is for messages.
  DeviceContext(std::shared_ptr<Instance> instance, PhysicalDevice physical, int index);
  // Destroys the VkDevice. Fatal validation mode: messages nobody raised
  // (including leaks reported at destruction) are printed, then abort().
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  VkDevice handle() const { return device_; }
  const DeviceFunctions& vk() const { return functions_; }
  const PhysicalDevice& physical() const { return physical_; }
  const TargetDesc& target() const { return physical_.target; }
  // "Vulkan device 0 'llvmpipe (...)'", for messages.
  const std::string& label() const { return label_; }
  // Whether the device was created with robustBufferAccess.
  bool robust_buffer_access() const { return robust_buffer_access_; }

  // Fatal validation mode: throws Error(Internal) with the layer's messages.
  void raise_validation_errors() const { instance_->raise_validation_errors(); }

  // Submits `commands`, then waits for `fence` (unsignalled on entry).
  // Queue access is serialised; waiting is not.
  void submit_and_wait(VkCommandBuffer commands, VkFence fence) const;

 private:
  std::shared_ptr<Instance> instance_;
  PhysicalDevice physical_;
  std::string label_;
  VkDevice device_ = VK_NULL_HANDLE;
  DeviceFunctions functions_;
  VkQueue queue_ = VK_NULL_HANDLE;
  mutable std::mutex queue_mutex_;
  bool robust_buffer_access_ = false;
};

// RAII for the plain Vulkan handles kiln owns, destroyed with `destroy`.
template <typename Handle, auto DeviceFunctions::*destroy>
class Owned {
 public:
  Owned() = default;
  Owned(std::shared_ptr<const DeviceContext> context, Handle handle)
      : context_(std::move(context)), handle_(handle) {}
  ~Owned() { reset(); }
  Owned(Owned&& other) noexcept : context_(std::move(other.context_)), handle_(other.handle_) {
    other.handle_ = VK_NULL_HANDLE;
  }
  Owned& operator=(Owned&& other) noexcept {
    if (this != &other) {
      reset();
      context_ = std::move(other.context_);
      handle_ = other.handle_;
      other.handle_ = VK_NULL_HANDLE;
    }
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;

  Handle get() const { return handle_; }
  void reset() {
    if (handle_ != VK_NULL_HANDLE) (context_->vk().*destroy)(context_->handle(), handle_, nullptr);
    handle_ = VK_NULL_HANDLE;
  }

 private:
  std::shared_ptr<const DeviceContext> context_;
  Handle handle_ = VK_NULL_HANDLE;
};

}  // namespace kiln::backend::vulkan

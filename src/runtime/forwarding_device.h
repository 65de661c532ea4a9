// A device that passes every call to another: the base of the runtime's
// wrappers (a limits profile, injected faults, memory accounting), each
// overriding only the calls it changes. Buffers, kernels and command lists
// are the wrapped device's own, so backends' casts of them still hold.
#pragma once

#include "backends/backend.h"

#include <memory>
#include <utility>

namespace kiln::runtime {

class ForwardingDevice : public backend::Device {
 public:
  explicit ForwardingDevice(std::shared_ptr<backend::Device> device) : device_(std::move(device)) {}

  const backend::TargetDesc& target() const override { return device_->target(); }
  std::shared_ptr<backend::Buffer> allocate(std::uint64_t bytes) override { return device_->allocate(bytes); }
  void upload(backend::Buffer& buffer, std::uint64_t offset, std::span<const std::byte> data) override {
    device_->upload(buffer, offset, data);
  }
  void download(const backend::Buffer& buffer, std::uint64_t offset, std::span<std::byte> data) override {
    device_->download(buffer, offset, data);
  }
  std::shared_ptr<backend::LoadedKernel> load_kernel(const backend::KernelSource& source,
                                                     const backend::KernelBinary& binary) override {
    return device_->load_kernel(source, binary);
  }
  std::unique_ptr<backend::CommandList> create_command_list() override { return device_->create_command_list(); }
  std::optional<std::string> pipeline_cache_name() const override { return device_->pipeline_cache_name(); }
  std::string restore_pipeline_cache(std::span<const std::byte> data) override {
    return device_->restore_pipeline_cache(data);
  }
  std::optional<std::vector<std::byte>> pipeline_cache_data() override { return device_->pipeline_cache_data(); }

 protected:
  friend backend::Device& backend_device(backend::Device& device);
  backend::Device& wrapped() { return *device_; }
  const backend::Device& wrapped() const { return *device_; }

 private:
  std::shared_ptr<backend::Device> device_;
};

// The backend's own device under the runtime's wrappers (a pooled device is
// wrapped at least for memory accounting), for code that needs the backend's
// type: kiln's tests of a backend's internals.
inline backend::Device& backend_device(backend::Device& device) {
  backend::Device* inner = &device;
  while (auto* wrapper = dynamic_cast<ForwardingDevice*>(inner)) inner = wrapper->device_.get();
  return *inner;
}

}  // namespace kiln::runtime

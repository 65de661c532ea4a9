#include "src/runtime/fault_injection.h"

#include "src/base/check.h"
#include "src/runtime/forwarding_device.h"

#include <mutex>
#include <string>
#include <utility>

namespace kiln::runtime {
namespace {

class FaultyCommandList final : public backend::CommandList {
 public:
  FaultyCommandList(std::unique_ptr<backend::CommandList> list, std::shared_ptr<FaultInjector> faults,
                    std::string device_name)
      : list_(std::move(list)), faults_(std::move(faults)), device_name_(std::move(device_name)) {}
  void dispatch(backend::LoadedKernel& kernel, std::array<std::uint32_t, 3> groups,
                std::span<const backend::BufferBinding> bindings, std::span<const std::int32_t> params) override {
    list_->dispatch(kernel, groups, bindings, params);
  }
  void copy(const backend::Buffer& src, std::uint64_t src_offset, backend::Buffer& dst, std::uint64_t dst_offset,
            std::uint64_t bytes) override {
    list_->copy(src, src_offset, dst, dst_offset, bytes);
  }
  void finish() override { list_->finish(); }
  void submit() override {
    faults_->before("submit", device_name_);
    list_->submit();
  }
  std::optional<double> last_device_ms() const override { return list_->last_device_ms(); }

 private:
  std::unique_ptr<backend::CommandList> list_;
  std::shared_ptr<FaultInjector> faults_;
  std::string device_name_;
};

class FaultyDevice final : public ForwardingDevice {
 public:
  FaultyDevice(std::shared_ptr<backend::Device> device, std::shared_ptr<FaultInjector> faults)
      : ForwardingDevice(std::move(device)), faults_(std::move(faults)) {}
  std::shared_ptr<backend::Buffer> allocate(std::uint64_t bytes) override {
    faults_->before("allocate", name());
    return wrapped().allocate(bytes);
  }
  void upload(backend::Buffer& buffer, std::uint64_t offset, std::span<const std::byte> data) override {
    faults_->before("upload", name());
    wrapped().upload(buffer, offset, data);
  }
  void download(const backend::Buffer& buffer, std::uint64_t offset, std::span<std::byte> data) override {
    faults_->before("download", name());
    wrapped().download(buffer, offset, data);
  }
  std::shared_ptr<backend::LoadedKernel> load_kernel(const backend::KernelSource& source,
                                                     const backend::KernelBinary& binary) override {
    faults_->before("load_kernel", name());
    return wrapped().load_kernel(source, binary);
  }
  std::unique_ptr<backend::CommandList> create_command_list() override {
    return std::make_unique<FaultyCommandList>(wrapped().create_command_list(), faults_, name());
  }

 private:
  const std::string& name() const { return target().device_name; }
  std::shared_ptr<FaultInjector> faults_;
};

std::mutex injector_mutex;
std::shared_ptr<FaultInjector> current_injector;

}  // namespace

FaultInjector::FaultInjector(std::uint64_t fail_call, ErrorKind kind) : fail_call_(fail_call), kind_(kind) {
  KILN_CHECK(kind == ErrorKind::OutOfMemory || kind == ErrorKind::DeviceUnavailable, ErrorKind::InvalidArgument,
             "a fault injector fails calls with OutOfMemory or DeviceUnavailable only");
}

void FaultInjector::before(const char* what, const std::string& device_name) {
  const std::uint64_t call = ++calls_;
  if (lost_.load())
    throw_error(ErrorKind::DeviceUnavailable, std::string(what) + " on " + device_name + " failed: the device was lost");
  if (call != fail_call_) return;
  fired_ = true;
  if (kind_ == ErrorKind::DeviceUnavailable) {
    lost_ = true;
    throw_error(ErrorKind::DeviceUnavailable,
                std::string(what) + " on " + device_name + " failed: the device was lost (injected fault, call " +
                    std::to_string(call) + ")");
  }
  throw_error(ErrorKind::OutOfMemory, std::string(what) + " on " + device_name +
                                          " failed: out of device memory (injected fault, call " + std::to_string(call) +
                                          ")");
}

std::shared_ptr<backend::Device> with_faults(std::shared_ptr<backend::Device> device,
                                             std::shared_ptr<FaultInjector> faults) {
  return std::make_shared<FaultyDevice>(std::move(device), std::move(faults));
}

void set_fault_injector(std::shared_ptr<FaultInjector> faults) {
  std::lock_guard lock(injector_mutex);
  current_injector = std::move(faults);
}

std::shared_ptr<FaultInjector> fault_injector() {
  std::lock_guard lock(injector_mutex);
  return current_injector;
}

}  // namespace kiln::runtime

#include "src/runtime/device_memory.h"

#include "src/runtime/forwarding_device.h"

#include <utility>

namespace kiln::runtime {
namespace {

// Owns the backend's buffer; the counted buffer handed out shares this
// guard's lifetime and points at the backend's buffer itself.
class CountedBuffer {
 public:
  CountedBuffer(std::shared_ptr<backend::Buffer> buffer, std::shared_ptr<MemoryCounter> counter)
      : buffer_(std::move(buffer)), counter_(std::move(counter)), bytes_(buffer_->size()) {
    const std::uint64_t now = counter_->bytes += bytes_;
    counter_->buffers += 1;
    std::uint64_t peak = counter_->peak_bytes.load();
    while (now > peak && !counter_->peak_bytes.compare_exchange_weak(peak, now)) {
    }
  }
  CountedBuffer(const CountedBuffer&) = delete;
  CountedBuffer& operator=(const CountedBuffer&) = delete;
  ~CountedBuffer() {
    counter_->bytes -= bytes_;
    counter_->buffers -= 1;
  }
  backend::Buffer* get() const { return buffer_.get(); }

 private:
  std::shared_ptr<backend::Buffer> buffer_;
  std::shared_ptr<MemoryCounter> counter_;
  std::uint64_t bytes_;
};

class AccountingDevice final : public ForwardingDevice {
 public:
  AccountingDevice(std::shared_ptr<backend::Device> device, std::shared_ptr<MemoryCounter> counter)
      : ForwardingDevice(std::move(device)), counter_(std::move(counter)) {}

  std::shared_ptr<backend::Buffer> allocate(std::uint64_t bytes) override {
    auto guard = std::make_shared<CountedBuffer>(wrapped().allocate(bytes), counter_);
    backend::Buffer* buffer = guard->get();
    return std::shared_ptr<backend::Buffer>(std::move(guard), buffer);
  }

 private:
  std::shared_ptr<MemoryCounter> counter_;
};

}  // namespace

std::shared_ptr<backend::Device> with_memory_accounting(std::shared_ptr<backend::Device> device,
                                                        std::shared_ptr<MemoryCounter> counter) {
  return std::make_shared<AccountingDevice>(std::move(device), std::move(counter));
}

}  // namespace kiln::runtime

// Device faults on demand, for tests of kiln's error paths: a wrapper device
// (like the limits profile's, for any backend) whose Nth counted call fails
// as the backend's own errors would. Counted calls: allocations, uploads,
// downloads, kernel loads and command-list submits (a submit runs the work
// and waits for it).
//
// Two faults, the two a backend reports: out of memory (that call fails;
// later calls succeed, as after a transient shortage) and device lost (that
// call and every later call on the device fail, as after a GPU reset, a
// watchdog timeout or a failed launch; Vulkan's VK_ERROR_DEVICE_LOST and
// CUDA's sticky launch errors). Recovery from a lost device is documented
// in docs/architecture.md: destroy the models on it and create them again.
#pragma once

#include "backends/backend.h"

#include <kiln/error.h>

#include <atomic>
#include <cstdint>
#include <memory>

namespace kiln::runtime {

class FaultInjector {
 public:
  // The `fail_call`th counted call (1-based; 0: none) fails with `kind`,
  // OutOfMemory or DeviceUnavailable (device lost).
  FaultInjector(std::uint64_t fail_call, ErrorKind kind);

  // Counts a call of `what` ("allocate", "upload", ...) on `device_name`
  // and throws when it is the scheduled one or the device is lost.
  void before(const char* what, const std::string& device_name);
  std::uint64_t calls() const { return calls_.load(); }
  bool fired() const { return fired_.load(); }

 private:
  const std::uint64_t fail_call_;
  const ErrorKind kind_;
  std::atomic<std::uint64_t> calls_{0};
  std::atomic<bool> fired_{false};
  std::atomic<bool> lost_{false};
};

// `device` with every counted call first passed to `faults`.
std::shared_ptr<backend::Device> with_faults(std::shared_ptr<backend::Device> device,
                                             std::shared_ptr<FaultInjector> faults);

// Devices acquired while an injector is set (runtime/device_pool.h) are
// wrapped with it; nullptr stops that. For tests: set it before creating
// the models it should reach, with no models of other tests alive on the
// same device (the pool shares devices).
void set_fault_injector(std::shared_ptr<FaultInjector> faults);
std::shared_ptr<FaultInjector> fault_injector();

}  // namespace kiln::runtime

// One device (and its loaded-kernel cache) per (backend, device index, cache
// directory) per process, shared by every model that runs there. Everything
// here is safe to use from several threads at once.
#pragma once

#include "backends/backend.h"
#include "src/runtime/kernel_cache.h"

#include <memory>
#include <string>

namespace kiln::runtime {

struct DeviceContext {
  const backend::Backend* backend = nullptr;
  int index = 0;
  std::string cache_dir;  // as given to acquire_device ("": the default)
  std::shared_ptr<backend::Device> device;
  std::unique_ptr<KernelCache> kernels;

  // "vulkan:0 'llvmpipe (LLVM 15.0.6, 256 bits)'", for messages.
  std::string label() const;
};

// Resolves `device_spec` ("" = first device, "2" = index, otherwise a
// case-insensitive substring of the device name). Throws NotFound listing the
// devices, or DeviceUnavailable with the backend's reason.
int resolve_device(const backend::Backend& backend, const std::string& device_spec);

std::shared_ptr<DeviceContext> acquire_device(const std::string& backend_name, const std::string& device_spec,
                                              const std::string& cache_dir);

}  // namespace kiln::runtime

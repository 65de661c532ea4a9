#include "backends/cuda/driver_library.h"

namespace kiln::backend::cuda {
namespace {

constexpr const char* kFunctionNames[] = {KILN_CUDA_DRIVER_FUNCTIONS(KILN_VENDOR_FUNCTION_NAME) "cuEventElapsedTime"};

}  // namespace

DriverLibrary open_driver(std::span<const std::string_view> sonames) {
  DriverLibrary driver;
  driver.library = open_vendor_library(sonames, kFunctionNames);
  if (driver.library.handle == nullptr) {
    // A libcuda.so.1 without one of the functions is a driver older than them.
    const bool old = driver.library.failure.find(" lacks ") != std::string::npos;
    driver.failure = (old ? "NVIDIA driver too old: " : "no NVIDIA driver: ") + driver.library.failure;
    return driver;
  }
#define KILN_CUDA_RESOLVE(name) driver.name = reinterpret_cast<decltype(driver.name)>(driver.library.symbol(#name));
  KILN_CUDA_DRIVER_FUNCTIONS(KILN_CUDA_RESOLVE)
#undef KILN_CUDA_RESOLVE
  driver.event_elapsed_time =
      reinterpret_cast<decltype(driver.event_elapsed_time)>(driver.library.symbol("cuEventElapsedTime"));
  return driver;
}

const DriverLibrary& driver_library() {
  static const DriverLibrary driver = open_driver();
  return driver;
}

}  // namespace kiln::backend::cuda

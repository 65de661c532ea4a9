// The HIP runtime (libamdhip64), opened at run time (dlopen) rather than
// linked, so that kiln starts without ROCm and the HIP backend reports why
// it cannot run. <hip/hip_runtime_api.h> only supplies the functions' types.
#pragma once

#include "backends/vendor_library.h"

#include <hip/hip_runtime_api.h>

#include <array>
#include <span>
#include <string>
#include <string_view>

namespace kiln::backend::hip {

// Every HIP runtime function kiln calls.
#define KILN_HIP_RUNTIME_FUNCTIONS(X) \
  X(hipInit)                          \
  X(hipGetErrorName)                  \
  X(hipDriverGetVersion)              \
  X(hipRuntimeGetVersion)             \
  X(hipGetDeviceCount)                \
  X(hipGetDeviceProperties)           \
  X(hipSetDevice)                     \
  X(hipMemGetInfo)                    \
  X(hipFree)                          \
  X(hipHostFree)                      \
  X(hipStreamCreateWithFlags)         \
  X(hipStreamDestroy)                 \
  X(hipStreamSynchronize)             \
  X(hipMemcpyHtoDAsync)               \
  X(hipMemcpyDtoHAsync)               \
  X(hipMemcpyDtoDAsync)               \
  X(hipEventCreate)                   \
  X(hipEventDestroy)                  \
  X(hipEventRecord)                   \
  X(hipEventElapsedTime)              \
  X(hipModuleLoadData)                \
  X(hipModuleUnload)                  \
  X(hipModuleGetFunction)             \
  X(hipModuleLaunchKernel)            \
  X(hipStreamBeginCapture)            \
  X(hipStreamEndCapture)              \
  X(hipGraphInstantiate)              \
  X(hipGraphLaunch)                   \
  X(hipGraphDestroy)                  \
  X(hipGraphExecDestroy)

// Only ROCm 5's runtime: hipDeviceProp_t is laid out as the ROCm 5 headers
// kiln is built with say, and ROCm 6 changed it (libamdhip64.so.6).
inline constexpr std::array<std::string_view, 1> kHipRuntimeSonames{"libamdhip64.so.5"};

struct HipRuntimeLibrary {
  KILN_HIP_RUNTIME_FUNCTIONS(KILN_VENDOR_FUNCTION_POINTER)
  // Typed here: the header overloads these names with templates.
  hipError_t (*hipMalloc)(void** pointer, size_t bytes) = nullptr;
  hipError_t (*hipHostMalloc)(void** pointer, size_t bytes, unsigned int flags) = nullptr;
  VendorLibrary library;
  // Why the runtime cannot be used ("no HIP runtime: libamdhip64.so.5: cannot
  // open shared object file: ..."); empty when every function above is set.
  std::string failure;

  bool loaded() const { return failure.empty(); }
};

// Opens the first of `sonames` that is a HIP runtime. Never throws.
HipRuntimeLibrary open_hip_runtime(std::span<const std::string_view> sonames = kHipRuntimeSonames);

// The process's HIP runtime, opened at first use and kept. Thread-safe.
const HipRuntimeLibrary& hip_runtime_library();

}  // namespace kiln::backend::hip

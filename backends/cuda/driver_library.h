// The CUDA driver (libcuda.so.1), opened at run time (dlopen) rather than
// linked, so that kiln starts without one and the CUDA backend reports why it
// cannot run. <cuda.h> only supplies the functions' types.
#pragma once

#include "backends/vendor_library.h"

#include <cuda.h>

#include <array>
#include <span>
#include <string>
#include <string_view>

namespace kiln::backend::cuda {

// Every driver function kiln calls, by the symbol the driver exports: <cuda.h>
// maps names such as cuMemAlloc to their current versions (cuMemAlloc_v2) with
// macros, so the versions are spelt out here.
#define KILN_CUDA_DRIVER_FUNCTIONS(X) \
  X(cuInit)                           \
  X(cuGetErrorName)                   \
  X(cuDriverGetVersion)               \
  X(cuDeviceGetCount)                 \
  X(cuDeviceGet)                      \
  X(cuDeviceGetName)                  \
  X(cuDeviceGetAttribute)             \
  X(cuDeviceTotalMem_v2)              \
  X(cuDevicePrimaryCtxRetain)         \
  X(cuDevicePrimaryCtxRelease_v2)     \
  X(cuCtxSetCurrent)                  \
  X(cuMemGetInfo_v2)                  \
  X(cuMemAlloc_v2)                    \
  X(cuMemFree_v2)                     \
  X(cuMemHostAlloc)                   \
  X(cuMemFreeHost)                    \
  X(cuStreamCreate)                   \
  X(cuStreamDestroy_v2)               \
  X(cuStreamSynchronize)              \
  X(cuMemcpyHtoDAsync_v2)             \
  X(cuMemcpyDtoHAsync_v2)             \
  X(cuMemcpyDtoDAsync_v2)             \
  X(cuEventCreate)                    \
  X(cuEventDestroy_v2)                \
  X(cuEventRecord)                    \
  X(cuModuleLoadData)                 \
  X(cuModuleUnload)                   \
  X(cuModuleGetFunction)              \
  X(cuLaunchKernel)                   \
  X(cuFuncSetAttribute)               \
  X(cuStreamBeginCapture_v2)          \
  X(cuStreamEndCapture)               \
  X(cuGraphInstantiateWithFlags)      \
  X(cuGraphLaunch)                    \
  X(cuGraphDestroy)                   \
  X(cuGraphExecDestroy)

inline constexpr std::array<std::string_view, 1> kDriverSonames{"libcuda.so.1"};

struct DriverLibrary {
  KILN_CUDA_DRIVER_FUNCTIONS(KILN_VENDOR_FUNCTION_POINTER)
  // cuEventElapsedTime as every driver exports it (<cuda.h> 12.8+ maps the
  // name to a _v2 that older drivers lack; both take the same arguments).
  CUresult (*event_elapsed_time)(float*, CUevent, CUevent) = nullptr;
  VendorLibrary library;
  // Why the driver cannot be used ("no NVIDIA driver: libcuda.so.1: cannot
  // open shared object file: ..."); empty when every function above is set.
  std::string failure;

  bool loaded() const { return failure.empty(); }
};

// Opens the first of `sonames` that is a CUDA driver. Never throws.
DriverLibrary open_driver(std::span<const std::string_view> sonames = kDriverSonames);

// The process's driver, opened at first use and kept. Thread-safe.
const DriverLibrary& driver_library();

}  // namespace kiln::backend::cuda

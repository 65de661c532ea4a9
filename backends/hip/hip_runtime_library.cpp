#include "backends/hip/hip_runtime_library.h"

namespace kiln::backend::hip {
namespace {

constexpr const char* kFunctionNames[] = {KILN_HIP_RUNTIME_FUNCTIONS(KILN_VENDOR_FUNCTION_NAME) "hipMalloc",
                                          "hipHostMalloc"};

}  // namespace

HipRuntimeLibrary open_hip_runtime(std::span<const std::string_view> sonames) {
  HipRuntimeLibrary runtime;
  runtime.library = open_vendor_library(sonames, kFunctionNames);
  if (runtime.library.handle == nullptr) {
    runtime.failure = "no HIP runtime: " + runtime.library.failure;
    return runtime;
  }
#define KILN_HIP_RESOLVE(name) runtime.name = reinterpret_cast<decltype(runtime.name)>(runtime.library.symbol(#name));
  KILN_HIP_RUNTIME_FUNCTIONS(KILN_HIP_RESOLVE)
  KILN_HIP_RESOLVE(hipMalloc)
  KILN_HIP_RESOLVE(hipHostMalloc)
#undef KILN_HIP_RESOLVE
  return runtime;
}

const HipRuntimeLibrary& hip_runtime_library() {
  static const HipRuntimeLibrary runtime = open_hip_runtime();
  return runtime;
}

}  // namespace kiln::backend::hip

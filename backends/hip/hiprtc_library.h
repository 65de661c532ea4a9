// hiprtc, opened at run time (dlopen) rather than linked, so that kiln starts
// without ROCm and the HIP backend reports hiprtc as the reason it cannot
// run. <hip/hiprtc.h> only supplies the functions' types.
#pragma once

#include "backends/vendor_library.h"

#include <hip/hiprtc.h>

#include <array>
#include <span>
#include <string>
#include <string_view>

namespace kiln::backend::hip {

// Every hiprtc function kiln calls.
#define KILN_HIPRTC_FUNCTIONS(X) \
  X(hiprtcGetErrorString)        \
  X(hiprtcCreateProgram)         \
  X(hiprtcDestroyProgram)        \
  X(hiprtcCompileProgram)        \
  X(hiprtcGetProgramLogSize)     \
  X(hiprtcGetProgramLog)         \
  X(hiprtcGetCodeSize)           \
  X(hiprtcGetCode)

// hiprtc has its own library in later ROCm 5 releases (libhiprtc.so.5) and
// lives inside the HIP runtime in ROCm 5.2 (Debian 12's); the unversioned
// names come with a development install. Its C interface is the same in all.
inline constexpr std::array<std::string_view, 4> kHiprtcSonames{"libhiprtc.so.5", "libamdhip64.so.5", "libhiprtc.so",
                                                                "libamdhip64.so"};

struct HiprtcLibrary {
  KILN_HIPRTC_FUNCTIONS(KILN_VENDOR_FUNCTION_POINTER)
  VendorLibrary library;
  // Why hiprtc cannot be used ("cannot load hiprtc: libhiprtc.so.5: cannot
  // open shared object file: ..."); empty when every function above is set.
  std::string failure;

  bool loaded() const { return failure.empty(); }
};

// Opens the first of `sonames` that holds hiprtc. Never throws. Tests pass
// names that do not exist to see the failure path.
HiprtcLibrary open_hiprtc(std::span<const std::string_view> sonames = kHiprtcSonames);

// The process's hiprtc, opened at first use and kept. Thread-safe.
const HiprtcLibrary& hiprtc_library();

}  // namespace kiln::backend::hip

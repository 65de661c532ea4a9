// NVRTC, opened at run time (dlopen) rather than linked, so that kiln starts
// without the CUDA toolkit and the CUDA backend reports NVRTC as the reason it
// cannot run. <nvrtc.h> only supplies the functions' types.
#pragma once

#include "backends/vendor_library.h"

#include <nvrtc.h>

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::backend::cuda {

// Every NVRTC function kiln calls.
#define KILN_NVRTC_FUNCTIONS(X)  \
  X(nvrtcVersion)                \
  X(nvrtcGetErrorString)         \
  X(nvrtcGetNumSupportedArchs)   \
  X(nvrtcGetSupportedArchs)      \
  X(nvrtcCreateProgram)          \
  X(nvrtcDestroyProgram)         \
  X(nvrtcCompileProgram)         \
  X(nvrtcGetProgramLogSize)      \
  X(nvrtcGetProgramLog)          \
  X(nvrtcGetPTXSize)             \
  X(nvrtcGetPTX)                 \
  X(nvrtcGetCUBINSize)           \
  X(nvrtcGetCUBIN)

// What a user's machine has, newest CUDA first: the toolkit's runtime
// packages install only the versioned name (CUDA 11.2-11.8 all ship
// libnvrtc.so.11.2); the unversioned one comes with a development install.
inline constexpr std::array<std::string_view, 4> kNvrtcSonames{"libnvrtc.so.13", "libnvrtc.so.12",
                                                               "libnvrtc.so.11.2", "libnvrtc.so"};

struct NvrtcLibrary {
  KILN_NVRTC_FUNCTIONS(KILN_VENDOR_FUNCTION_POINTER)
  VendorLibrary library;
  // Why NVRTC cannot be used ("cannot load NVRTC: libnvrtc.so.13: cannot open
  // shared object file: ..."); empty when every function above is set.
  std::string failure;
  int major = 0, minor = 0;          // nvrtcVersion
  std::vector<int> supported_archs;  // compute capabilities: 75, 80, 86, ...
  // The toolkit's include folder (cuda_fp16.h) for this NVRTC; empty if none found.
  std::string include_dir;

  bool loaded() const { return failure.empty(); }
};

// Opens the first of `sonames` that is an NVRTC and reads its version and
// architectures. Never throws: failures are NvrtcLibrary::failure. Tests pass
// names that do not exist to see the failure path.
NvrtcLibrary open_nvrtc(std::span<const std::string_view> sonames = kNvrtcSonames);

// The process's NVRTC, opened at first use and kept. Thread-safe.
const NvrtcLibrary& nvrtc_library();

}  // namespace kiln::backend::cuda

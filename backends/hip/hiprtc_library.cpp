#include "backends/hip/hiprtc_library.h"

namespace kiln::backend::hip {
namespace {

constexpr const char* kFunctionNames[] = {KILN_HIPRTC_FUNCTIONS(KILN_VENDOR_FUNCTION_NAME)};

}  // namespace

HiprtcLibrary open_hiprtc(std::span<const std::string_view> sonames) {
  HiprtcLibrary hiprtc;
  hiprtc.library = open_vendor_library(sonames, kFunctionNames);
  if (hiprtc.library.handle == nullptr) {
    hiprtc.failure = "cannot load hiprtc: " + hiprtc.library.failure;
    return hiprtc;
  }
#define KILN_HIPRTC_RESOLVE(name) hiprtc.name = reinterpret_cast<decltype(hiprtc.name)>(hiprtc.library.symbol(#name));
  KILN_HIPRTC_FUNCTIONS(KILN_HIPRTC_RESOLVE)
#undef KILN_HIPRTC_RESOLVE
  return hiprtc;
}

const HiprtcLibrary& hiprtc_library() {
  static const HiprtcLibrary hiprtc = open_hiprtc();
  return hiprtc;
}

}  // namespace kiln::backend::hip

// Preloaded (LD_PRELOAD) into a `kiln` process by the linkage suite to make
// it see a machine with only a Vulkan loader: dlopen of a CUDA or ROCm
// library fails as it does where the file is missing (dlerror's text
// included); every other library opens as usual. Never used outside tests.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

namespace {

// Name prefixes of the vendor libraries kiln may open: NVRTC, the CUDA
// runtime and driver, hiprtc, the HIP runtime and comgr.
constexpr const char* kHiddenPrefixes[] = {"libnvrtc",  "libcudart",   "libcuda.",
                                           "libhiprtc", "libamdhip64", "libamd_comgr"};

// A folder that does not exist: opening a library there fails like opening one
// that is not installed.
constexpr const char* kMissingFolder = "/nonexistent/kiln-hidden-vendor-library/";

bool hidden(const char* file) {
  if (file == nullptr) return false;
  const char* slash = std::strrchr(file, '/');
  const char* base = slash != nullptr ? slash + 1 : file;
  for (const char* prefix : kHiddenPrefixes)
    if (std::strncmp(base, prefix, std::strlen(prefix)) == 0) return true;
  return false;
}

using Dlopen = void* (*)(const char*, int);

Dlopen next_dlopen() {
  static const Dlopen next = reinterpret_cast<Dlopen>(dlsym(RTLD_NEXT, "dlopen"));
  return next;
}

}  // namespace

extern "C" void* dlopen(const char* file, int mode) noexcept {
  if (!hidden(file)) return next_dlopen()(file, mode);
  const char* base = std::strrchr(file, '/') != nullptr ? std::strrchr(file, '/') + 1 : file;
  char missing[4096];
  std::snprintf(missing, sizeof missing, "%s%s", kMissingFolder, base);
  return next_dlopen()(missing, mode);
}

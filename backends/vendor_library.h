// Vendor libraries (NVRTC, hiprtc, the HIP runtime) opened at run time with
// dlopen, never linked: kiln and libkiln then start on a machine that has only
// a Vulkan loader, and a backend whose library is missing says which names it
// tried and why each failed instead of the process failing to load.
//
// Each library lists the functions kiln calls once, as an X-macro, and gets a
// table of typed pointers from it:
//
//   #define KILN_NVRTC_FUNCTIONS(X) X(nvrtcVersion) X(nvrtcCompileProgram) ...
//   struct NvrtcFunctions { KILN_NVRTC_FUNCTIONS(KILN_VENDOR_FUNCTION_POINTER) };
#pragma once

#include <span>
#include <string>
#include <string_view>

// A member `name` of the type of the vendor header's declaration of `name`.
#define KILN_VENDOR_FUNCTION_POINTER(name) decltype(&::name) name = nullptr;
// The function's name as a string, for the list of symbols a library must have.
#define KILN_VENDOR_FUNCTION_NAME(name) #name,

namespace kiln::backend {

struct VendorLibrary {
  void* handle = nullptr;  // null when no name could be used; never closed
  std::string soname;      // the name that opened: "libnvrtc.so.13"
  std::string path;        // the file the dynamic linker chose for it
  // When handle is null: every name tried with dlerror's text, or the
  // function the library lacked ("libc.so.6 (/usr/lib/...) lacks nvrtcVersion").
  std::string failure;

  // dlsym; nullptr when the library lacks `name`.
  void* symbol(const char* name) const;
};

// Tries `sonames` in order (dlopen, RTLD_NOW | RTLD_LOCAL, so the dynamic
// linker's usual search applies: LD_LIBRARY_PATH, the ld.so cache, the
// default folders) and returns the first that opens and defines every name
// in `symbols`. Never throws. Libraries stay loaded for the life of the
// process: vendor runtimes do not support being unloaded.
VendorLibrary open_vendor_library(std::span<const std::string_view> sonames, std::span<const char* const> symbols);

}  // namespace kiln::backend

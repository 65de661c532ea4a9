#include "backends/vendor_library.h"

#include <dlfcn.h>
#include <link.h>

namespace kiln::backend {
namespace {

// Where the dynamic linker found the library (for messages, and so NVRTC can
// find the headers installed beside it).
std::string loaded_path(void* handle) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr) return {};
  return map->l_name;
}

}  // namespace

void* VendorLibrary::symbol(const char* name) const { return handle != nullptr ? dlsym(handle, name) : nullptr; }

VendorLibrary open_vendor_library(std::span<const std::string_view> sonames, std::span<const char* const> symbols) {
  std::string failures;
  auto fail = [&](const std::string& why) { failures += (failures.empty() ? "" : "; ") + why; };
  for (std::string_view soname : sonames) {
    const std::string name(soname);
    void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* detail = dlerror();
      fail(detail != nullptr ? detail : name + ": cannot be opened");
      continue;
    }
    // A library of that name without kiln's functions (another product's, or
    // too old a release) is passed over for the next name; it stays open, as
    // closing a vendor library that ran its initialisers is not safe.
    const char* missing = nullptr;
    for (const char* symbol : symbols)
      if (dlsym(handle, symbol) == nullptr) {
        missing = symbol;
        break;
      }
    const std::string path = loaded_path(handle);
    if (missing != nullptr) {
      fail(name + (path.empty() ? "" : " (" + path + ")") + " lacks " + missing);
      continue;
    }
    return VendorLibrary{handle, name, path, {}};
  }
  VendorLibrary none;
  none.failure = failures.empty() ? "no library names to try" : failures;
  return none;
}

}  // namespace kiln::backend

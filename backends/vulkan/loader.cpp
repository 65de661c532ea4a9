// Opens the Vulkan loader with dlopen and resolves kiln's function tables.
#include "backends/vulkan/loader.h"

#include <kiln/error.h>

#include <dlfcn.h>


namespace kiln::backend::vulkan {
namespace {

#if defined(__APPLE__)
constexpr const char* kLoaderLibrary = "libvulkan.1.dylib";
#else
constexpr const char* kLoaderLibrary = "libvulkan.so.1";
#endif

struct LoadedLoader {
  GlobalFunctions functions;
  std::string failure;  // empty when the loader was found
};

LoadedLoader open_loader() {
  LoadedLoader loaded;
  void* library = dlopen(kLoaderLibrary, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* detail = dlerror();
    loaded.failure = std::string("no Vulkan loader: ") + (detail != nullptr ? detail : kLoaderLibrary);
    return loaded;
  }
  auto* get_instance_proc_addr =
      reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(library, "vkGetInstanceProcAddr"));
  if (get_instance_proc_addr == nullptr) {
    loaded.failure = std::string("the Vulkan loader ") + kLoaderLibrary + " has no vkGetInstanceProcAddr";
    return loaded;
  }
  GlobalFunctions& f = loaded.functions;
  f.vkGetInstanceProcAddr = get_instance_proc_addr;
#define KILN_VK_LOAD_GLOBAL(name) \
  f.name = reinterpret_cast<PFN_##name>(get_instance_proc_addr(VK_NULL_HANDLE, #name));
  KILN_VK_GLOBAL_FUNCTIONS(KILN_VK_LOAD_GLOBAL)
#undef KILN_VK_LOAD_GLOBAL
  // vkEnumerateInstanceVersion is absent from 1.0 loaders; the caller checks it.
  if (f.vkCreateInstance == nullptr || f.vkEnumerateInstanceLayerProperties == nullptr ||
      f.vkEnumerateInstanceExtensionProperties == nullptr)
    loaded.failure = std::string("the Vulkan loader ") + kLoaderLibrary + " lacks the global entry points";
  return loaded;
}

[[noreturn]] void throw_missing(const char* name) {
  throw_error(ErrorKind::DeviceUnavailable, std::string("the Vulkan loader does not provide ") + name);
}

}  // namespace

const GlobalFunctions* load_vulkan_loader(std::string& reason) {
  static const LoadedLoader loaded = open_loader();
  if (!loaded.failure.empty()) {
    reason = loaded.failure;
    return nullptr;
  }
  return &loaded.functions;
}

InstanceFunctions load_instance_functions(const GlobalFunctions& global, VkInstance instance, bool with_debug_utils) {
  InstanceFunctions f;
#define KILN_VK_LOAD_INSTANCE(name)                                                         \
  f.name = reinterpret_cast<PFN_##name>(global.vkGetInstanceProcAddr(instance, #name));     \
  if (f.name == nullptr) throw_missing(#name);
  KILN_VK_INSTANCE_FUNCTIONS(KILN_VK_LOAD_INSTANCE)
  if (with_debug_utils) {
    KILN_VK_DEBUG_FUNCTIONS(KILN_VK_LOAD_INSTANCE)
  }
#undef KILN_VK_LOAD_INSTANCE
  return f;
}

DeviceFunctions load_device_functions(const InstanceFunctions& instance_functions, VkDevice device) {
  DeviceFunctions f;
#define KILN_VK_LOAD_DEVICE(name)                                                             \
  f.name = reinterpret_cast<PFN_##name>(instance_functions.vkGetDeviceProcAddr(device, #name)); \
  if (f.name == nullptr) throw_missing(#name);
  KILN_VK_DEVICE_FUNCTIONS(KILN_VK_LOAD_DEVICE)
#undef KILN_VK_LOAD_DEVICE
  return f;
}

}  // namespace kiln::backend::vulkan

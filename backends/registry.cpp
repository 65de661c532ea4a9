// The built-in backends. Which exist is decided at configure time: meson
// defines KILN_HAVE_<NAME> for the backends library when a target's toolchain
// was found. Constructing a backend is cheap (drivers are probed lazily).
#include "backends/registry.h"

#include "backends/null/null_backend.h"
#ifdef KILN_HAVE_VULKAN
#include "backends/vulkan/vulkan_backend.h"
#endif
#ifdef KILN_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#endif
#ifdef KILN_HAVE_HIP
#include "backends/hip/hip_backend.h"
#endif
#ifdef KILN_HAVE_CPU
#include "backends/cpu/cpu_backend.h"
#endif

#include <memory>
#include <string>

namespace kiln::backend {
namespace {

// Preference order: the first available backend is the default choice.
std::vector<std::unique_ptr<Backend>> create_built_in_backends() {
  std::vector<std::unique_ptr<Backend>> backends;
#ifdef KILN_HAVE_VULKAN
  backends.push_back(create_vulkan_backend());
#endif
#ifdef KILN_HAVE_CUDA
  backends.push_back(create_cuda_backend());
#endif
#ifdef KILN_HAVE_HIP
  backends.push_back(create_hip_backend());
#endif
#ifdef KILN_HAVE_CPU
  backends.push_back(create_cpu_backend());
#endif
  backends.push_back(create_null_backend());
  return backends;
}

}  // namespace

const std::vector<const Backend*>& all_backends() {
  // Built on first use (thread-safe static initialisation) and kept for the
  // life of the process: devices and cached kernels refer to their backend.
  static const std::vector<std::unique_ptr<Backend>> owned = create_built_in_backends();
  static const std::vector<const Backend*> backends = [] {
    std::vector<const Backend*> pointers;
    for (const auto& backend : owned) pointers.push_back(backend.get());
    return pointers;
  }();
  return backends;
}

const Backend& get_backend(std::string_view name) {
  std::string built_in;
  for (const Backend* backend : all_backends()) {
    if (backend->name() == name) return *backend;
    built_in += (built_in.empty() ? "" : ", ") + backend->name();
  }
  throw_error(ErrorKind::NotFound, "unknown backend '" + std::string(name) + "' (built in: " + built_in + ")");
}

}  // namespace kiln::backend

// The built-in backends. Which exist is decided at configure time: meson
// defines KILN_HAVE_<NAME> for the backends library when a target's toolchain
// was found. Constructing a backend is cheap (drivers are probed lazily).
#include "backends/registry.h"

#include "backends/null/null_backend.h"
#include "src/base/check.h"
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

#include <algorithm>
#include <cctype>
#include <charconv>
#include <memory>
#include <mutex>
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

std::string lower_case(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The owned backends and the list all_backends() gives: built in, then
// registered ones in order, then null.
struct Registry {
  std::mutex mutex;
  std::vector<std::unique_ptr<Backend>> owned = create_built_in_backends();
  std::vector<const Backend*> list = [this] {
    std::vector<const Backend*> pointers;
    for (const auto& backend : owned) pointers.push_back(backend.get());
    return pointers;
  }();
  bool fixed = false;
};

Registry& registry() {
  // Kept for the life of the process: devices and cached kernels refer to
  // their backend.
  static Registry instance;
  return instance;
}

}  // namespace

const std::vector<const Backend*>& all_backends() {
  // Fixed on first use (thread-safe static initialisation): readers then
  // share the list without a lock.
  static const std::vector<const Backend*>& backends = [] () -> const std::vector<const Backend*>& {
    Registry& r = registry();
    const std::lock_guard lock(r.mutex);
    r.fixed = true;
    return r.list;
  }();
  return backends;
}

void register_backend(std::unique_ptr<Backend> backend) {
  KILN_CHECK(backend != nullptr, ErrorKind::InvalidArgument, "register_backend: no backend given");
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  const std::string name = backend->name();
  KILN_CHECK(!r.fixed, ErrorKind::InvalidArgument,
             "backend '" + name + "' registered after kiln first listed its backends: register backends before "
             "the first compile, load or device query");
  for (const Backend* existing : r.list)
    KILN_CHECK(existing->name() != name, ErrorKind::InvalidArgument, "a backend named '" + name + "' is already registered");
  // Before null, which stays last: the first available backend is the default.
  r.list.insert(r.list.end() - 1, backend.get());
  r.owned.push_back(std::move(backend));
}

const Backend& get_backend(std::string_view name) {
  std::string built_in;
  for (const Backend* backend : all_backends()) {
    if (backend->name() == name) return *backend;
    built_in += (built_in.empty() ? "" : ", ") + backend->name();
  }
  throw_error(ErrorKind::NotFound, "unknown backend '" + std::string(name) + "' (built in: " + built_in + ")");
}

int resolve_device(const Backend& backend, const std::string& spec) {
  if (auto reason = backend.unavailable_reason())
    throw_error(ErrorKind::DeviceUnavailable, "backend '" + backend.name() + "' cannot run here: " + *reason);
  const auto devices = backend.enumerate_devices();
  KILN_CHECK(!devices.empty(), ErrorKind::DeviceUnavailable, "backend '" + backend.name() + "' has no devices");
  std::string listing;
  for (const auto& d : devices) listing += "\n  " + std::to_string(d.index) + ": " + d.target.device_name;
  if (spec.empty()) return devices.front().index;
  if (std::all_of(spec.begin(), spec.end(), [](unsigned char c) { return std::isdigit(c); })) {
    // from_chars, not stoi: an index too large for an int is just no device.
    int index = -1;
    const auto [end, error] = std::from_chars(spec.data(), spec.data() + spec.size(), index);
    for (const auto& d : devices)
      if (error == std::errc{} && end == spec.data() + spec.size() && d.index == index) return index;
    throw_error(ErrorKind::NotFound, "no " + backend.name() + " device with index " + spec + "; devices:" + listing);
  }
  for (const auto& d : devices)
    if (lower_case(d.target.device_name).find(lower_case(spec)) != std::string::npos) return d.index;
  throw_error(ErrorKind::NotFound, "no " + backend.name() + " device matching '" + spec + "'; devices:" + listing);
}

}  // namespace kiln::backend

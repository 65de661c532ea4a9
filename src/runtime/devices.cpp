// Device discovery and selection: kiln::list_backends() and the device pool.
#include "backends/registry.h"
#include "src/runtime/device_pool.h"

#include <kiln/kiln.h>

#include <algorithm>
#include <charconv>
#include <cctype>
#include <map>
#include <mutex>
#include <tuple>

namespace kiln {
namespace {

std::string lower_case(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string bytes_text(std::uint64_t bytes) {
  if (bytes >= (1ull << 30)) return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (1ull << 20)) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1ull << 10)) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

std::string triple(const std::array<std::uint32_t, 3>& v) {
  return std::to_string(v[0]) + " x " + std::to_string(v[1]) + " x " + std::to_string(v[2]);
}

DeviceDescription describe(int index, const backend::TargetDesc& t) {
  DeviceDescription d;
  d.index = index;
  d.name = t.device_name;
  d.type = t.device_type;
  d.driver = t.driver;
  d.api_version = t.api_version;
  d.limits = {
      {"subgroup size", std::to_string(t.subgroup_size)},
      {"max workgroup size", triple(t.max_workgroup_size)},
      {"max workgroup invocations", std::to_string(t.max_workgroup_invocations)},
      {"max workgroup count", triple(t.max_workgroup_count)},
      {"shared memory", bytes_text(t.max_shared_memory_bytes)},
      {"max buffer", bytes_text(t.max_buffer_bytes)},
      {"device memory", bytes_text(t.device_memory_bytes)},
      {"fp16", t.fp16 ? "yes" : "no"},
      {"timestamps", t.timestamps ? "yes" : "no"},
  };
  return d;
}

}  // namespace

std::vector<BackendDescription> list_backends() {
  std::vector<BackendDescription> out;
  for (const backend::Backend* b : backend::all_backends()) {
    BackendDescription d;
    d.name = b->name();
    auto reason = b->unavailable_reason();
    d.available = !reason.has_value();
    d.unavailable_reason = reason.value_or("");
    d.compiler = b->compiler().version();
    for (const backend::DeviceInfo& info : b->enumerate_devices()) d.devices.push_back(describe(info.index, info.target));
    for (const backend::TargetDesc& t : b->offline_targets()) d.offline_targets.push_back(t.arch);
    out.push_back(std::move(d));
  }
  return out;
}

namespace runtime {

int resolve_device(const backend::Backend& backend, const std::string& spec) {
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

std::string DeviceContext::label() const {
  return backend->name() + ":" + std::to_string(index) + " '" + device->target().device_name + "'";
}

std::shared_ptr<DeviceContext> acquire_device(const std::string& backend_name, const std::string& device_spec,
                                              const std::string& cache_dir) {
  const backend::Backend& backend = backend::get_backend(backend_name);
  const int index = resolve_device(backend, device_spec);
  // Weak references: a device lives as long as some model uses it, and is
  // never destroyed during static destruction.
  static std::mutex mutex;
  static std::map<std::tuple<std::string, int, std::string>, std::weak_ptr<DeviceContext>> pool;
  std::lock_guard lock(mutex);
  auto key = std::make_tuple(backend.name(), index, cache_dir);
  if (auto existing = pool[key].lock()) return existing;
  auto ctx = std::make_shared<DeviceContext>();
  ctx->backend = &backend;
  ctx->index = index;
  ctx->cache_dir = cache_dir;
  ctx->device = backend.create_device(index);
  ctx->kernels = std::make_unique<KernelCache>(backend, ctx->device, CompileCache(cache_dir));
  pool[key] = ctx;
  return ctx;
}

}  // namespace runtime
}  // namespace kiln

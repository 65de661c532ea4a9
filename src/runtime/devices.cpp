// Device discovery and selection: kiln::list_backends() and the device pool.
#include "backends/registry.h"
#include "src/base/check.h"
#include "src/runtime/device_pool.h"

#include "src/base/cache_key.h"
#include "src/base/log.h"
#include "src/cache/cache_entry.h"
#include "src/cache/compile_cache.h"
#include "src/compile/plan.h"
#include "src/runtime/device_profile.h"
#include "src/runtime/fault_injection.h"

#include <kiln/kiln.h>

#include <algorithm>
#include <charconv>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <span>
#include <tuple>

namespace kiln {
namespace {

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
      {"16-bit buffers", t.storage16 ? "yes" : "no"},
      {"f16 conversion", std::string(backend::f16_conversion_name(t.f16_conversion))},
      {"timestamps", t.timestamps ? "yes" : "no"},
  };
  std::string matrix;
  for (const backend::MatrixShape& shape : t.matrix_shapes)
    matrix += (matrix.empty() ? "" : ", ") + backend::matrix_shape_name(shape);
  d.limits.push_back({"matrix units", matrix.empty() ? "none kiln uses" : matrix});
  // The class whose heuristics choose this device's kernels (lower::device_class).
  d.limits.push_back({"kernel class", compiler::device_class_name(t)});
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
    const runtime::DeviceProfile* profile = runtime::profile_from_environment();
    for (const backend::DeviceInfo& info : b->enumerate_devices()) {
      d.devices.push_back(describe(info.index, profile ? runtime::clamped_target(info.target, *profile) : info.target));
      if (profile) d.devices.back().limits.push_back({"limits profile", profile->name + " (KILN_DEVICE_PROFILE)"});
    }
    for (const backend::TargetDesc& t : b->offline_targets()) d.offline_targets.push_back(t.arch);
    out.push_back(std::move(d));
  }
  return out;
}

namespace runtime {

std::shared_ptr<backend::Buffer> SharedWeights::find_or_upload(backend::Device& device, std::span<const std::byte> bytes,
                                                               bool& uploaded) {
  return find_or_make(device, base::hex_digest(XXH3_128bits(bytes.data(), bytes.size())), bytes.size(),
                      [&](backend::Buffer& buffer) { device.upload(buffer, 0, bytes); }, uploaded);
}

std::shared_ptr<backend::Buffer> SharedWeights::find_or_make(backend::Device& device, const std::string& digest,
                                                             std::uint64_t size,
                                                             const std::function<void(backend::Buffer&)>& fill,
                                                             bool& made) {
  const auto key = std::pair(digest, size);
  std::lock_guard lock(mutex_);
  if (auto it = buffers_.find(key); it != buffers_.end())
    if (std::shared_ptr<backend::Buffer> live = it->second.lock()) {
      made = false;
      return live;
    }
  std::erase_if(buffers_, [](const auto& entry) { return entry.second.expired(); });
  std::shared_ptr<backend::Buffer> buffer = device.allocate(size);
  fill(*buffer);
  buffers_[key] = buffer;
  made = true;
  return buffer;
}

namespace {

// Pipeline caches in the cache dir: one entry per device and driver.
constexpr char kPipelineCacheKind[] = "pipelines";
// Drivers keep every pipeline's machine code; this bounds what is read back.
constexpr std::uint64_t kMaxPipelineCacheBytes = 1ull << 30;

// The name is the device's, which changes with the device and driver.
std::string pipeline_cache_key(const DeviceContext& ctx) {
  return "kiln pipeline cache 1\n" + ctx.device->pipeline_cache_name().value_or("");
}

std::string ms_text(std::chrono::steady_clock::time_point start) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f ms",
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  return text;
}

// Gives a new device the pipeline cache kept in `cache_dir`, if any; a file
// that cannot be used is logged, removed and never given to the driver.
void restore_pipeline_cache(DeviceContext& ctx, const std::string& cache_dir) {
  const std::optional<std::string> name = ctx.device->pipeline_cache_name();
  const std::string root = cache_dir.empty() ? cache::default_cache_dir() : cache_dir;
  if (!name || root == "off") return;
  const auto start = std::chrono::steady_clock::now();
  const std::filesystem::path path = std::filesystem::path(root) / "pipelines" / (*name + ".bin");
  ctx.pipeline_cache_file = path;
  const cache::CacheEntryRead read = read_pipeline_cache(ctx);
  std::string problem = read.problem;
  if (read.payload) {
    problem = ctx.device->restore_pipeline_cache(std::as_bytes(std::span(*read.payload)));
    if (problem.empty()) {
      ctx.pipeline_cache_restored_bytes = read.payload->size();
      base::log(base::LogLevel::debug, "pipeline cache: " + std::to_string(read.payload->size()) + " bytes from " +
                               path.string() + " given to the driver in " + ms_text(start));
    }
  }
  if (problem.empty()) return;
  const std::string removed = cache::discard_cache_entry(path);
  base::log(base::LogLevel::warning, "pipeline cache " + path.string() + " not used: " + problem +
                             (removed.empty() ? "; removed" : "; cannot remove it: " + removed));
}

}  // namespace

cache::CacheEntryRead read_pipeline_cache(const DeviceContext& ctx) {
  return cache::read_cache_entry(ctx.pipeline_cache_file, kPipelineCacheKind, pipeline_cache_key(ctx),
                          kMaxPipelineCacheBytes);
}

std::string write_pipeline_cache(const DeviceContext& ctx, std::span<const std::byte> data) {
  return cache::write_cache_entry(ctx.pipeline_cache_file, kPipelineCacheKind, pipeline_cache_key(ctx),
                           std::string_view(reinterpret_cast<const char*>(data.data()), data.size()));
}

void save_pipeline_cache(DeviceContext& ctx) {
  if (ctx.pipeline_cache_file.empty()) return;
  std::lock_guard lock(ctx.pipeline_cache_mutex);
  const auto start = std::chrono::steady_clock::now();
  const std::optional<std::vector<std::byte>> data = ctx.device->pipeline_cache_data();
  if (!data) return;
  const std::string problem = write_pipeline_cache(ctx, *data);
  if (!problem.empty()) {
    base::log_once(base::LogLevel::warning, "pipeline cache save " + ctx.pipeline_cache_file.string(),
                   "pipeline cache not saved: " + problem);
    return;
  }
  base::log(base::LogLevel::debug, "pipeline cache: " + std::to_string(data->size()) + " bytes saved to " +
                           ctx.pipeline_cache_file.string() + " in " + ms_text(start));
}



std::string DeviceContext::label() const {
  return backend->name() + ":" + std::to_string(index) + " '" + device->target().device_name + "'";
}

namespace {

// A pooled device, held weakly (it lives as long as some model uses it, and
// is never destroyed during static destruction), and its memory count, which
// outlives it: buffers still alive when the last model has gone (a leak) keep
// their count listed.
struct PoolEntry {
  std::weak_ptr<DeviceContext> context;
  std::shared_ptr<MemoryCounter> memory;
  std::string label;
  std::string cache_dir;
};

// By backend, device index and cache folder.
using PoolEntries = std::map<std::tuple<std::string, int, std::string>, PoolEntry>;

struct DevicePool {
  std::mutex mutex;
  PoolEntries devices;
  std::vector<PoolEntry> closed;  // closed devices whose buffers are not all freed
};

DevicePool& device_pool() {
  static DevicePool* pool = new DevicePool;  // never destroyed: models may outlive static destruction
  return *pool;
}

// Drops a closed device's entry (so the pool does not grow with every cache
// folder used), keeping its count while some of its buffers live on.
PoolEntries::iterator forget_closed(DevicePool& pool, PoolEntries::iterator entry) {
  if (entry->second.memory->bytes.load() > 0) pool.closed.push_back(entry->second);
  return pool.devices.erase(entry);
}

}  // namespace

std::shared_ptr<DeviceContext> acquire_device(const std::string& backend_name, const std::string& device_spec,
                                              const std::string& cache_dir) {
  const backend::Backend& backend = backend::get_backend(backend_name);
  const int index = backend::resolve_device(backend, device_spec);
  DevicePool& pool = device_pool();
  std::lock_guard lock(pool.mutex);
  const auto key = std::make_tuple(backend.name(), index, cache_dir);
  if (const auto found = pool.devices.find(key); found != pool.devices.end()) {
    if (auto existing = found->second.context.lock()) return existing;
    forget_closed(pool, found);
  }
  auto ctx = std::make_shared<DeviceContext>();
  ctx->backend = &backend;
  ctx->index = index;
  ctx->cache_dir = cache_dir;
  ctx->device = backend.create_device(index);
  if (const DeviceProfile* profile = profile_from_environment()) {
    ctx->device = with_profile(std::move(ctx->device), *profile);
    base::log(base::LogLevel::info, ctx->label() + ": planned for the limits of " + profile->summary + " (device profile " +
                            profile->name + ")");
  }
  if (std::shared_ptr<FaultInjector> faults = fault_injector()) ctx->device = with_faults(std::move(ctx->device), faults);
  ctx->device = with_memory_accounting(std::move(ctx->device), ctx->memory);
  ctx->kernels = std::make_unique<KernelCache>(backend, ctx->device, cache::CompileCache(cache_dir));
  restore_pipeline_cache(*ctx, cache_dir);
  pool.devices[key] = PoolEntry{ctx, ctx->memory, ctx->label(), cache_dir};
  return ctx;
}

}  // namespace runtime

std::vector<DeviceMemoryUse> device_memory_use() {
  runtime::DevicePool& pool = runtime::device_pool();
  std::lock_guard lock(pool.mutex);
  std::vector<DeviceMemoryUse> use;
  auto add = [&](const runtime::PoolEntry& entry, const std::string& device) {
    use.push_back({.device = device,
                   .cache_dir = entry.cache_dir,
                   .bytes = entry.memory->bytes.load(),
                   .buffers = entry.memory->buffers.load(),
                   .peak_bytes = entry.memory->peak_bytes.load()});
  };
  for (auto it = pool.devices.begin(); it != pool.devices.end();) {
    if (it->second.context.expired()) {
      it = runtime::forget_closed(pool, it);
    } else {
      add(it->second, it->second.label);
      ++it;
    }
  }
  std::erase_if(pool.closed, [](const runtime::PoolEntry& entry) { return entry.memory->bytes.load() == 0; });
  for (const runtime::PoolEntry& entry : pool.closed)
    add(entry, entry.label + " (closed; buffers outlived every model on it)");
  return use;
}

}  // namespace kiln

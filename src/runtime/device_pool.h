// One device (and its loaded-kernel cache) per (backend, device index, cache
// directory) per process, shared by every model that runs there. Everything
// here is safe to use from several threads at once.
#pragma once

#include "backends/backend.h"
#include "src/cache/cache_entry.h"
#include "src/runtime/device_memory.h"
#include "src/runtime/kernel_cache.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>

namespace kiln::runtime {

// Weights on one device shared by every model that has the same bytes (a
// generation's prompt step and decode step, two compiles of one model, the
// plans of one model's shape sets): each such constant, or block of packed
// constants, is uploaded once and lives while some model holds it.
class SharedWeights {
 public:
  // The buffer holding `bytes`, uploaded by `upload` into a new buffer of
  // `device` unless a live one with the same bytes exists. `uploaded` says
  // which happened.
  std::shared_ptr<backend::Buffer> find_or_upload(backend::Device& device, std::span<const std::byte> bytes,
                                                  bool& uploaded);
  // The buffer of `size` bytes whose contents `digest` names (a digest of
  // everything `fill` writes into it, and where), made by `fill` in a new
  // buffer of `device` unless a live one with that digest and size exists.
  // A fill that throws leaves nothing behind.
  std::shared_ptr<backend::Buffer> find_or_make(backend::Device& device, const std::string& digest, std::uint64_t size,
                                                const std::function<void(backend::Buffer&)>& fill, bool& made);

 private:
  std::mutex mutex_;
  // XXH3-128 of the bytes (as the kernel cache names its files), and their
  // count -> the buffer.
  std::map<std::pair<std::string, std::uint64_t>, std::weak_ptr<backend::Buffer>> buffers_;
};

struct DeviceContext {
  const backend::Backend* backend = nullptr;
  int index = 0;
  std::string cache_dir;  // as given to acquire_device ("": the default)
  std::shared_ptr<backend::Device> device;
  std::unique_ptr<KernelCache> kernels;
  SharedWeights weights;
  // Every buffer allocated through `device` (kiln::device_memory_use).
  std::shared_ptr<MemoryCounter> memory = std::make_shared<MemoryCounter>();

  // "vulkan:0 'llvmpipe (LLVM 15.0.6, 256 bits)'", for messages.
  std::string label() const;
  // Where the driver's pipeline cache is kept (<cache dir>/pipelines/<the
  // device's pipeline cache name>); empty when the cache dir is "off" or the
  // device keeps none.
  std::filesystem::path pipeline_cache_file;
  std::mutex pipeline_cache_mutex;  // one save at a time, so an older copy never replaces a newer one
  std::uint64_t pipeline_cache_restored_bytes = 0;  // what the driver was given from the file (for tests)
};

// The pooled device for (backend, device, cache dir); a new one is given the
// driver's pipeline cache kept in the cache dir, if there is a valid one (a
// file that is not is logged as a warning and removed).
std::shared_ptr<DeviceContext> acquire_device(const std::string& backend_name, const std::string& device_spec,
                                              const std::string& cache_dir);

// Writes the driver's pipeline cache to ctx.pipeline_cache_file if pipelines
// were created since the last save (call after loading kernels). Best
// effort: a failure is logged, not thrown.
void save_pipeline_cache(DeviceContext& ctx);

// The pipeline cache entry at ctx.pipeline_cache_file (read_cache_entry with
// its kind and key), and writing one there (returns "" or what went wrong).
cache::CacheEntryRead read_pipeline_cache(const DeviceContext& ctx);
std::string write_pipeline_cache(const DeviceContext& ctx, std::span<const std::byte> data);

}  // namespace kiln::runtime

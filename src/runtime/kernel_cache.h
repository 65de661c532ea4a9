// Kernels ready to dispatch on one device: render -> supports? -> compile
// (through the disk cache) -> load, each step done once per distinct source.
// A kernel that comes with binaries (a compiled-model file's) is loaded from
// them and never compiled.
#pragma once

#include "backends/backend.h"
#include "src/cache/compile_cache.h"
#include "src/compile/plan.h"
#include "src/kernel/ir.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::runtime {

// Thread-safe: models on one device share one cache and load at once.
class KernelCache {
 public:
  // What one get_all() did, apart from what other threads' calls did at the same time.
  struct LoadCounts {
    int disk_hits = 0;      // binaries read from the disk cache
    int compiled = 0;       // binaries compiled
    int from_binaries = 0;  // loaded from a kernel's own binaries
    double compile_ms = 0;  // the kernel compiler, summed over kernels (threads overlap)
    double load_ms = 0;     // the device's load_kernel (pipeline creation), summed likewise
    std::vector<std::size_t> new_kernels;  // indices (in the kernels given) of those not loaded in this process before
  };

  KernelCache(const backend::Backend& backend, std::shared_ptr<backend::Device> device, cache::CompileCache disk);

  // The loaded kernel for `kernel`. Throws Error(Unsupported) with the
  // backend's reason if the device cannot run it.
  std::shared_ptr<backend::LoadedKernel> get(const kir::Kernel& kernel);

  // get() for every kernel, in order. Distinct sources that are not loaded
  // yet compile and load on up to `max_threads` threads (0: one per hardware
  // thread), so one kernel's compiler time overlaps another's driver work
  // (lavapipe compiles each pipeline to machine code when it is loaded).
  // The first failure in `kernels` order is rethrown after all finish.
  // `counts`, if given, receives what this call loaded.
  std::vector<std::shared_ptr<backend::LoadedKernel>> get_all(std::span<const compiler::RenderedKernel* const> kernels,
                                                              unsigned max_threads = 0, LoadCounts* counts = nullptr);

  // get_all() of kernels rendered for this cache's backend first.
  std::vector<std::shared_ptr<backend::LoadedKernel>> get_all(std::span<const kir::Kernel* const> kernels,
                                                              unsigned max_threads = 0);

  int distinct_kernels() const;
  int disk_hits() const { return disk_hits_; }
  int compiled() const { return compiled_; }
  int loaded_from_binaries() const { return from_binaries_; }

 private:
  // LoadCounts as the threads of one get_all() count them.
  struct Tally {
    std::atomic<int> disk_hits = 0;
    std::atomic<int> compiled = 0;
    std::atomic<int> from_binaries = 0;
    std::atomic<std::int64_t> compile_us = 0;
    std::atomic<std::int64_t> load_us = 0;
  };
  // Checks support, compiles (or reads the disk cache) and loads; no lock held.
  std::shared_ptr<backend::LoadedKernel> load_uncached(const compiler::RenderedKernel& kernel, Tally& tally);
  // The first of the kernel's own binaries the device loads.
  std::shared_ptr<backend::LoadedKernel> load_given(const compiler::RenderedKernel& kernel, Tally& tally);
  std::shared_ptr<backend::LoadedKernel> find(const std::string& source_text) const;
  std::shared_ptr<backend::LoadedKernel> remember(std::string source_text,
                                                  std::shared_ptr<backend::LoadedKernel> loaded);

  const backend::Backend& backend_;
  std::shared_ptr<backend::Device> device_;
  cache::CompileCache disk_;
  std::string compiler_version_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<backend::LoadedKernel>> loaded_;  // by source text
  std::atomic<int> disk_hits_ = 0;
  std::atomic<int> compiled_ = 0;
  std::atomic<int> from_binaries_ = 0;
};

}  // namespace kiln::runtime

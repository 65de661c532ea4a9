#include "src/runtime/kernel_cache.h"

#include "src/base/log.h"
#include "src/render/cstyle.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>

namespace kiln::runtime {

KernelCache::KernelCache(const backend::Backend& backend, std::shared_ptr<backend::Device> device, cache::CompileCache disk)
    : backend_(backend), device_(std::move(device)), disk_(std::move(disk)),
      compiler_version_(backend.compiler().version()) {}

int KernelCache::distinct_kernels() const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(loaded_.size());
}

std::shared_ptr<backend::LoadedKernel> KernelCache::find(const std::string& source_text) const {
  std::lock_guard lock(mutex_);
  auto it = loaded_.find(source_text);
  return it != loaded_.end() ? it->second : nullptr;
}

std::shared_ptr<backend::LoadedKernel> KernelCache::remember(std::string source_text,
                                                             std::shared_ptr<backend::LoadedKernel> loaded) {
  std::lock_guard lock(mutex_);
  // A racing get() of the same source may have won: keep one kernel per source.
  return loaded_.try_emplace(std::move(source_text), std::move(loaded)).first->second;
}

std::shared_ptr<backend::LoadedKernel> KernelCache::load_given(const compiler::RenderedKernel& kernel, Tally& tally) {
  const backend::TargetDesc& target = device_->target();
  const std::string& name = kernel.source.name;
  std::string reasons;
  for (const backend::KernelBinary& binary : kernel.binaries) {
    try {
      const auto start = std::chrono::steady_clock::now();
      auto loaded = device_->load_kernel(kernel.source, binary);
      tally.load_us += std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start)
                           .count();
      ++from_binaries_;
      ++tally.from_binaries;
      return loaded;
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::OutOfMemory || e.kind() == ErrorKind::DeviceUnavailable) throw;
      reasons += "\n  " + binary.format + ": " + e.what();
    }
  }
  throw_error(ErrorKind::Unsupported, "kernel '" + name + "': none of its " + std::to_string(kernel.binaries.size()) +
                                          " binaries loads on " + target.device_name + ":" + reasons);
}

std::shared_ptr<backend::LoadedKernel> KernelCache::load_uncached(const compiler::RenderedKernel& kernel,
                                                                 Tally& tally) {
  const backend::TargetDesc& target = device_->target();
  const backend::KernelSource& source = kernel.source;
  if (auto why = backend_.supports(kernel.requirements, target))
    throw_error(ErrorKind::Unsupported, "kernel '" + source.name + "' cannot run on " + target.device_name + ": " + *why);
  if (!kernel.binaries.empty()) return load_given(kernel, tally);

  const cache::CacheKey key = cache::CompileCache::key(source, target, compiler_version_);
  using Clock = std::chrono::steady_clock;
  auto us_since = [](Clock::time_point start) {
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
  };
  auto ms_since = [&](Clock::time_point start) { return std::to_string(us_since(start) / 1000); };
  auto compile = [&] {
    const Clock::time_point start = Clock::now();
    backend::KernelBinary binary = backend_.compiler().compile(source, target);
    tally.compile_us += us_since(start);
    ++compiled_;
    ++tally.compiled;
    disk_.store(key, binary);
    base::log(base::LogLevel::debug, "compiled kernel '" + source.name + "' (" + std::to_string(binary.data.size()) + " bytes " +
                             binary.format + ") in " + ms_since(start) + " ms");
    return binary;
  };
  auto load = [&](const backend::KernelBinary& binary) {
    const Clock::time_point start = Clock::now();
    auto loaded = device_->load_kernel(source, binary);
    tally.load_us += us_since(start);
    // Loading is where a driver finishes compiling (lavapipe's LLVM, a GPU driver's
    // back end): often the larger part of a cold compile.
    base::log(base::LogLevel::debug, "loaded kernel '" + source.name + "' in " + ms_since(start) + " ms");
    return loaded;
  };

  std::optional<backend::KernelBinary> cached = disk_.load(key);
  if (!cached) return load(compile());
  try {
    auto loaded = load(*cached);
    ++disk_hits_;
    ++tally.disk_hits;
    return loaded;
  } catch (const Error& e) {
    // Out of memory or a lost device is the device's state, not the entry's.
    if (e.kind() == ErrorKind::OutOfMemory || e.kind() == ErrorKind::DeviceUnavailable) throw;
    // An entry that passed every check but that the driver refuses (another
    // driver's binary, a forged one) would fail every later run: replace it
    // once with a fresh compile; a second failure is the kernel's own.
    base::log(base::LogLevel::warning, "kernel '" + source.name + "' from cache entry " + disk_.path_for(key).string() +
                               " failed to load (" + e.what() + "); removed it, compiling again");
    disk_.discard(key);
  }
  return load(compile());
}

std::shared_ptr<backend::LoadedKernel> KernelCache::get(const kir::Kernel& kernel) {
  const compiler::RenderedKernel rendered{render::make_kernel_source(kernel, backend_.language_for(device_->target())),
                                          render::kernel_requirements(kernel), {}};
  if (auto loaded = find(rendered.source.text)) return loaded;
  Tally tally;
  return remember(rendered.source.text, load_uncached(rendered, tally));
}

std::vector<std::shared_ptr<backend::LoadedKernel>> KernelCache::get_all(std::span<const kir::Kernel* const> kernels,
                                                                         unsigned max_threads) {
  std::vector<compiler::RenderedKernel> rendered;
  rendered.reserve(kernels.size());
  for (const kir::Kernel* kernel : kernels)
    rendered.push_back({render::make_kernel_source(*kernel, backend_.language_for(device_->target())), render::kernel_requirements(*kernel), {}});
  std::vector<const compiler::RenderedKernel*> pointers;
  for (const compiler::RenderedKernel& kernel : rendered) pointers.push_back(&kernel);
  return get_all(std::span<const compiler::RenderedKernel* const>(pointers), max_threads);
}

std::vector<std::shared_ptr<backend::LoadedKernel>> KernelCache::get_all(
    std::span<const compiler::RenderedKernel* const> kernels, unsigned max_threads, LoadCounts* counts) {
  // The first occurrence of each source not loaded yet: the work to share out.
  std::vector<std::size_t> work;
  {
    std::unordered_map<std::string_view, bool> queued;
    for (std::size_t i = 0; i < kernels.size(); ++i)
      if (queued.try_emplace(kernels[i]->source.text, true).second && !find(kernels[i]->source.text)) work.push_back(i);
  }

  std::vector<std::exception_ptr> failures(kernels.size());
  Tally tally;
  std::atomic<std::size_t> next = 0;
  auto worker = [&] {
    for (std::size_t w = next++; w < work.size(); w = next++) {
      const std::size_t i = work[w];
      try {
        remember(kernels[i]->source.text, load_uncached(*kernels[i], tally));
      } catch (...) {
        failures[i] = std::current_exception();
      }
    }
  };
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t threads = std::min<std::size_t>(work.size(), max_threads != 0 ? max_threads : hardware);
  std::vector<std::jthread> helpers;
  for (std::size_t t = 1; t < threads; ++t) helpers.emplace_back(worker);
  worker();
  helpers.clear();  // joins
  if (counts != nullptr) {
    *counts = {tally.disk_hits, tally.compiled, tally.from_binaries, static_cast<double>(tally.compile_us) / 1000.0,
               static_cast<double>(tally.load_us) / 1000.0, {}};
    counts->new_kernels = work;
  }
  for (const std::exception_ptr& failure : failures)
    if (failure) std::rethrow_exception(failure);

  std::vector<std::shared_ptr<backend::LoadedKernel>> loaded;
  loaded.reserve(kernels.size());
  for (const compiler::RenderedKernel* kernel : kernels) loaded.push_back(find(kernel->source.text));
  return loaded;
}

}  // namespace kiln::runtime

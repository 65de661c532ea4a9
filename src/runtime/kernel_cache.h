// Kernels ready to dispatch on one device: render -> supports? -> compile
// (through the disk cache) -> load, each step done once per distinct source.
#pragma once

#include "backends/backend.h"
#include "src/kernel/ir.h"
#include "src/runtime/compile_cache.h"

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace kiln::runtime {

class KernelCache {
 public:
  KernelCache(const backend::Backend& backend, std::shared_ptr<backend::Device> device, CompileCache disk);

  // The loaded kernel for `kernel`. Throws Error(Unsupported) with the
  // backend's reason if the device cannot run it.
  std::shared_ptr<backend::LoadedKernel> get(const kir::Kernel& kernel);

  int distinct_kernels() const { return static_cast<int>(loaded_.size()); }
  int disk_hits() const { return disk_hits_; }
  int compiled() const { return compiled_; }

 private:
  const backend::Backend& backend_;
  std::shared_ptr<backend::Device> device_;
  CompileCache disk_;
  std::string compiler_version_;
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<backend::LoadedKernel>> loaded_;  // by source text
  int disk_hits_ = 0;
  int compiled_ = 0;
};

}  // namespace kiln::runtime

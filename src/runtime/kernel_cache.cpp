#include "src/runtime/kernel_cache.h"

#include "src/render/cstyle.h"
#include "src/runtime/log.h"

namespace kiln::runtime {

KernelCache::KernelCache(const backend::Backend& backend, std::shared_ptr<backend::Device> device, CompileCache disk)
    : backend_(backend), device_(std::move(device)), disk_(std::move(disk)),
      compiler_version_(backend.compiler().version()) {}

std::shared_ptr<backend::LoadedKernel> KernelCache::get(const kir::Kernel& kernel) {
  backend::KernelSource source = render::make_kernel_source(kernel, backend_.language());
  std::lock_guard lock(mutex_);
  if (auto it = loaded_.find(source.text); it != loaded_.end()) return it->second;

  const backend::TargetDesc& target = device_->target();
  backend::KernelRequirements needs;
  needs.kernel_name = kernel.name;
  needs.workgroup_size = kernel.workgroup_size;
  needs.num_buffers = static_cast<std::uint32_t>(kernel.buffers.size());
  if (auto why = backend_.supports(needs, target))
    throw_error(ErrorKind::Unsupported, "kernel '" + kernel.name + "' cannot run on " + target.device_name + ": " + *why);

  const std::string key = CompileCache::key(source, target, compiler_version_);
  std::optional<backend::KernelBinary> binary = disk_.load(key);
  if (binary) {
    ++disk_hits_;
  } else {
    binary = backend_.compiler().compile(source, target);
    ++compiled_;
    disk_.store(key, *binary);
    log(LogLevel::debug, "compiled kernel '" + kernel.name + "' (" + std::to_string(binary->data.size()) + " bytes " +
                             binary->format + ")");
  }
  auto loaded = device_->load_kernel(source, *binary);
  loaded_.emplace(std::move(source.text), loaded);
  return loaded;
}

}  // namespace kiln::runtime

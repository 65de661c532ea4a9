// A kiln Device on one Vulkan physical device: allocation, host copies, the
// loaded-kernel cache and command lists.
#pragma once

#include "backends/backend.h"
#include "backends/vulkan/context.h"
#include "backends/vulkan/pipeline.h"
#include "backends/vulkan/pipeline_cache.h"
#include "backends/vulkan/staging.h"

#include <array>
#include <atomic>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <tuple>
#include <vector>

namespace kiln::backend::vulkan {

struct DeviceOptions {
  // false: never map device memory; every host copy goes through a staging
  // buffer, as on a discrete GPU (tests use it to cover that path).
  bool map_device_memory = true;
};

class VulkanDevice final : public Device {
 public:
  // Creates the VkDevice. `index` is the device's place in
  // query_physical_devices(), for messages. Throws DeviceUnavailable.
  VulkanDevice(std::shared_ptr<Instance> instance, PhysicalDevice physical, int index, DeviceOptions options = {});

  const TargetDesc& target() const override { return context_->target(); }
  std::shared_ptr<Buffer> allocate(std::uint64_t bytes) override;
  void upload(Buffer& buffer, std::uint64_t offset, std::span<const std::byte> data) override;
  void download(const Buffer& buffer, std::uint64_t offset, std::span<std::byte> data) override;
  // Returns the cached kernel when the same binary (and name) was loaded before.
  // On CPU devices a new pipeline is also compiled to machine code here (see
  // compile_now). Thread-safe. Throws Unsupported for a workgroup size the
  // device cannot run.
  std::shared_ptr<LoadedKernel> load_kernel(const KernelSource& source, const KernelBinary& binary) override;
  std::unique_ptr<CommandList> create_command_list() override;

  // The driver's pipeline cache: every pipeline is created with it.
  std::optional<std::string> pipeline_cache_name() const override;
  // Refuses data whose header is not this device's and driver's (see
  // check_pipeline_cache_header) or that the driver rejects.
  std::string restore_pipeline_cache(std::span<const std::byte> data) override;
  std::optional<std::vector<std::byte>> pipeline_cache_data() override;
  // The cache's contents now, whether or not anything changed (for tests).
  std::vector<std::byte> pipeline_cache_contents() const;

  // How many distinct pipelines the cache holds.
  std::size_t pipeline_count() const;
  const DeviceContext& context() const { return *context_; }

 private:
  // A binary's 128-bit content hash, its buffer count and its texel views'
  // widths and elements (texel_layout): one binary may read f32 or f16 views.
  using PipelineKey = std::tuple<std::uint64_t, std::uint64_t, std::uint32_t, std::string>;

  // Dispatches zero workgroups of a new kernel: CPU drivers (lavapipe)
  // compile a pipeline to machine code at its first dispatch, so this moves
  // that compile into loading (which callers run on several threads) and
  // out of the first call. Zero workgroups run no code, so any buffer fits.
  void compile_now(VulkanKernel& kernel);

  const VulkanBuffer& own_buffer(const Buffer& buffer, std::uint64_t offset, std::uint64_t bytes,
                                 const char* operation) const;

  std::shared_ptr<const DeviceContext> context_;
  DeviceOptions options_;
  StagingCopier staging_;

  // Pipelines are created under a shared lock, a restore replaces the cache
  // under an exclusive one.
  mutable std::shared_mutex pipeline_cache_mutex_;
  PipelineCache pipeline_cache_;
  std::atomic<std::uint64_t> pipelines_since_cache_data_ = 0;

  std::once_flag placeholder_once_;
  std::shared_ptr<Buffer> placeholder_;  // bound to every binding by compile_now()

  mutable std::mutex kernels_mutex_;
  std::map<PipelineKey, std::shared_ptr<const VulkanPipeline>> pipelines_;
  std::map<std::pair<PipelineKey, std::string>, std::shared_ptr<VulkanKernel>> kernels_;
};

}  // namespace kiln::backend::vulkan

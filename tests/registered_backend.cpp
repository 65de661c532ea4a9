// A backend that no file outside this one knows: "throwaway", registered at
// start-up through backend::register_backend, as a program that brings its
// own backend would. Every suite linked with this file (tests/meson.build:
// the *_registered tests) crosses it as it crosses the built-in backends,
// which proves what docs/backends.md promises: a new backend is its folder,
// one registry line and one build option, and nothing else names it.
//
// It computes on the first built-in backend with a device here, under its
// own name: its targets, devices, binaries, cache entries, tuning records
// and compiled-model files are the throwaway's, so a table anywhere in kiln
// keyed by backend name (a format, a compatibility rule, an expectation)
// would miss it and fail the suites.
#include "tests/registered_backend.h"

#include "backends/registry.h"
#include "src/base/check.h"

#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace kiln::testing {
namespace {

using backend::Backend;

backend::TargetDesc renamed(backend::TargetDesc target, const std::string& name) {
  target.backend = name;
  return target;
}

class ThrowawayDevice final : public backend::Device {
 public:
  ThrowawayDevice(std::shared_ptr<backend::Device> inner, std::string name)
      : inner_(std::move(inner)), target_(renamed(inner_->target(), name)) {}
  const backend::TargetDesc& target() const override { return target_; }
  std::shared_ptr<backend::Buffer> allocate(std::uint64_t bytes) override { return inner_->allocate(bytes); }
  void upload(backend::Buffer& buffer, std::uint64_t offset, std::span<const std::byte> data) override {
    inner_->upload(buffer, offset, data);
  }
  void download(const backend::Buffer& buffer, std::uint64_t offset, std::span<std::byte> data) override {
    inner_->download(buffer, offset, data);
  }
  std::shared_ptr<backend::LoadedKernel> load_kernel(const backend::KernelSource& source,
                                                     const backend::KernelBinary& binary) override {
    return inner_->load_kernel(source, binary);
  }
  std::unique_ptr<backend::CommandList> create_command_list() override { return inner_->create_command_list(); }
  std::optional<std::string> pipeline_cache_name() const override {
    const auto name = inner_->pipeline_cache_name();
    return name ? std::optional(target_.backend + "-" + *name) : std::nullopt;
  }
  std::string restore_pipeline_cache(std::span<const std::byte> data) override {
    return inner_->restore_pipeline_cache(data);
  }
  std::optional<std::vector<std::byte>> pipeline_cache_data() override { return inner_->pipeline_cache_data(); }

 private:
  std::shared_ptr<backend::Device> inner_;
  backend::TargetDesc target_;
};

class ThrowawayCompiler final : public backend::KernelCompiler {
 public:
  explicit ThrowawayCompiler(const Backend* const& inner) : inner_(inner) {}
  std::string version() const override { return "throwaway over " + inner_->compiler().version(); }
  std::string binary_format(const backend::TargetDesc& target) const override {
    return inner_->compiler().binary_format(renamed(target, inner_->name()));
  }
  backend::KernelBinary compile(const backend::KernelSource& source, const backend::TargetDesc& target) const override {
    return inner_->compiler().compile(source, renamed(target, inner_->name()));
  }

 private:
  const Backend* const& inner_;
};

class ThrowawayBackend final : public Backend {
 public:
  std::string name() const override { return kRegisteredBackend; }
  std::optional<std::string> unavailable_reason() const override {
    if (inner() == nullptr) return "no built-in backend has a device here to compute on";
    return std::nullopt;
  }
  std::vector<backend::DeviceInfo> enumerate_devices() const override {
    if (inner() == nullptr) return {};
    std::vector<backend::DeviceInfo> devices = inner()->enumerate_devices();
    for (backend::DeviceInfo& d : devices) d.target = renamed(std::move(d.target), name());
    return devices;
  }
  std::shared_ptr<backend::Device> create_device(int index) const override {
    KILN_CHECK(inner() != nullptr, ErrorKind::DeviceUnavailable, "backend 'throwaway' cannot run here: " + *unavailable_reason());
    return std::make_shared<ThrowawayDevice>(inner()->create_device(index), name());
  }
  const backend::LanguageTable& language() const override { return computing_backend().language(); }
  const backend::LanguageTable& language_for(const backend::TargetDesc& target) const override {
    return computing_backend().language_for(target);
  }
  const backend::KernelCompiler& compiler() const override {
    computing_backend();
    return compiler_;
  }
  std::vector<backend::TargetDesc> offline_targets() const override {
    std::vector<backend::TargetDesc> targets = computing_backend().offline_targets();
    for (backend::TargetDesc& t : targets) t = renamed(std::move(t), name());
    return targets;
  }
  std::optional<std::string> supports(const backend::KernelRequirements& kernel,
                                      const backend::TargetDesc& target) const override {
    return computing_backend().supports(kernel, renamed(target, inner_->name()));
  }
  std::vector<backend::TargetDesc> binary_targets(const backend::TargetDesc& target) const override {
    std::vector<backend::TargetDesc> targets = computing_backend().binary_targets(renamed(target, inner_->name()));
    for (backend::TargetDesc& t : targets) t = renamed(std::move(t), name());
    return targets;
  }
  std::optional<std::string> foreign_plan_refusal(const backend::TargetDesc& planned, const backend::TargetDesc& device,
                                                  const std::set<std::string>& formats) const override {
    return computing_backend().foreign_plan_refusal(renamed(planned, inner_->name()), renamed(device, inner_->name()),
                                                    formats);
  }
  bool target_spec_names_a_device() const override { return computing_backend().target_spec_names_a_device(); }
  ConformanceExpectations conformance_expectations() const override {
    return computing_backend().conformance_expectations();
  }

 private:
  // The built-in backend it computes on: the first with a device, found on
  // first use (the registry's list is complete by then).
  const Backend* inner() const {
    std::call_once(found_, [this] {
      for (const Backend* b : backend::all_backends())
        if (b != this && !b->unavailable_reason() && !b->enumerate_devices().empty()) {
          inner_ = b;
          break;
        }
    });
    return inner_;
  }
  const Backend& computing_backend() const {
    KILN_CHECK(inner() != nullptr, ErrorKind::DeviceUnavailable, "backend 'throwaway' cannot run here: " + *unavailable_reason());
    return *inner_;
  }

  mutable std::once_flag found_;
  mutable const Backend* inner_ = nullptr;
  ThrowawayCompiler compiler_{inner_};
};

// Registered before main, as a program bringing its own backend would at start-up.
const bool registered = [] {
  backend::register_backend(std::make_unique<ThrowawayBackend>());
  return true;
}();

}  // namespace
}  // namespace kiln::testing

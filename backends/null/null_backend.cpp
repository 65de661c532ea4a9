// The null backend: compiles, registers, and runs nothing. It is the template
// for a new backend (as in IREE's null driver). To add target "foo":
//
//   1. Copy backends/null/ to backends/foo/ and rename null -> foo in the file
//      names, the namespace and the factory (create_foo_backend in foo_backend.h).
//   2. Fill in language.cpp: the spellings of the C-style renderer
//      (backends/language.h), or write a renderer if the language is not C-like.
//   3. Replace NullCompiler with the real source -> binary step and
//      offline_targets() with the architectures it can build for without a device.
//   4. Probe the driver lazily (dlopen it; never link it, so kiln still starts
//      where it is missing) and return the reason from unavailable_reason().
//   5. Implement Device, Buffer, LoadedKernel and CommandList (backend.h), one
//      file per concept, and return the device from create_device().
//   6. Add the folder to backends/meson.build behind a meson feature that
//      defines KILN_HAVE_FOO and appends 'foo' to built_backends, and add
//      the factory to backends/registry.cpp.
//   7. tests/test_backend_conformance.cpp then runs the device-level checks,
//      and tests/test_conformance.cpp every op case, on the new backend
//      (docs/backends.md).
#include "backends/null/null_backend.h"

#include "backends/null/language.h"
#include "src/base/check.h"

namespace kiln::backend {
namespace {

// A compiler whose "binary" is the source text itself. A real one invokes the
// target's compiler and turns every failure into Error(Internal) carrying the
// compiler's log and the numbered source: generated code that does not compile
// is a kiln bug.
class NullCompiler final : public KernelCompiler {
 public:
  // Name and version of the compiler; part of every cache key, so a compiler
  // upgrade invalidates cached binaries.
  std::string version() const override { return "null 1"; }

  // What compile() returns for `target` (a real backend: "spirv", "ptx", ...).
  std::string binary_format(const TargetDesc&) const override { return "text"; }

  // Source -> binary for one target. Must be thread-safe: the core may compile
  // several kernels at once.
  KernelBinary compile(const KernelSource& source, const TargetDesc& target) const override {
    KILN_CHECK(target.backend == "null", ErrorKind::Internal,
               "the null compiler got a target of backend '" + target.backend + "'");
    KILN_CHECK(!source.text.empty(), ErrorKind::Internal,
               "the null compiler got kernel '" + source.name + "' with an empty source");
    KernelBinary binary;
    binary.format = binary_format(target);
    const auto* bytes = reinterpret_cast<const std::byte*>(source.text.data());
    binary.data.assign(bytes, bytes + source.text.size());
    return binary;
  }
};

// The target the null compiler "builds" for. A real backend describes each
// architecture it compiles for offline with that architecture's limits (see
// TargetDesc), so supports() can refuse a kernel before code generation.
TargetDesc null_target(const std::string& compiler_version) {
  TargetDesc target;
  target.backend = "null";
  target.device_name = "null (source text, offline)";
  target.device_type = "offline";
  target.offline = true;
  target.driver = compiler_version;
  target.api_version = "none";
  target.arch = "text";
  target.subgroup_size = 1;
  target.max_workgroup_size = {1024, 1024, 64};
  target.max_workgroup_invocations = 1024;
  target.max_workgroup_count = {65535, 65535, 65535};
  target.max_shared_memory_bytes = 32 * 1024;
  target.max_buffer_bytes = 1ull << 32;
  target.int64 = true;  // C99's int64_t and uint8_t
  target.storage8 = true;
  target.storage16 = true;
  target.fp16 = true;
  set_pointer_style_capabilities(target);
  return target;
}

class NullBackend final : public Backend {
 public:
  // The name users select the backend by (CLI --backend, CompileOptions::backend).
  std::string name() const override { return "null"; }

  // Why kernels cannot run here, or nullopt. A real backend probes its driver
  // once (lazily, never in the constructor: the registry builds every backend
  // at start-up) and says what is missing: "no NVIDIA driver: ...".
  std::optional<std::string> unavailable_reason() const override {
    return "the null backend runs nothing: it is the template for new backends";
  }

  // Every device the driver reports, with limits read from the device; empty
  // when unavailable.
  std::vector<DeviceInfo> enumerate_devices() const override { return {}; }

  // Throws NotFound for a bad index, DeviceUnavailable (with the reason) when
  // the backend cannot run here; otherwise opens the device.
  std::shared_ptr<Device> create_device(int index) const override {
    throw_error(ErrorKind::Unsupported, "the null backend has no devices (asked for device " +
                                            std::to_string(index) + "): it is the template for new backends");
  }

  // The spelling table the C-style renderer uses for this backend's language.
  const LanguageTable& language() const override { return null_language(); }
  // Plain C99: the sources a new backend starts from.
  std::string source_target() const override { return "c"; }

  // The source -> binary step; owned by the backend, lives as long as it.
  const KernelCompiler& compiler() const override { return compiler_; }

  // Targets code is generated for without a device; the compile tests build
  // every kernel for each of them.
  std::vector<TargetDesc> offline_targets() const override { return {null_target(compiler_.version())}; }

  // supports(kernel, target) is inherited: the default compares the kernel's
  // needs with the target's limits. Override it to add target-specific limits.

 private:
  NullCompiler compiler_;
};

}  // namespace

std::unique_ptr<Backend> create_null_backend() { return std::make_unique<NullBackend>(); }

}  // namespace kiln::backend

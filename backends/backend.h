// The backend interface: everything kiln's core knows about a target. A
// backend lives in backends/<name>/, includes only this header (and
// include/kiln), and registers itself through registry.h.
//
// Flow: the core renders a kir::Kernel with the backend's LanguageTable,
// asks supports() before code generation, compiles the source with the
// backend's KernelCompiler (results cached by the core), loads the binary on
// a Device and records dispatches into a CommandList.
#pragma once

#include "backends/language.h"

#include <kiln/error.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::backend {

// A typed capability record read from the device (or, for an offline
// compile target, from its architecture).
// How a target's kernels convert f16 buffer elements to and from f32.
enum class F16Conversion : std::uint8_t {
  integer,     // exact integer helpers: any device
  // The device's own conversions, asked to round to nearest even and keep
  // f16 subnormals (Vulkan: the RoundingModeRTE and DenormPreserve execution
  // modes, where shaderRoundingModeRTEFloat16 and shaderDenormPreserveFloat16
  // promise them).
  native,
  // Asked to round to nearest even only: a driver that keeps subnormals
  // without promising it (lavapipe), chosen by KILN_VULKAN_F16_CONVERSION
  // for testing the native spelling there.
  native_rte,
};
// "integer", "native", "native-rte"; parse throws InvalidArgument.
std::string_view f16_conversion_name(F16Conversion conversion);
F16Conversion parse_f16_conversion(std::string_view name);

struct TargetDesc {
  std::string backend;        // "vulkan", "cuda", "hip", "null"
  std::string device_name;    // "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string device_type;    // "cpu", "discrete-gpu", "integrated-gpu", "virtual-gpu", "offline", "other"
  // What the rest of kiln decides from the kind of device (device_type is
  // its name, for people): a compile target with no device behind it (`kiln
  // compile --target cuda:sm_90`: code and limits only), and a device whose
  // kernels run on CPU cores (lavapipe, the cpu backend), for which passes
  // and kernels take their CPU variants; of those, one whose kernels are
  // compiled as the host's own code (the cpu backend) rather than run by a
  // GPU API on CPU cores; and a GPU with its own memory and many
  // multiprocessors (Vulkan's discrete-gpu devices, CUDA and HIP devices
  // that are not integrated, their offline targets), for which kernels take
  // large, double-buffered blocks. lower::device_class reads these.
  bool offline = false;
  bool cpu_cores = false;
  bool host_code = false;
  bool discrete_gpu = false;
  std::string driver;         // driver name and version
  std::string api_version;    // "Vulkan 1.3.230", "CUDA 13.0", "gfx90a"
  std::string arch;           // compile target: "spirv1.3", "sm_90", "gfx90a"
  std::uint32_t subgroup_size = 0;
  std::array<std::uint32_t, 3> max_workgroup_size{};
  std::uint32_t max_workgroup_invocations = 0;
  std::array<std::uint32_t, 3> max_workgroup_count{};
  std::uint64_t max_shared_memory_bytes = 0;
  std::uint64_t max_buffer_bytes = 0;
  std::uint64_t device_memory_bytes = 0;
  std::uint64_t min_buffer_offset_alignment = 256;  // for bindings into an arena
  std::uint32_t max_kernel_buffers = 0;  // buffers one kernel may bind; 0: no stated limit
  // Bytes of per-dispatch parameters one kernel may take (Vulkan
  // maxPushConstantsSize, at least 128); 0: no stated limit.
  std::uint32_t max_kernel_param_bytes = 0;
  bool fp16 = false;
  // TF32 matrix units (NVIDIA sm_80 and later): what the precision settings
  // float32_matmul_precision=high and conv_allow_tf32 may use.
  bool tf32 = false;
  // The matrix instructions its subgroups run (kir fragments in subgroups
  // of more than one lane; the language renders them): tensor cores, MFMA.
  // Implied by the arch, so not part of the fingerprint.
  std::vector<MatrixShape> matrix_shapes;
  bool int64 = false;
  bool storage8 = false;  // one-byte elements in buffers (kernels with bool tensors)
  // Two-byte elements in buffers (kernels with f16 or bf16 tensors, which
  // they convert to f32 to compute: no 16-bit arithmetic needed).
  bool storage16 = false;
  // How kernels convert between f32 and f16 buffer elements: kir's exact
  // rule whichever way (Backend::language_for picks the spelling).
  F16Conversion f16_conversion = F16Conversion::integer;
  bool timestamps = false;
  // Subgroup operations kernels may use in compute (Vulkan: supportedStages
  // has COMPUTE and supportedOperations BASIC / BALLOT; CUDA/HIP: warp
  // shuffles): subgroup ids, and broadcast of a value from a constant lane.
  bool subgroup_basic = false;
  bool subgroup_broadcast = false;
  // Whether a kernel written for subgroups of S lanes runs where S divides
  // subgroup_size (CUDA/HIP shuffles take a width); otherwise (Vulkan, no
  // size control) S must equal subgroup_size.
  bool subgroup_partitions = false;
  // Texel buffers (kir texel_width 1 and 4): whether R32 / RGBA32 float
  // uniform texel buffers are supported, and the largest view in texels
  // (maxTexelBufferElements; 0: no texel buffers).
  bool texel_r32f = false;
  bool texel_rgba32f = false;
  std::uint64_t max_texel_buffer_elements = 0;
  // 16-bit texel buffers (kir f16 / bf16 texel buffers): whether R16 and
  // RGBA16 uniform texel buffers are supported in both the unsigned and the
  // float format. Only Vulkan has them (a CUDA-style texel buffer is an f32
  // pointer).
  bool texel_16bit = false;
  // The device-limits profile these limits were clamped to ("android-baseline";
  // src/runtime/device_profile.h), "" for the device's own.
  std::string limits_profile{};

  // A stable string identifying everything that changes generated binaries
  // (backend, device, driver, arch, limits profile); part of every cache key.
  std::string fingerprint() const;
};

// The subgroup and texel-buffer capabilities of a CUDA-style target (CUDA,
// HIP; the null target's one-lane subgroups): width-confined shuffles, and
// texel buffers as read-only pointers up to the largest buffer. Call after
// setting subgroup_size and max_buffer_bytes.
void set_pointer_style_capabilities(TargetDesc& target);

// What a kernel needs of a target, summarised before code generation.
struct KernelRequirements {
  std::string kernel_name;
  std::uint32_t workgroup_size = 64;
  std::uint64_t shared_memory_bytes = 0;
  std::uint32_t num_buffers = 0;
  bool fp16 = false;
  bool int64 = false;     // it computes with i64 values
  bool storage8 = false;  // it reads or writes one-byte (bool) buffer elements
  bool storage16 = false; // it reads or writes two-byte (f16, bf16) buffer elements
  std::uint32_t param_bytes = 0;  // per-dispatch parameters (4 bytes each)
  std::uint32_t subgroup_size = 0;  // lanes its subgroup operations assume; 0: none used
  bool subgroup_broadcast = false;  // it broadcasts between lanes
  std::vector<MatrixShape> matrix_shapes;  // matrix instructions its fragments need
  bool texel_width_1 = false;       // it reads R32 float texel buffers
  bool texel_width_4 = false;       // it reads RGBA32 float texel buffers
  bool texel_16bit = false;         // its texel buffers include f16 or bf16 ones (R16 / RGBA16)
};

// The elements of a texel buffer (KernelSource::texel_elements).
enum class TexelElement : std::uint8_t { f32, f16, bf16 };

struct KernelSource {
  std::string name;       // entry point / kernel function name
  std::string language;   // LanguageTable::name
  std::string text;
  std::uint32_t workgroup_size = 64;
  std::uint32_t num_buffers = 0;
  std::uint32_t num_params = 0;  // i32 per-dispatch parameters (members p0.. of the parameter block)
  // Per buffer: 0 a storage buffer, 1 or 4 a texel buffer of that many
  // elements per texel (empty: all storage buffers).
  std::vector<std::uint32_t> texel_widths = {};
  // Per buffer, a texel buffer's elements (empty: all f32).
  std::vector<TexelElement> texel_elements = {};
  // Bytes of workgroup-shared memory the kernel declares dynamically
  // (LanguageTable::max_static_shared_bytes): what each launch passes, and
  // what loading the kernel opts in to beyond the static limit. 0: none.
  std::uint32_t dynamic_shared_bytes = 0;
};

struct KernelBinary {
  std::string format;             // "spirv", "ptx", "cubin", "hsaco"
  std::vector<std::byte> data;
  std::string log;                // compiler warnings, if any
};

// Source -> binary. compile() throws Error(Internal) with the compiler log and
// the numbered source if the generated code does not compile (a kiln bug).
class KernelCompiler {
 public:
  virtual ~KernelCompiler() = default;
  // Compiler name and version, part of every cache key ("shaderc 2023.2, spirv-tools ...").
  virtual std::string version() const = 0;
  // The format compile() gives for `target` ("spirv", "ptx", "cubin",
  // "hsaco", "elf-so", "text"): what a compiled-model file records and the
  // compile tests expect.
  virtual std::string binary_format(const TargetDesc& target) const = 0;
  virtual KernelBinary compile(const KernelSource& source, const TargetDesc& target) const = 0;
};

// Device memory. Contents are undefined after allocation.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual std::uint64_t size() const = 0;
};

// A compiled kernel loaded on a device, ready to dispatch.
class LoadedKernel {
 public:
  virtual ~LoadedKernel() = default;
  virtual const std::string& name() const = 0;
};

struct BufferBinding {
  Buffer* buffer = nullptr;
  std::uint64_t offset = 0;  // a multiple of TargetDesc::min_buffer_offset_alignment
  std::uint64_t size = 0;    // bytes visible to the kernel
};

// A recorded sequence of dispatches and copies. Record, finish(), then
// submit() as many times as wanted (replay). Commands run in order: each one
// sees every write of the commands recorded before it. One list is used by
// one thread at a time; different lists may be recorded and submitted on
// different threads at once.
class CommandList {
 public:
  virtual ~CommandList() = default;
  // `params` are the kernel's per-dispatch parameters (KernelSource::num_params of them).
  virtual void dispatch(LoadedKernel& kernel, std::array<std::uint32_t, 3> groups,
                        std::span<const BufferBinding> bindings, std::span<const std::int32_t> params) = 0;
  // A dispatch of a kernel without parameters.
  void dispatch(LoadedKernel& kernel, std::array<std::uint32_t, 3> groups, std::span<const BufferBinding> bindings) {
    dispatch(kernel, groups, bindings, {});
  }
  // Copies `bytes` from `src` at `src_offset` to `dst` at `dst_offset` (both
  // on this list's device; regions within the buffers, not overlapping when
  // src is dst). Ordered like a dispatch: it sees every earlier write, and
  // later dispatches and copies see its writes. Throws InvalidArgument for a
  // buffer of another device or a region outside a buffer.
  virtual void copy(const Buffer& src, std::uint64_t src_offset, Buffer& dst, std::uint64_t dst_offset,
                    std::uint64_t bytes) = 0;
  virtual void finish() = 0;
  // Runs the recorded work and waits for it to complete.
  virtual void submit() = 0;
  // Device time of the last submit in milliseconds, if the device has timestamps. (optional)
  virtual std::optional<double> last_device_ms() const { return std::nullopt; }
};

struct DeviceInfo {
  int index = 0;
  TargetDesc target;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const TargetDesc& target() const = 0;
  // Throws Error(OutOfMemory) naming the size when the device cannot allocate.
  virtual std::shared_ptr<Buffer> allocate(std::uint64_t bytes) = 0;
  // Synchronous copies between host memory and a buffer region.
  virtual void upload(Buffer& buffer, std::uint64_t offset, std::span<const std::byte> data) = 0;
  virtual void download(const Buffer& buffer, std::uint64_t offset, std::span<std::byte> data) = 0;
  virtual std::shared_ptr<LoadedKernel> load_kernel(const KernelSource& source, const KernelBinary& binary) = 0;
  virtual std::unique_ptr<CommandList> create_command_list() = 0;

  // The driver's cache of compiled pipelines, which the runtime keeps in its
  // cache folder so that another process hands it back (optional: the
  // defaults are a device without one).
  // What saved data must have been made by to be restored here (device,
  // driver and the driver's cache format), usable as a file name; nullopt:
  // this device keeps no pipeline cache.
  virtual std::optional<std::string> pipeline_cache_name() const { return std::nullopt; }
  // Gives the driver data that pipeline_cache_data() returned in an earlier
  // process for the same name. Call before loading kernels. Returns "" when
  // the driver took it, else why the data was refused (the driver never sees
  // refused data).
  virtual std::string restore_pipeline_cache(std::span<const std::byte> data) {
    (void)data;
    return "this device keeps no pipeline cache";
  }
  // The driver's cache as it is now, if pipelines were created since the
  // last call (or since the device was made); nullopt otherwise.
  virtual std::optional<std::vector<std::byte>> pipeline_cache_data() { return std::nullopt; }
};

// The checks a CommandList::dispatch makes before recording, shared by the
// backends: the buffer and parameter counts, the grid within the target's
// workgroup counts (at least one group each way), and each binding at a
// multiple of `alignment` and inside its buffer. Throws InvalidArgument
// naming the kernel. (Whether the buffers belong to the list's device is
// the backend's to check.)
void check_dispatch(const std::string& kernel, std::uint32_t num_buffers, std::uint32_t num_params,
                    std::array<std::uint32_t, 3> groups, std::span<const BufferBinding> bindings,
                    std::span<const std::int32_t> params, const TargetDesc& target, std::uint64_t alignment);

// Helpers every KernelCompiler uses for its error messages.
// The source with right-aligned line numbers ("  12 | ..."), one line each.
std::string numbered_source(std::string_view text);
// A compiler log without the trailing NULs, newlines and spaces compilers add.
std::string trim_log(std::string log);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Why this backend cannot run kernels here ("no NVIDIA driver: ..."), or
  // nullopt when it can. Code generation works either way.
  virtual std::optional<std::string> unavailable_reason() const = 0;
  // Empty when unavailable.
  virtual std::vector<DeviceInfo> enumerate_devices() const = 0;
  // Throws NotFound (bad index) or DeviceUnavailable.
  virtual std::shared_ptr<Device> create_device(int index) const = 0;
  virtual const LanguageTable& language() const = 0;
  // The language kernels for `target` are written in: language(), or a
  // variant using what the target offers (Vulkan: native f16 conversions,
  // TargetDesc::f16_conversion). Every kernel for a target is
  // rendered with this one.
  virtual const LanguageTable& language_for(const TargetDesc& target) const {
    (void)target;
    return language();
  }
  virtual const KernelCompiler& compiler() const = 0;
  // Targets code is generated for even without a device (NVRTC's sm_90,
  // hiprtc's gfx90a, ...); the compile tests build every kernel for each.
  virtual std::vector<TargetDesc> offline_targets() const = 0;
  // nullopt if the target can run the kernel, else the reason it cannot.
  virtual std::optional<std::string> supports(const KernelRequirements& kernel, const TargetDesc& target) const;

  // Compiled-model files (.kiln, src/artifact/model_file.h):
  // - the targets whose binaries a plan compiled for `target` carries, best
  //   first (default: `target` alone);
  virtual std::vector<TargetDesc> binary_targets(const TargetDesc& target) const;
  // - why a plan compiled for `planned` (an offline target, or another
  //   device), with binaries of these formats, cannot run on `device`
  //   (default: it can: a portable binary such as SPIR-V, checked by
  //   supports() and the device's limits);
  virtual std::optional<std::string> foreign_plan_refusal(const TargetDesc& planned, const TargetDesc& device,
                                                          const std::set<std::string>& formats) const;
  // - whether what follows ':' in a target spec (`kiln compile --target
  //   vulkan:NAME`) names a device, rather than a list of architectures.
  virtual bool target_spec_names_a_device() const { return false; }

  // The name `kiln dump --target` and kiln::kernel_sources give this
  // backend's kernel sources (default: the backend's name); empty when its
  // sources are another target's (cpu: the C99 of "c").
  virtual std::string source_target() const { return name(); }

  // What the device conformance kit (tests/test_backend_conformance.cpp)
  // expects of this backend.
  struct ConformanceExpectations {
    // Checks it is known to fail, by name, each with the reason: a listed
    // check that fails passes with the reason logged, and one that starts
    // passing fails, so that the list only shrinks.
    std::map<std::string, std::string, std::less<>> known_failures;
    // Bound on |device - interpreter| / max(1, |interpreter|) for math
    // functions (drivers may use approximations).
    float math_tolerance = 1e-5f;
  };
  virtual ConformanceExpectations conformance_expectations() const { return {}; }
};

}  // namespace kiln::backend

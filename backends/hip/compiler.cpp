#include "backends/hip/compiler.h"

#include "backends/cuda_style/rtc.h"
#include "backends/hip/hip_runtime_library.h"
#include "backends/hip/hiprtc_library.h"
#include "backends/hip/matrix_instructions.h"
#include "backends/hip/runtime.h"
#include "src/base/check.h"

#include <amd_comgr.h>

#include <dlfcn.h>

#include <algorithm>
#include <mutex>

namespace kiln::backend::hip {
namespace {

// hiprtc compiles through comgr, which it loads under this name.
constexpr const char* kComgrLibrary = "libamd_comgr.so.2";

std::string hiprtc_error(const HiprtcLibrary& hiprtc, int result) {
  return std::string(hiprtc.hiprtcGetErrorString(static_cast<hiprtcResult>(result))) + " (" +
         std::to_string(result) + ")";
}

hiprtcProgram program_of(void* program) { return static_cast<hiprtcProgram>(program); }

// hiprtc's calls for the shared compile (backends/cuda_style/rtc.h).
cuda_style::RtcCalls hiprtc_calls(const HiprtcLibrary& hiprtc) {
  cuda_style::RtcCalls calls;
  calls.library = "hiprtc";
  calls.backend = "hip";
  calls.language = "hip";  // backends/hip/language.cpp
  calls.file_extension = ".hip";
  calls.create_program = [&hiprtc](void** program, const char* source, const char* name) {
    hiprtcProgram raw = nullptr;
    const hiprtcResult result = hiprtc.hiprtcCreateProgram(&raw, source, name, 0, nullptr, nullptr);
    *program = raw;
    return static_cast<int>(result);
  };
  calls.destroy_program = [&hiprtc](void* program) {
    hiprtcProgram raw = program_of(program);
    hiprtc.hiprtcDestroyProgram(&raw);
  };
  calls.compile_program = [&hiprtc](void* program, int count, const char* const* options) {
    return static_cast<int>(hiprtc.hiprtcCompileProgram(program_of(program), count, const_cast<const char**>(options)));
  };
  calls.log_size = [&hiprtc](void* program, std::size_t* size) {
    return static_cast<int>(hiprtc.hiprtcGetProgramLogSize(program_of(program), size));
  };
  calls.log = [&hiprtc](void* program, char* log) {
    return static_cast<int>(hiprtc.hiprtcGetProgramLog(program_of(program), log));
  };
  calls.error_text = [&hiprtc](int result) { return hiprtc_error(hiprtc, result); };
  return calls;
}

// What the installed comgr reports: its version and the processors it knows.
struct ComgrInfo {
  std::string version;
  std::vector<std::string> processors;  // "gfx600" ... "gfx1036"
  std::string load_error;               // set when comgr could not be queried
};

ComgrInfo query_comgr() {
  ComgrInfo info;
  // Already loaded by hiprtc, or about to be: opening it again is cheap and
  // keeps kiln from linking a library ROCm treats as private.
  void* library = dlopen(kComgrLibrary, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = dlerror();
    info.load_error = reason ? reason : kComgrLibrary;
    return info;
  }
  auto get_version = reinterpret_cast<decltype(&amd_comgr_get_version)>(dlsym(library, "amd_comgr_get_version"));
  auto get_isa_count = reinterpret_cast<decltype(&amd_comgr_get_isa_count)>(dlsym(library, "amd_comgr_get_isa_count"));
  auto get_isa_name = reinterpret_cast<decltype(&amd_comgr_get_isa_name)>(dlsym(library, "amd_comgr_get_isa_name"));
  if (!get_version || !get_isa_count || !get_isa_name) {
    info.load_error = std::string(kComgrLibrary) + " lacks the ISA query functions";
    return info;
  }
  std::size_t major = 0, minor = 0, count = 0;
  get_version(&major, &minor);
  info.version = std::to_string(major) + "." + std::to_string(minor);
  if (get_isa_count(&count) != AMD_COMGR_STATUS_SUCCESS) {
    info.load_error = "amd_comgr_get_isa_count failed";
    return info;
  }
  for (std::size_t index = 0; index < count; ++index) {
    const char* isa = nullptr;  // "amdgcn-amd-amdhsa--gfx90a"
    if (get_isa_name(index, &isa) != AMD_COMGR_STATUS_SUCCESS || isa == nullptr) continue;
    std::string name(isa);
    const std::size_t processor = name.rfind("--");
    info.processors.push_back(processor == std::string::npos ? name : name.substr(processor + 2));
  }
  return info;
}

const ComgrInfo& comgr_info() {
  static const ComgrInfo info = query_comgr();
  return info;
}

std::string join(const std::vector<std::string>& names) {
  std::string list;
  for (const auto& name : names) list += (list.empty() ? "" : ", ") + name;
  return list;
}

void check_processor(const std::string& arch) {
  const ComgrInfo& comgr = comgr_info();
  KILN_CHECK(comgr.load_error.empty(), ErrorKind::Unsupported,
             "hiprtc cannot compile for " + arch + ": comgr is unusable (" + comgr.load_error + ")");
  const std::string processor = arch.substr(0, arch.find(':'));  // "gfx90a:xnack-" -> "gfx90a"
  KILN_CHECK(std::find(comgr.processors.begin(), comgr.processors.end(), processor) != comgr.processors.end(),
             ErrorKind::Unsupported,
             "hiprtc cannot compile for " + arch + ": the installed comgr " + comgr.version + " supports " +
                 join(comgr.processors));
}

// ROCm 5.2 does not document hiprtc as thread-safe (newer releases serialise
// inside it), and a crash in comgr takes the process down: one at a time.
std::mutex& hiprtc_mutex() {
  static std::mutex mutex;
  return mutex;
}

TargetDesc offline_target(const std::string& arch, const std::string& description, std::uint32_t wave_size,
                          std::uint64_t memory_bytes, const std::string& compiler_version) {
  TargetDesc target;
  target.backend = "hip";
  target.device_name = description;
  target.device_type = "offline";
  target.offline = true;
  target.discrete_gpu = true;  // the Instinct and Radeon GPUs its architectures name
  target.driver = compiler_version;
  target.api_version = arch;
  target.arch = arch;
  target.subgroup_size = wave_size;
  target.max_workgroup_size = {1024, 1024, 1024};
  target.max_workgroup_invocations = 1024;
  target.max_workgroup_count = {2147483647u, 65535, 65535};
  target.max_shared_memory_bytes = 64 * 1024;  // LDS per workgroup
  target.max_buffer_bytes = memory_bytes;
  target.device_memory_bytes = memory_bytes;
  target.min_buffer_offset_alignment = 256;
  target.fp16 = true;
  target.int64 = true;
  target.storage8 = true;
  target.storage16 = true;
  target.timestamps = true;
  target.matrix_shapes = matrix_shapes(arch);
  set_pointer_style_capabilities(target);
  return target;
}

}  // namespace

const std::vector<std::string>& supported_processors() { return comgr_info().processors; }

const HiprtcLibrary& HiprtcCompiler::library() const { return library_ != nullptr ? *library_ : hiprtc_library(); }

std::string HiprtcCompiler::version() const {
  const HiprtcLibrary& hiprtc = library();
  if (!hiprtc.loaded()) return "hiprtc (not loaded)";
  // hiprtc has no version of its own (hiprtcVersion reports an internal
  // 9.0); the HIP runtime's and comgr's versions are what change the code.
  // Without the runtime, the library's path tells installations apart.
  std::string version = "hiprtc ";
  const HipRuntimeLibrary& runtime = hip_runtime_library();
  if (runtime.loaded()) {
    int runtime_version = 0;
    const hipError_t result = runtime.hipRuntimeGetVersion(&runtime_version);
    KILN_CHECK(result == hipSuccess, ErrorKind::Internal,
               std::string("hipRuntimeGetVersion failed: ") + runtime.hipGetErrorName(result));
    version += version_text(runtime_version);
  } else {
    version += "(" + hiprtc.library.path + ")";
  }
  if (!comgr_info().version.empty()) version += " (comgr " + comgr_info().version + ")";
  return version;
}

std::optional<std::string> HiprtcCompiler::unavailable_reason() const {
  const HiprtcLibrary& hiprtc = library();
  if (hiprtc.loaded()) return std::nullopt;
  return hiprtc.failure;
}

KernelBinary HiprtcCompiler::compile(const KernelSource& source, const TargetDesc& target) const {
  const HiprtcLibrary& hiprtc = library();
  KILN_CHECK(hiprtc.loaded(), ErrorKind::Unsupported,
             "cannot compile HIP kernel '" + source.name + "' for " + target.arch + ": " + hiprtc.failure);
  check_processor(target.arch);

  std::lock_guard lock(hiprtc_mutex());
  const cuda_style::RtcCalls calls = hiprtc_calls(hiprtc);
  cuda_style::CompiledProgram compiled =
      cuda_style::compile_program(calls, source, target, {"--offload-arch=" + target.arch, "-std=c++17", "-O3"});
  const hiprtcProgram program = program_of(compiled.program.get());
  KernelBinary binary;
  binary.log = std::move(compiled.log);
  std::size_t size = 0;
  cuda_style::check_call(calls, hiprtc.hiprtcGetCodeSize(program, &size), "hiprtcGetCodeSize", source.name);
  KILN_CHECK(size > 0, ErrorKind::Internal, "hiprtc returned no code for kernel '" + source.name + "'");
  binary.data.resize(size);
  cuda_style::check_call(calls, hiprtc.hiprtcGetCode(program, reinterpret_cast<char*>(binary.data.data())),
                         "hiprtcGetCode", source.name);
  binary.format = binary_format(target);
  return binary;
}

std::vector<TargetDesc> offline_targets() {
  const std::string compiler_version = HiprtcCompiler().version();
  constexpr std::uint64_t GiB = 1ull << 30;
  return {
      offline_target("gfx90a", "AMD CDNA2 gfx90a, MI200 (offline)", 64, 64 * GiB, compiler_version),
      offline_target("gfx1030", "AMD RDNA2 gfx1030, RX 6800/6900 (offline)", 32, 16 * GiB, compiler_version),
  };
}

}  // namespace kiln::backend::hip

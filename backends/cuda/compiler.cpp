#include "backends/cuda/compiler.h"

#include "backends/cuda/matrix_instructions.h"
#include "backends/cuda/nvrtc_library.h"
#include "backends/cuda_style/rtc.h"
#include "src/base/check.h"

#include <algorithm>
#include <cstdlib>
#include <charconv>

namespace kiln::backend::cuda {
namespace {

std::string nvrtc_error(const NvrtcLibrary& nvrtc, int result) {
  return std::string(nvrtc.nvrtcGetErrorString(static_cast<nvrtcResult>(result))) + " (" + std::to_string(result) +
         ")";
}

nvrtcProgram program_of(void* program) { return static_cast<nvrtcProgram>(program); }

// The shared memory a block may have on compute capability `sm` with the
// opt-in (CUDA C Programming Guide, "Technical Specifications per Compute
// Capability"): the static 48 KiB before Volta.
std::uint64_t opt_in_shared_memory_bytes(int sm) {
  if (sm >= 90 && sm < 100) return 227 * 1024;   // Hopper
  if (sm == 80 || sm == 87) return 163 * 1024;   // A100, Orin
  if (sm == 70 || sm == 72) return 96 * 1024;    // Volta
  if (sm == 75) return 64 * 1024;                // Turing
  if (sm >= 86) return 99 * 1024;                // GA10x, Ada, and the newest (Blackwell's consumer parts)
  return 48 * 1024;
}

// NVRTC's calls for the shared compile (backends/cuda_style/rtc.h).
cuda_style::RtcCalls nvrtc_calls(const NvrtcLibrary& nvrtc) {
  cuda_style::RtcCalls calls;
  calls.library = "NVRTC";
  calls.backend = "cuda";
  calls.language = "cuda";  // backends/cuda/language.cpp
  calls.file_extension = ".cu";
  calls.create_program = [&nvrtc](void** program, const char* source, const char* name) {
    nvrtcProgram raw = nullptr;
    const nvrtcResult result = nvrtc.nvrtcCreateProgram(&raw, source, name, 0, nullptr, nullptr);
    *program = raw;
    return static_cast<int>(result);
  };
  calls.destroy_program = [&nvrtc](void* program) {
    nvrtcProgram raw = program_of(program);
    nvrtc.nvrtcDestroyProgram(&raw);
  };
  calls.compile_program = [&nvrtc](void* program, int count, const char* const* options) {
    return static_cast<int>(nvrtc.nvrtcCompileProgram(program_of(program), count, options));
  };
  calls.log_size = [&nvrtc](void* program, std::size_t* size) {
    return static_cast<int>(nvrtc.nvrtcGetProgramLogSize(program_of(program), size));
  };
  calls.log = [&nvrtc](void* program, char* log) {
    return static_cast<int>(nvrtc.nvrtcGetProgramLog(program_of(program), log));
  };
  calls.error_text = [&nvrtc](int result) { return nvrtc_error(nvrtc, result); };
  return calls;
}

std::string supported_arch_list(const NvrtcLibrary& nvrtc) {
  std::string list;
  for (int arch : nvrtc.supported_archs) list += (list.empty() ? "" : ", ") + std::to_string(arch);
  return list;
}

struct ArchSpec {
  bool ptx = false;  // compute_<cc>: virtual arch, PTX; sm_<cc>: real arch, CUBIN
  int capability = 0;
};

ArchSpec parse_arch(const NvrtcLibrary& nvrtc, const std::string& arch) {
  ArchSpec spec;
  std::string_view digits;
  if (arch.starts_with("compute_")) {
    spec.ptx = true;
    digits = std::string_view(arch).substr(8);
  } else if (arch.starts_with("sm_")) {
    digits = std::string_view(arch).substr(3);
  }
  auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), spec.capability);
  KILN_CHECK(!digits.empty() && error == std::errc() && end == digits.data() + digits.size(), ErrorKind::Unsupported,
             "CUDA target arch '" + arch + "' is neither compute_<cc> (PTX) nor sm_<cc> (CUBIN)");
  const auto& archs = nvrtc.supported_archs;
  KILN_CHECK(std::find(archs.begin(), archs.end(), spec.capability) != archs.end(), ErrorKind::Unsupported,
             "NVRTC cannot compile for " + arch + ": it supports compute capabilities " + supported_arch_list(nvrtc));
  return spec;
}

std::vector<std::byte> program_code(const cuda_style::RtcCalls& calls, const NvrtcLibrary& nvrtc,
                                    nvrtcProgram program, bool ptx, const std::string& kernel) {
  std::size_t size = 0;
  std::vector<std::byte> code;
  auto check = [&](nvrtcResult result, const char* call) {
    cuda_style::check_call(calls, static_cast<int>(result), call, kernel);
  };
  if (ptx) {
    check(nvrtc.nvrtcGetPTXSize(program, &size), "nvrtcGetPTXSize");
    code.resize(size);
    check(nvrtc.nvrtcGetPTX(program, reinterpret_cast<char*>(code.data())), "nvrtcGetPTX");
  } else {
    check(nvrtc.nvrtcGetCUBINSize(program, &size), "nvrtcGetCUBINSize");
    code.resize(size);
    check(nvrtc.nvrtcGetCUBIN(program, reinterpret_cast<char*>(code.data())), "nvrtcGetCUBIN");
  }
  KILN_CHECK(!code.empty(), ErrorKind::Internal, "NVRTC returned no code for kernel '" + kernel + "'");
  return code;
}

TargetDesc offline_target(const std::string& arch, const std::string& description, std::uint64_t memory_bytes,
                          const std::string& compiler_version, const std::string& cuda_version) {
  TargetDesc target;
  target.backend = "cuda";
  target.device_name = description;
  target.device_type = "offline";
  target.offline = true;
  target.discrete_gpu = true;  // the data-centre and desktop GPUs its architectures name
  target.driver = compiler_version;
  target.api_version = cuda_version;
  target.arch = arch;
  target.subgroup_size = 32;
  target.max_workgroup_size = {1024, 1024, 64};
  target.max_workgroup_invocations = 1024;
  target.max_workgroup_count = {2147483647u, 65535, 65535};
  target.max_shared_memory_bytes = 48 * 1024;  // static __shared__ limit on every arch; more below
  target.max_buffer_bytes = memory_bytes;
  target.device_memory_bytes = memory_bytes;
  target.min_buffer_offset_alignment = 256;  // cudaMalloc's alignment
  target.fp16 = true;
  // TF32 tensor cores since sm_80 (arch: sm_<cc> or compute_<cc>).
  const std::size_t digits = arch.find_last_of('_');
  const int sm = digits != std::string::npos ? std::atoi(arch.c_str() + digits + 1) : 0;
  target.tf32 = sm >= 80;
  // A CUBIN runs on its architecture only; PTX is compiled again for any
  // newer one, whose opt-in may be smaller: it keeps the static limit.
  if (arch.rfind("sm_", 0) == 0) target.max_shared_memory_bytes = opt_in_shared_memory_bytes(sm);
  target.matrix_shapes = matrix_shapes(sm);
  target.int64 = true;
  target.storage8 = true;
  target.storage16 = true;
  target.timestamps = true;
  set_pointer_style_capabilities(target);
  return target;
}

}  // namespace

const NvrtcLibrary& NvrtcCompiler::library() const { return library_ != nullptr ? *library_ : nvrtc_library(); }

std::string NvrtcCompiler::version() const {
  const NvrtcLibrary& nvrtc = library();
  if (!nvrtc.loaded()) return "NVRTC (not loaded)";
  return "NVRTC " + std::to_string(nvrtc.major) + "." + std::to_string(nvrtc.minor);
}

std::string NvrtcCompiler::binary_format(const TargetDesc& target) const {
  return target.arch.starts_with("compute_") ? "ptx" : "cubin";
}

std::optional<std::string> NvrtcCompiler::unavailable_reason() const {
  const NvrtcLibrary& nvrtc = library();
  if (nvrtc.loaded()) return std::nullopt;
  return nvrtc.failure;
}

KernelBinary NvrtcCompiler::compile(const KernelSource& source, const TargetDesc& target) const {
  const NvrtcLibrary& nvrtc = library();
  KILN_CHECK(nvrtc.loaded(), ErrorKind::Unsupported,
             "cannot compile CUDA kernel '" + source.name + "' for " + target.arch + ": " + nvrtc.failure);
  const ArchSpec arch = parse_arch(nvrtc, target.arch);
  std::vector<std::string> options{"--gpu-architecture=" + target.arch, "-std=c++17", "-default-device"};
  if (!nvrtc.include_dir.empty()) options.push_back("-I" + nvrtc.include_dir);
  const cuda_style::RtcCalls calls = nvrtc_calls(nvrtc);
  cuda_style::CompiledProgram compiled = cuda_style::compile_program(calls, source, target, options);
  KernelBinary binary;
  binary.log = std::move(compiled.log);
  binary.format = binary_format(target);
  binary.data = program_code(calls, nvrtc, program_of(compiled.program.get()), arch.ptx, source.name);
  return binary;
}

std::vector<TargetDesc> offline_targets() {
  const NvrtcLibrary& nvrtc = nvrtc_library();
  const std::string compiler_version = NvrtcCompiler().version();
  const std::string cuda_version =
      nvrtc.loaded() ? "CUDA " + std::to_string(nvrtc.major) + "." + std::to_string(nvrtc.minor) : "CUDA";
  constexpr std::uint64_t GiB = 1ull << 30;
  // Memory is that of the arch's smallest data-centre part (A100 40 GB, H100 80 GB).
  return {
      offline_target("compute_80", "PTX for compute capability 8.0+ (offline)", 40 * GiB, compiler_version,
                     cuda_version),
      offline_target("sm_90", "CUBIN for sm_90, Hopper (offline)", 80 * GiB, compiler_version, cuda_version),
  };
}

}  // namespace kiln::backend::cuda

#include "backends/cuda/compiler.h"

#include "backends/cuda/nvrtc_library.h"

#include <algorithm>
#include <cstdlib>
#include <charconv>
#include <memory>

namespace kiln::backend::cuda {
namespace {

// The renderer's language name for CUDA C++ (backends/cuda/language.cpp).
constexpr std::string_view kLanguage = "cuda";

std::string nvrtc_error(const NvrtcLibrary& nvrtc, nvrtcResult result) {
  return std::string(nvrtc.nvrtcGetErrorString(result)) + " (" + std::to_string(static_cast<int>(result)) + ")";
}

// NVRTC failing outside compilation proper (out of memory, bad option) is a
// kiln bug or a broken toolkit, never a user error.
void check_nvrtc(const NvrtcLibrary& nvrtc, nvrtcResult result, const char* call, const std::string& kernel) {
  if (result != NVRTC_SUCCESS)
    throw_error(ErrorKind::Internal,
                std::string(call) + " failed for kernel '" + kernel + "': " + nvrtc_error(nvrtc, result));
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

struct ProgramDeleter {
  const NvrtcLibrary* nvrtc;
  void operator()(nvrtcProgram program) const { nvrtc->nvrtcDestroyProgram(&program); }
};
using Program = std::unique_ptr<std::remove_pointer_t<nvrtcProgram>, ProgramDeleter>;

std::string program_log(const NvrtcLibrary& nvrtc, nvrtcProgram program, const std::string& kernel) {
  std::size_t size = 0;
  check_nvrtc(nvrtc, nvrtc.nvrtcGetProgramLogSize(program, &size), "nvrtcGetProgramLogSize", kernel);
  std::string log(size, '\0');
  if (size > 0) check_nvrtc(nvrtc, nvrtc.nvrtcGetProgramLog(program, log.data()), "nvrtcGetProgramLog", kernel);
  return trim_log(std::move(log));
}

std::vector<std::byte> program_code(const NvrtcLibrary& nvrtc, nvrtcProgram program, bool ptx,
                                    const std::string& kernel) {
  std::size_t size = 0;
  std::vector<std::byte> code;
  if (ptx) {
    check_nvrtc(nvrtc, nvrtc.nvrtcGetPTXSize(program, &size), "nvrtcGetPTXSize", kernel);
    code.resize(size);
    check_nvrtc(nvrtc, nvrtc.nvrtcGetPTX(program, reinterpret_cast<char*>(code.data())), "nvrtcGetPTX", kernel);
  } else {
    check_nvrtc(nvrtc, nvrtc.nvrtcGetCUBINSize(program, &size), "nvrtcGetCUBINSize", kernel);
    code.resize(size);
    check_nvrtc(nvrtc, nvrtc.nvrtcGetCUBIN(program, reinterpret_cast<char*>(code.data())), "nvrtcGetCUBIN", kernel);
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
  target.driver = compiler_version;
  target.api_version = cuda_version;
  target.arch = arch;
  target.subgroup_size = 32;
  target.max_workgroup_size = {1024, 1024, 64};
  target.max_workgroup_invocations = 1024;
  target.max_workgroup_count = {2147483647u, 65535, 65535};
  target.max_shared_memory_bytes = 48 * 1024;  // static __shared__ limit on every arch
  target.max_buffer_bytes = memory_bytes;
  target.device_memory_bytes = memory_bytes;
  target.min_buffer_offset_alignment = 256;  // cudaMalloc's alignment
  target.fp16 = true;
  // TF32 tensor cores since sm_80 (arch: sm_<cc> or compute_<cc>).
  const std::size_t digits = arch.find_last_of('_');
  target.tf32 = digits != std::string::npos && std::atoi(arch.c_str() + digits + 1) >= 80;
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

std::optional<std::string> NvrtcCompiler::unavailable_reason() const {
  const NvrtcLibrary& nvrtc = library();
  if (nvrtc.loaded()) return std::nullopt;
  return nvrtc.failure;
}

KernelBinary NvrtcCompiler::compile(const KernelSource& source, const TargetDesc& target) const {
  KILN_CHECK(source.language == kLanguage, ErrorKind::Internal,
             "the CUDA compiler got kernel '" + source.name + "' in language '" + source.language + "'");
  KILN_CHECK(target.backend == "cuda", ErrorKind::Internal,
             "the CUDA compiler got a target of backend '" + target.backend + "' (" + target.arch + ")");
  const NvrtcLibrary& nvrtc = library();
  KILN_CHECK(nvrtc.loaded(), ErrorKind::Unsupported,
             "cannot compile CUDA kernel '" + source.name + "' for " + target.arch + ": " + nvrtc.failure);
  const ArchSpec arch = parse_arch(nvrtc, target.arch);

  nvrtcProgram raw = nullptr;
  const std::string file_name = source.name + ".cu";
  check_nvrtc(nvrtc, nvrtc.nvrtcCreateProgram(&raw, source.text.c_str(), file_name.c_str(), 0, nullptr, nullptr),
              "nvrtcCreateProgram", source.name);
  Program program(raw, ProgramDeleter{&nvrtc});

  std::vector<std::string> options{"--gpu-architecture=" + target.arch, "-std=c++17", "-default-device"};
  if (!nvrtc.include_dir.empty()) options.push_back("-I" + nvrtc.include_dir);
  std::vector<const char*> option_pointers;
  for (const auto& option : options) option_pointers.push_back(option.c_str());

  const nvrtcResult result =
      nvrtc.nvrtcCompileProgram(program.get(), static_cast<int>(option_pointers.size()), option_pointers.data());
  KernelBinary binary;
  binary.log = program_log(nvrtc, program.get(), source.name);
  if (result != NVRTC_SUCCESS) {
    throw_error(ErrorKind::Internal, "NVRTC could not compile kernel '" + source.name + "' for " + target.arch +
                                         " (" + nvrtc_error(nvrtc, result) + "); this is a kiln bug.\n" + binary.log +
                                         "\n--- source ---\n" + numbered_source(source.text));
  }
  binary.format = arch.ptx ? "ptx" : "cubin";
  binary.data = program_code(nvrtc, program.get(), arch.ptx, source.name);
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

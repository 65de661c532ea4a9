#include "backends/cuda/nvrtc_library.h"

#include <cstdlib>
#include <filesystem>

// Set by backends/cuda/meson.build to the include folder of the toolkit meson found.
#ifndef KILN_CUDA_INCLUDE_DIR
#define KILN_CUDA_INCLUDE_DIR ""
#endif

namespace kiln::backend::cuda {
namespace {

constexpr const char* kFunctionNames[] = {KILN_NVRTC_FUNCTIONS(KILN_VENDOR_FUNCTION_NAME)};

// NVRTC's headers must match the NVRTC that compiles, so the toolkit the
// library was found in comes first ("<toolkit>/lib64/libnvrtc.so.13" ->
// "<toolkit>/include"), then the one kiln was built with, then $CUDA_HOME and
// $CUDA_PATH for a toolkit whose library lives elsewhere.
std::string find_include_dir(const std::string& library_path) {
  std::vector<std::filesystem::path> candidates;
  if (!library_path.empty())
    candidates.push_back(std::filesystem::path(library_path).parent_path().parent_path() / "include");
  candidates.emplace_back(KILN_CUDA_INCLUDE_DIR);
  for (const char* variable : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* root = std::getenv(variable); root && *root)
      candidates.push_back(std::filesystem::path(root) / "include");
  for (const auto& candidate : candidates) {
    std::error_code error;
    if (!candidate.empty() && std::filesystem::exists(candidate / "cuda_fp16.h", error)) return candidate.string();
  }
  return {};
}

std::string result_text(const NvrtcLibrary& nvrtc, nvrtcResult result) {
  return std::string(nvrtc.nvrtcGetErrorString(result)) + " (" + std::to_string(static_cast<int>(result)) + ")";
}

}  // namespace

NvrtcLibrary open_nvrtc(std::span<const std::string_view> sonames) {
  NvrtcLibrary nvrtc;
  nvrtc.library = open_vendor_library(sonames, kFunctionNames);
  if (nvrtc.library.handle == nullptr) {
    nvrtc.failure = "cannot load NVRTC: " + nvrtc.library.failure;
    return nvrtc;
  }
#define KILN_NVRTC_RESOLVE(name) nvrtc.name = reinterpret_cast<decltype(nvrtc.name)>(nvrtc.library.symbol(#name));
  KILN_NVRTC_FUNCTIONS(KILN_NVRTC_RESOLVE)
#undef KILN_NVRTC_RESOLVE

  const std::string origin = nvrtc.library.soname + " (" + nvrtc.library.path + ")";
  if (nvrtcResult result = nvrtc.nvrtcVersion(&nvrtc.major, &nvrtc.minor); result != NVRTC_SUCCESS) {
    nvrtc.failure = "NVRTC unusable: nvrtcVersion of " + origin + " failed: " + result_text(nvrtc, result);
    return nvrtc;
  }
  int count = 0;
  nvrtcResult result = nvrtc.nvrtcGetNumSupportedArchs(&count);
  if (result == NVRTC_SUCCESS && count > 0) {
    nvrtc.supported_archs.resize(static_cast<std::size_t>(count));
    result = nvrtc.nvrtcGetSupportedArchs(nvrtc.supported_archs.data());
  }
  if (result != NVRTC_SUCCESS) {
    nvrtc.failure = "NVRTC unusable: " + origin + " cannot list its architectures: " + result_text(nvrtc, result);
    return nvrtc;
  }
  nvrtc.include_dir = find_include_dir(nvrtc.library.path);
  return nvrtc;
}

const NvrtcLibrary& nvrtc_library() {
  static const NvrtcLibrary nvrtc = open_nvrtc();
  return nvrtc;
}

}  // namespace kiln::backend::cuda

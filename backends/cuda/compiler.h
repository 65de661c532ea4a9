// NVRTC code generation: CUDA C++ source -> PTX or CUBIN, without a GPU.
#pragma once

#include "backends/backend.h"
#include "backends/cuda_style/rtc.h"

#include <optional>
#include <string>
#include <vector>

namespace kiln::backend::cuda {

struct NvrtcLibrary;

// Compiles for TargetDesc::arch "compute_<cc>" (format "ptx", NUL-terminated
// text as cuModuleLoadData takes it) or "sm_<cc>" (format "cubin", an ELF).
// Thread-safe: every compile uses its own NVRTC program.
class NvrtcCompiler final : public cuda_style::RuntimeCompiler {
 public:
  // Uses the process's NVRTC (nvrtc_library()), opened at the first call that needs it.
  NvrtcCompiler() = default;
  // Uses `library` (which must outlive the compiler): tests give one that failed to open.
  explicit NvrtcCompiler(const NvrtcLibrary& library) : library_(&library) {}

  // "NVRTC <major>.<minor>" of the loaded library; "NVRTC (not loaded)"
  // when it cannot be loaded (unavailable_reason() says why).
  std::string version() const override;
  // "ptx" for compute_<cc>, "cubin" for sm_<cc>.
  std::string binary_format(const TargetDesc& target) const override;
  // Why this compiler cannot compile ("cannot load NVRTC: ..."); nullopt when it can.
  std::optional<std::string> unavailable_reason() const override;
  // Throws Unsupported naming the library when NVRTC cannot be loaded, and
  // for an arch NVRTC cannot target; Internal (with the NVRTC log and the
  // numbered source) when the source does not compile.
  KernelBinary compile(const KernelSource& source, const TargetDesc& target) const override;

 private:
  const NvrtcLibrary& library() const;
  const NvrtcLibrary* library_ = nullptr;  // null: the process's
};

// The targets code is generated for without a device: PTX for compute_80
// (runs on any GPU of compute capability 8.0 or newer) and CUBIN for sm_90.
// Listed whether or not NVRTC loads (sources can be rendered for them
// without it); compiling for them needs it.
std::vector<TargetDesc> offline_targets();

}  // namespace kiln::backend::cuda

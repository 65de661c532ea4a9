// NVRTC code generation: CUDA C++ source -> PTX or CUBIN, without a GPU.
#pragma once

#include "backends/backend.h"

#include <string>
#include <vector>

namespace kiln::backend::cuda {

// Compiles for TargetDesc::arch "compute_<cc>" (format "ptx", NUL-terminated
// text as cuModuleLoadData takes it) or "sm_<cc>" (format "cubin", an ELF).
// Thread-safe: every compile uses its own NVRTC program.
class NvrtcCompiler final : public KernelCompiler {
 public:
  // "NVRTC <major>.<minor>", the version of the linked library.
  std::string version() const override;
  // Throws Unsupported for an arch NVRTC cannot target, Internal (with the
  // NVRTC log and the numbered source) when the source does not compile.
  KernelBinary compile(const KernelSource& source, const TargetDesc& target) const override;
};

// The targets code is generated for without a device: PTX for compute_80
// (runs on any GPU of compute capability 8.0 or newer) and CUBIN for sm_90.
std::vector<TargetDesc> offline_targets();

}  // namespace kiln::backend::cuda

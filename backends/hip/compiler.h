// hiprtc code generation: HIP C++ source -> an AMDGPU code object, without a GPU.
#pragma once

#include "backends/backend.h"

#include <string>
#include <vector>

namespace kiln::backend::hip {

// Compiles for TargetDesc::arch "gfx<n>" (optionally with ":feature" suffixes)
// to format "hsaco" (an AMDGPU ELF code object). Thread-safe.
class HiprtcCompiler final : public KernelCompiler {
 public:
  // "hiprtc 5.2.21153 (comgr 2.4)": the linked HIP runtime and comgr versions.
  std::string version() const override;
  // Throws Unsupported, naming the supported list, for a processor the
  // installed comgr does not know (asking hiprtc anyway crashes inside comgr);
  // Internal (with the hiprtc log and the numbered source) when the source
  // does not compile.
  KernelBinary compile(const KernelSource& source, const TargetDesc& target) const override;
};

// The processors ("gfx90a", ...) the installed comgr can compile for.
const std::vector<std::string>& supported_processors();

// The targets code is generated for without a device: gfx90a (CDNA2, MI200,
// wave64) and gfx1030 (RDNA2, wave32).
std::vector<TargetDesc> offline_targets();

}  // namespace kiln::backend::hip

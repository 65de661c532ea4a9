// hiprtc code generation: HIP C++ source -> an AMDGPU code object, without a GPU.
#pragma once

#include "backends/backend.h"
#include "backends/cuda_style/rtc.h"

#include <optional>
#include <string>
#include <vector>

namespace kiln::backend::hip {

struct HiprtcLibrary;

// Compiles for TargetDesc::arch "gfx<n>" (optionally with ":feature" suffixes)
// to format "hsaco" (an AMDGPU ELF code object). Thread-safe.
class HiprtcCompiler final : public cuda_style::RuntimeCompiler {
 public:
  // Uses the process's hiprtc (hiprtc_library()), opened at the first call that needs it.
  HiprtcCompiler() = default;
  // Uses `library` (which must outlive the compiler): tests give one that failed to open.
  explicit HiprtcCompiler(const HiprtcLibrary& library) : library_(&library) {}

  // "hiprtc 5.2.21153 (comgr 2.4)": the loaded HIP runtime's and comgr's
  // versions; "hiprtc (not loaded)" when hiprtc cannot be loaded
  // (unavailable_reason() says why).
  std::string version() const override;
  // An AMDGPU code object.
  std::string binary_format(const TargetDesc&) const override { return "hsaco"; }
  // Why this compiler cannot compile ("cannot load hiprtc: ..."); nullopt when it can.
  std::optional<std::string> unavailable_reason() const override;
  // Throws Unsupported naming the library when hiprtc cannot be loaded;
  // Unsupported, naming the supported list, for a processor the installed
  // comgr does not know (asking hiprtc anyway crashes inside comgr); Internal
  // (with the hiprtc log and the numbered source) when the source does not
  // compile.
  KernelBinary compile(const KernelSource& source, const TargetDesc& target) const override;

 private:
  const HiprtcLibrary& library() const;
  const HiprtcLibrary* library_ = nullptr;  // null: the process's
};

// The processors ("gfx90a", ...) the installed comgr can compile for.
const std::vector<std::string>& supported_processors();

// The targets code is generated for without a device: gfx90a (CDNA2, MI200,
// wave64) and gfx1030 (RDNA2, wave32). Listed whether or not hiprtc loads
// (sources can be rendered for them without it); compiling needs it.
std::vector<TargetDesc> offline_targets();

}  // namespace kiln::backend::hip

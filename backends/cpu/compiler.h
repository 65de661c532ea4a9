// The cpu backend's compiler: the system C compiler (`cc` on PATH) builds
// each kernel, with entry points appended, into a shared object whose bytes
// are the binary (format "elf-so"), cached by the core like any other.
//
// Entry points every binary exports (C linkage), for device.cpp:
//   void kiln_cpu_run_groups(void* const* buffers, const int32_t* params,
//                            uint32_t first, uint32_t end, kiln_uvec3 groups)
//     every invocation of workgroups [first, end), one after another
//     (kernels without barriers);
//   void kiln_cpu_invoke(void* const* buffers, const int32_t* params,
//                        kiln_uvec3 global_id, kiln_uvec3 groups)
//     one invocation (kernels with barriers, run as fibres);
//   void kiln_cpu_set_barrier(void (*fn)(void*), void* context)
//     what a barrier calls, for the calling thread.
#pragma once

#include "backends/backend.h"

#include <optional>
#include <string>

namespace kiln::backend::cpu {

class CCompiler final : public KernelCompiler {
 public:
  // "cc: gcc (Debian 12.2.0-14) 12.2.0" (the compiler's first --version line).
  std::string version() const override;
  // A shared object the host's loader takes.
  std::string binary_format(const TargetDesc&) const override { return "elf-so"; }
  KernelBinary compile(const KernelSource& source, const TargetDesc& target) const override;
  // Why there is no usable C compiler, or nullopt (probed once).
  std::optional<std::string> unavailable_reason() const;
};

// The text compile() builds: the kernel's source and its entry points.
std::string with_entry_points(const KernelSource& source);

}  // namespace kiln::backend::cpu

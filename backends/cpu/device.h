// The cpu backend's device: buffers in host memory, kernels loaded from the
// shared objects the C compiler built (dlopen of an in-memory file), command
// lists recorded as a list of steps and run in order by the workers.
#pragma once

#include "backends/backend.h"

#include <memory>

namespace kiln::backend::cpu {

// The host as a device: its limits, and `threads` workers.
TargetDesc host_target(const std::string& compiler_version, unsigned threads);
std::shared_ptr<Device> create_host_device(const TargetDesc& target, unsigned threads);

}  // namespace kiln::backend::cpu

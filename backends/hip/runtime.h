// Probing the HIP runtime (libamdhip64.so.5, opened at run time:
// hip_runtime_library.h) for AMD GPUs, so that a missing runtime or GPU
// becomes a reason, not a failure to start.
#pragma once

#include "backends/backend.h"

#include <optional>
#include <string>
#include <vector>

namespace kiln::backend::hip {

struct RuntimeProbe {
  // Why no AMD GPU can run kernels here; nullopt when at least one can.
  std::optional<std::string> unavailable_reason;
  // One entry per device the runtime reports, limits read from the device.
  std::vector<TargetDesc> devices;
};

// Loads and initialises the runtime once per process and reads every device's
// limits; never throws (every failure becomes unavailable_reason). Thread-safe.
const RuntimeProbe& probe_runtime();

// HIP's packed version number as text: 50221153 -> "5.2.21153".
std::string version_text(int hip_version);

}  // namespace kiln::backend::hip

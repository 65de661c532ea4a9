// Probing the HIP runtime (libamdhip64.so.5, opened at run time:
// hip_runtime_library.h) for AMD GPUs, so that a missing runtime or GPU
// becomes a reason, not a failure to start.
#pragma once

#include "backends/backend.h"
#include "backends/cuda_style/backend.h"

#include <optional>
#include <string>
#include <vector>

namespace kiln::backend::hip {

// Loads and initialises the runtime once per process and reads every device's
// limits; never throws (every failure becomes unavailable_reason). Thread-safe.
const cuda_style::RuntimeProbe& probe_runtime();

// HIP's packed version number as text: 50221153 -> "5.2.21153".
std::string version_text(int hip_version);

}  // namespace kiln::backend::hip

// Probing the CUDA driver (libcuda.so.1). The driver is loaded with dlopen at
// run time, never linked, so kiln starts on machines without one and reports
// why CUDA cannot run instead of failing to load.
#pragma once

#include "backends/backend.h"
#include "backends/cuda_style/backend.h"

#include <optional>
#include <string>
#include <vector>

namespace kiln::backend::cuda {

// Loads and initialises the driver once per process and reads every device's
// limits; never throws (every failure becomes unavailable_reason). Thread-safe.
const cuda_style::RuntimeProbe& probe_driver();

// "CUDA_ERROR_OUT_OF_MEMORY (2)": a driver result code as the driver names it.
std::string result_name(int result);

}  // namespace kiln::backend::cuda

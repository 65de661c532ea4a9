// The HIP runtime API as the CUDA-style runtime's vendor table
// (backends/cuda_style/vendor_table.h).
#pragma once

#include "backends/cuda_style/vendor_table.h"

namespace kiln::backend::hip {

// Valid once the runtime has loaded (probe_runtime() found a device).
const cuda_style::VendorTable& device_table();

}  // namespace kiln::backend::hip

// The CUDA driver API as the CUDA-style runtime's vendor table
// (backends/cuda_style/vendor_table.h).
#pragma once

#include "backends/cuda_style/vendor_table.h"

namespace kiln::backend::cuda {

// Valid once the driver has loaded (probe_driver() found a device).
const cuda_style::VendorTable& device_table();

}  // namespace kiln::backend::cuda

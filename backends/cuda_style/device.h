// The runtime of the CUDA-style backends (CUDA, HIP), written once over a
// vendor table (vendor_table.h):
// - buffers are device allocations; uploads and downloads go through a
//   page-locked staging buffer with async copies on a stream of the device;
// - kernels are modules loaded from the compiler's binary;
// - a command list records launches and copies; its first submit enqueues
//   them on a stream, and a list submitted again (reduce-overhead's recorded
//   segments) is captured once into a graph that every later submit replays;
// - each submit is timed with events and waits for its work;
// - out-of-memory and launch failures are kiln::Errors naming the size or
//   the kernel.
#pragma once

#include "backends/backend.h"
#include "backends/cuda_style/vendor_table.h"

#include <memory>

namespace kiln::backend::cuda_style {

// A device of `vendor` (a table that lives for the process) with the limits
// in `target`. Throws DeviceUnavailable when its context cannot be made.
std::shared_ptr<Device> create_device(const VendorTable& vendor, int ordinal, TargetDesc target);

}  // namespace kiln::backend::cuda_style

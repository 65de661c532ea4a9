// The vendor table: everything the CUDA-style runtime (device.h) asks of a
// GPU vendor's API, as plain functions over opaque handles. CUDA fills it
// from the driver API (backends/cuda/device_table.cpp), HIP from the HIP
// runtime (backends/hip/device_table.cpp); the runtime itself is written once.
//
// Every function returns 0 on success, else the vendor's own error code,
// which error_name() spells ("CUDA_ERROR_OUT_OF_MEMORY (2)").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::backend::cuda_style {

using DevicePtr = std::uint64_t;  // a device address (CUdeviceptr, hipDeviceptr_t)
using Handle = void*;             // a context, stream, event, module, function, graph or graph instance
using Status = int;

struct VendorTable {
  const char* backend;  // "cuda", "hip": the prefix of every error message
  const char* api;      // "the CUDA driver", "the HIP runtime"

  std::string (*error_name)(Status status);
  // The code meaning "out of memory" (CUDA_ERROR_OUT_OF_MEMORY, hipErrorOutOfMemory).
  Status out_of_memory;
  // The codes after which the context is unusable ("sticky": a kernel that
  // faulted or timed out, an uncorrectable ECC error): the device is lost
  // for kiln (DeviceUnavailable) until its models are made again.
  std::vector<Status> device_lost;

  // Makes the device's context current on the calling thread; open returns
  // the context (CUDA: the primary context; HIP: none, the ordinal is used).
  Status (*open_device)(int ordinal, Handle* context);
  Status (*bind)(int ordinal, Handle context);
  Status (*close_device)(int ordinal, Handle context);
  Status (*memory_info)(std::size_t* free_bytes, std::size_t* total_bytes);

  Status (*allocate)(DevicePtr* pointer, std::size_t bytes);
  Status (*release)(DevicePtr pointer);
  // Page-locked host memory, for copies the GPU's engines run on their own.
  Status (*allocate_host)(void** pointer, std::size_t bytes);
  Status (*release_host)(void* pointer);

  Status (*create_stream)(Handle* stream);  // a stream that does not wait on the legacy default one
  Status (*destroy_stream)(Handle stream);
  Status (*synchronize_stream)(Handle stream);
  Status (*copy_to_device)(DevicePtr dst, const void* src, std::size_t bytes, Handle stream);
  Status (*copy_to_host)(void* dst, DevicePtr src, std::size_t bytes, Handle stream);
  Status (*copy_on_device)(DevicePtr dst, DevicePtr src, std::size_t bytes, Handle stream);

  Status (*create_event)(Handle* event);  // with timing
  Status (*destroy_event)(Handle event);
  Status (*record_event)(Handle event, Handle stream);
  Status (*elapsed_ms)(float* ms, Handle start, Handle end);

  // `image` is a CUBIN/PTX (CUDA) or code object (HIP) as the compiler made it.
  Status (*load_module)(Handle* module, const void* image);
  Status (*unload_module)(Handle module);
  Status (*get_function)(Handle* function, Handle module, const char* name);
  // Lets `function` take `bytes` of dynamic shared memory beyond the
  // default limit (CUDA's 48 KiB opt-in).
  Status (*allow_dynamic_shared)(Handle function, unsigned bytes);
  // `args` points at each kernel argument's value, in order; `shared_bytes`
  // of dynamic shared memory per block.
  Status (*launch)(Handle function, const unsigned grid[3], unsigned block_x, unsigned shared_bytes, Handle stream,
                   void** args);

  // Stream capture into a graph (thread-local mode: other threads may go on
  // allocating while one captures), and replay of the instantiated graph.
  Status (*begin_capture)(Handle stream);
  Status (*end_capture)(Handle stream, Handle* graph);
  Status (*instantiate_graph)(Handle* instance, Handle graph);
  Status (*launch_graph)(Handle instance, Handle stream);
  Status (*destroy_graph)(Handle graph);
  Status (*destroy_graph_instance)(Handle instance);
};

}  // namespace kiln::backend::cuda_style

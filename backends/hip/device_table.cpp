#include "backends/hip/device_table.h"

#include "backends/hip/hip_runtime_library.h"

namespace kiln::backend::hip {
namespace {

using cuda_style::DevicePtr;
using cuda_style::Handle;
using cuda_style::Status;

const HipRuntimeLibrary& r() { return hip_runtime_library(); }
Status status(hipError_t result) { return static_cast<Status>(result); }
hipDeviceptr_t address(DevicePtr pointer) { return reinterpret_cast<hipDeviceptr_t>(pointer); }

template <typename T>
T as(Handle handle) {
  return static_cast<T>(handle);
}

cuda_style::VendorTable make_table() {
  cuda_style::VendorTable t{};
  t.backend = "hip";
  t.api = "the HIP runtime";
  t.error_name = [](Status s) {
    const char* name = r().loaded() ? r().hipGetErrorName(static_cast<hipError_t>(s)) : nullptr;
    return std::string(name ? name : "hipError") + " (" + std::to_string(s) + ")";
  };
  t.out_of_memory = hipErrorOutOfMemory;
  t.device_lost = {hipErrorIllegalAddress, hipErrorLaunchTimeOut, hipErrorLaunchFailure, hipErrorECCNotCorrectable};

  // HIP keeps a current device per thread rather than a context.
  t.open_device = [](int ordinal, Handle* context) {
    *context = nullptr;
    return status(r().hipSetDevice(ordinal));
  };
  t.bind = [](int ordinal, Handle) { return status(r().hipSetDevice(ordinal)); };
  t.close_device = [](int, Handle) { return Status{0}; };
  t.memory_info = [](std::size_t* free_bytes, std::size_t* total_bytes) {
    return status(r().hipMemGetInfo(free_bytes, total_bytes));
  };

  t.allocate = [](DevicePtr* pointer, std::size_t bytes) {
    void* p = nullptr;
    const hipError_t e = r().hipMalloc(&p, bytes);
    *pointer = reinterpret_cast<DevicePtr>(p);
    return status(e);
  };
  t.release = [](DevicePtr pointer) { return status(r().hipFree(address(pointer))); };
  t.allocate_host = [](void** pointer, std::size_t bytes) {
    return status(r().hipHostMalloc(pointer, bytes, hipHostMallocDefault));
  };
  t.release_host = [](void* pointer) { return status(r().hipHostFree(pointer)); };

  t.create_stream = [](Handle* stream) {
    hipStream_t s = nullptr;
    const hipError_t e = r().hipStreamCreateWithFlags(&s, hipStreamNonBlocking);
    *stream = s;
    return status(e);
  };
  t.destroy_stream = [](Handle stream) { return status(r().hipStreamDestroy(as<hipStream_t>(stream))); };
  t.synchronize_stream = [](Handle stream) { return status(r().hipStreamSynchronize(as<hipStream_t>(stream))); };
  t.copy_to_device = [](DevicePtr dst, const void* src, std::size_t bytes, Handle stream) {
    return status(r().hipMemcpyHtoDAsync(address(dst), const_cast<void*>(src), bytes, as<hipStream_t>(stream)));
  };
  t.copy_to_host = [](void* dst, DevicePtr src, std::size_t bytes, Handle stream) {
    return status(r().hipMemcpyDtoHAsync(dst, address(src), bytes, as<hipStream_t>(stream)));
  };
  t.copy_on_device = [](DevicePtr dst, DevicePtr src, std::size_t bytes, Handle stream) {
    return status(r().hipMemcpyDtoDAsync(address(dst), address(src), bytes, as<hipStream_t>(stream)));
  };

  t.create_event = [](Handle* event) {
    hipEvent_t e = nullptr;
    const hipError_t result = r().hipEventCreate(&e);
    *event = e;
    return status(result);
  };
  t.destroy_event = [](Handle event) { return status(r().hipEventDestroy(as<hipEvent_t>(event))); };
  t.record_event = [](Handle event, Handle stream) {
    return status(r().hipEventRecord(as<hipEvent_t>(event), as<hipStream_t>(stream)));
  };
  t.elapsed_ms = [](float* ms, Handle start, Handle end) {
    return status(r().hipEventElapsedTime(ms, as<hipEvent_t>(start), as<hipEvent_t>(end)));
  };

  t.load_module = [](Handle* module, const void* image) {
    hipModule_t m = nullptr;
    const hipError_t e = r().hipModuleLoadData(&m, image);
    *module = m;
    return status(e);
  };
  t.unload_module = [](Handle module) { return status(r().hipModuleUnload(as<hipModule_t>(module))); };
  t.get_function = [](Handle* function, Handle module, const char* name) {
    hipFunction_t f = nullptr;
    const hipError_t e = r().hipModuleGetFunction(&f, as<hipModule_t>(module), name);
    *function = f;
    return status(e);
  };
  // HIP kernels declare all their shared memory statically (an AMD
  // workgroup's LDS, 64 KiB, is also the static limit): nothing to allow.
  t.allow_dynamic_shared = [](Handle, unsigned bytes) { return bytes == 0 ? Status{0} : Status{1}; };
  t.launch = [](Handle function, const unsigned grid[3], unsigned block_x, unsigned shared_bytes, Handle stream,
                void** args) {
    return status(r().hipModuleLaunchKernel(as<hipFunction_t>(function), grid[0], grid[1], grid[2], block_x, 1, 1,
                                            shared_bytes, as<hipStream_t>(stream), args, nullptr));
  };

  t.begin_capture = [](Handle stream) {
    return status(r().hipStreamBeginCapture(as<hipStream_t>(stream), hipStreamCaptureModeThreadLocal));
  };
  t.end_capture = [](Handle stream, Handle* graph) {
    hipGraph_t g = nullptr;
    const hipError_t e = r().hipStreamEndCapture(as<hipStream_t>(stream), &g);
    *graph = g;
    return status(e);
  };
  t.instantiate_graph = [](Handle* instance, Handle graph) {
    hipGraphExec_t e = nullptr;
    const hipError_t result = r().hipGraphInstantiate(&e, as<hipGraph_t>(graph), nullptr, nullptr, 0);
    *instance = e;
    return status(result);
  };
  t.launch_graph = [](Handle instance, Handle stream) {
    return status(r().hipGraphLaunch(as<hipGraphExec_t>(instance), as<hipStream_t>(stream)));
  };
  t.destroy_graph = [](Handle graph) { return status(r().hipGraphDestroy(as<hipGraph_t>(graph))); };
  t.destroy_graph_instance = [](Handle instance) {
    return status(r().hipGraphExecDestroy(as<hipGraphExec_t>(instance)));
  };
  return t;
}

}  // namespace

const cuda_style::VendorTable& device_table() {
  static const cuda_style::VendorTable table = make_table();
  return table;
}

}  // namespace kiln::backend::hip

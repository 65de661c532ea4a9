#include "backends/cuda/device_table.h"

#include "backends/cuda/driver.h"
#include "backends/cuda/driver_library.h"

namespace kiln::backend::cuda {
namespace {

using cuda_style::DevicePtr;
using cuda_style::Handle;
using cuda_style::Status;

const DriverLibrary& d() { return driver_library(); }
Status status(CUresult result) { return static_cast<Status>(result); }

template <typename T>
T as(Handle handle) {
  return static_cast<T>(handle);
}

cuda_style::VendorTable make_table() {
  cuda_style::VendorTable t{};
  t.backend = "cuda";
  t.api = "the CUDA driver";
  t.error_name = [](Status s) { return result_name(s); };
  t.out_of_memory = CUDA_ERROR_OUT_OF_MEMORY;
  t.device_lost = {CUDA_ERROR_ILLEGAL_ADDRESS,       CUDA_ERROR_LAUNCH_TIMEOUT,   CUDA_ERROR_HARDWARE_STACK_ERROR,
                   CUDA_ERROR_ILLEGAL_INSTRUCTION,   CUDA_ERROR_MISALIGNED_ADDRESS, CUDA_ERROR_INVALID_ADDRESS_SPACE,
                   CUDA_ERROR_INVALID_PC,            CUDA_ERROR_LAUNCH_FAILED,    CUDA_ERROR_ECC_UNCORRECTABLE};

  // The primary context: the one the CUDA runtime (and so PyTorch) uses too.
  t.open_device = [](int ordinal, Handle* context) {
    CUdevice device = 0;
    if (CUresult r = d().cuDeviceGet(&device, ordinal); r != CUDA_SUCCESS) return status(r);
    CUcontext ctx = nullptr;
    if (CUresult r = d().cuDevicePrimaryCtxRetain(&ctx, device); r != CUDA_SUCCESS) return status(r);
    *context = ctx;
    return status(d().cuCtxSetCurrent(ctx));
  };
  t.bind = [](int, Handle context) { return status(d().cuCtxSetCurrent(as<CUcontext>(context))); };
  t.close_device = [](int ordinal, Handle) {
    CUdevice device = 0;
    if (CUresult r = d().cuDeviceGet(&device, ordinal); r != CUDA_SUCCESS) return status(r);
    return status(d().cuDevicePrimaryCtxRelease_v2(device));
  };
  t.memory_info = [](std::size_t* free_bytes, std::size_t* total_bytes) {
    return status(d().cuMemGetInfo_v2(free_bytes, total_bytes));
  };

  t.allocate = [](DevicePtr* pointer, std::size_t bytes) {
    CUdeviceptr p = 0;
    const CUresult r = d().cuMemAlloc_v2(&p, bytes);
    *pointer = p;
    return status(r);
  };
  t.release = [](DevicePtr pointer) { return status(d().cuMemFree_v2(pointer)); };
  t.allocate_host = [](void** pointer, std::size_t bytes) { return status(d().cuMemHostAlloc(pointer, bytes, 0)); };
  t.release_host = [](void* pointer) { return status(d().cuMemFreeHost(pointer)); };

  t.create_stream = [](Handle* stream) {
    CUstream s = nullptr;
    const CUresult r = d().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    *stream = s;
    return status(r);
  };
  t.destroy_stream = [](Handle stream) { return status(d().cuStreamDestroy_v2(as<CUstream>(stream))); };
  t.synchronize_stream = [](Handle stream) { return status(d().cuStreamSynchronize(as<CUstream>(stream))); };
  t.copy_to_device = [](DevicePtr dst, const void* src, std::size_t bytes, Handle stream) {
    return status(d().cuMemcpyHtoDAsync_v2(dst, src, bytes, as<CUstream>(stream)));
  };
  t.copy_to_host = [](void* dst, DevicePtr src, std::size_t bytes, Handle stream) {
    return status(d().cuMemcpyDtoHAsync_v2(dst, src, bytes, as<CUstream>(stream)));
  };
  t.copy_on_device = [](DevicePtr dst, DevicePtr src, std::size_t bytes, Handle stream) {
    return status(d().cuMemcpyDtoDAsync_v2(dst, src, bytes, as<CUstream>(stream)));
  };

  t.create_event = [](Handle* event) {
    CUevent e = nullptr;
    const CUresult r = d().cuEventCreate(&e, CU_EVENT_DEFAULT);
    *event = e;
    return status(r);
  };
  t.destroy_event = [](Handle event) { return status(d().cuEventDestroy_v2(as<CUevent>(event))); };
  t.record_event = [](Handle event, Handle stream) {
    return status(d().cuEventRecord(as<CUevent>(event), as<CUstream>(stream)));
  };
  t.elapsed_ms = [](float* ms, Handle start, Handle end) {
    return status(d().event_elapsed_time(ms, as<CUevent>(start), as<CUevent>(end)));
  };

  t.load_module = [](Handle* module, const void* image) {
    CUmodule m = nullptr;
    const CUresult r = d().cuModuleLoadData(&m, image);
    *module = m;
    return status(r);
  };
  t.unload_module = [](Handle module) { return status(d().cuModuleUnload(as<CUmodule>(module))); };
  t.get_function = [](Handle* function, Handle module, const char* name) {
    CUfunction f = nullptr;
    const CUresult r = d().cuModuleGetFunction(&f, as<CUmodule>(module), name);
    *function = f;
    return status(r);
  };
  t.allow_dynamic_shared = [](Handle function, unsigned bytes) {
    return status(d().cuFuncSetAttribute(as<CUfunction>(function), CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                         static_cast<int>(bytes)));
  };
  t.launch = [](Handle function, const unsigned grid[3], unsigned block_x, unsigned shared_bytes, Handle stream,
                void** args) {
    return status(d().cuLaunchKernel(as<CUfunction>(function), grid[0], grid[1], grid[2], block_x, 1, 1, shared_bytes,
                                     as<CUstream>(stream), args, nullptr));
  };

  t.begin_capture = [](Handle stream) {
    return status(d().cuStreamBeginCapture_v2(as<CUstream>(stream), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  };
  t.end_capture = [](Handle stream, Handle* graph) {
    CUgraph g = nullptr;
    const CUresult r = d().cuStreamEndCapture(as<CUstream>(stream), &g);
    *graph = g;
    return status(r);
  };
  t.instantiate_graph = [](Handle* instance, Handle graph) {
    CUgraphExec e = nullptr;
    const CUresult r = d().cuGraphInstantiateWithFlags(&e, as<CUgraph>(graph), 0);
    *instance = e;
    return status(r);
  };
  t.launch_graph = [](Handle instance, Handle stream) {
    return status(d().cuGraphLaunch(as<CUgraphExec>(instance), as<CUstream>(stream)));
  };
  t.destroy_graph = [](Handle graph) { return status(d().cuGraphDestroy(as<CUgraph>(graph))); };
  t.destroy_graph_instance = [](Handle instance) {
    return status(d().cuGraphExecDestroy(as<CUgraphExec>(instance)));
  };
  return t;
}

}  // namespace

const cuda_style::VendorTable& device_table() {
  static const cuda_style::VendorTable table = make_table();
  return table;
}

}  // namespace kiln::backend::cuda

#include "backends/cuda/driver.h"

#include <cuda.h>
#include <dlfcn.h>

#include <string>

namespace kiln::backend::cuda {
namespace {

constexpr const char* kDriverLibrary = "libcuda.so.1";

// The driver entry points kiln uses, resolved with dlsym. <cuda.h> only
// supplies their types: nothing links against libcuda.
struct DriverApi {
  decltype(&cuInit) init = nullptr;
  decltype(&cuGetErrorName) get_error_name = nullptr;
  decltype(&cuDriverGetVersion) driver_get_version = nullptr;
  decltype(&cuDeviceGetCount) device_get_count = nullptr;
  decltype(&cuDeviceGet) device_get = nullptr;
  decltype(&cuDeviceGetName) device_get_name = nullptr;
  decltype(&cuDeviceGetAttribute) device_get_attribute = nullptr;
  decltype(&cuDeviceTotalMem) device_total_mem = nullptr;
};

template <typename Function>
void resolve(void* library, const char* symbol, Function& function) {
  function = reinterpret_cast<Function>(dlsym(library, symbol));
  KILN_CHECK(function != nullptr, ErrorKind::DeviceUnavailable,
             std::string("NVIDIA driver too old: ") + kDriverLibrary + " lacks " + symbol);
}

// The library stays loaded for the life of the process: drivers do not
// support being unloaded, and devices created later need it.
DriverApi load_driver() {
  void* library = dlopen(kDriverLibrary, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = dlerror();
    throw_error(ErrorKind::DeviceUnavailable,
                std::string("no NVIDIA driver: ") + (reason ? reason : kDriverLibrary));
  }
  DriverApi api;
  resolve(library, "cuInit", api.init);
  resolve(library, "cuGetErrorName", api.get_error_name);
  resolve(library, "cuDriverGetVersion", api.driver_get_version);
  resolve(library, "cuDeviceGetCount", api.device_get_count);
  resolve(library, "cuDeviceGet", api.device_get);
  resolve(library, "cuDeviceGetName", api.device_get_name);
  resolve(library, "cuDeviceGetAttribute", api.device_get_attribute);
  resolve(library, "cuDeviceTotalMem_v2", api.device_total_mem);  // what <cuda.h> maps cuDeviceTotalMem to
  return api;
}

// cudaErrorInsufficientDriver: <cuda.h> no longer names it, but drivers older
// than the toolkit still answer cuInit with it.
constexpr int kInsufficientDriver = 35;

// "CUDA_ERROR_NO_DEVICE (100)". The stub library cannot name its own errors,
// so the ones that mean "no driver" are named here too.
std::string result_name(const DriverApi& api, CUresult result) {
  const int code = static_cast<int>(result);
  const char* name = nullptr;
  if (api.get_error_name(result, &name) != CUDA_SUCCESS || name == nullptr) {
    switch (code) {
      case CUDA_ERROR_STUB_LIBRARY: name = "CUDA_ERROR_STUB_LIBRARY"; break;
      case kInsufficientDriver: name = "CUDA_ERROR_INSUFFICIENT_DRIVER"; break;
      case CUDA_ERROR_NO_DEVICE: name = "CUDA_ERROR_NO_DEVICE"; break;
      default: name = "CUresult";
    }
  }
  return std::string(name) + " (" + std::to_string(code) + ")";
}

void check(const DriverApi& api, CUresult result, const std::string& call) {
  if (result != CUDA_SUCCESS)
    throw_error(ErrorKind::DeviceUnavailable, call + " failed: " + result_name(api, result));
}

void initialise(const DriverApi& api) {
  const CUresult result = api.init(0);
  if (result == CUDA_SUCCESS) return;
  const std::string failure = "cuInit failed: " + result_name(api, result);
  switch (static_cast<int>(result)) {
    case CUDA_ERROR_STUB_LIBRARY:
      throw_error(ErrorKind::DeviceUnavailable,
                  std::string("no NVIDIA driver: ") + kDriverLibrary + " is the CUDA toolkit's stub; " + failure);
    case kInsufficientDriver:
      throw_error(ErrorKind::DeviceUnavailable, "NVIDIA driver too old for this CUDA version: " + failure);
    case CUDA_ERROR_NO_DEVICE:
      throw_error(ErrorKind::DeviceUnavailable, "no NVIDIA GPU: " + failure);
    default:
      throw_error(ErrorKind::DeviceUnavailable, failure);
  }
}

// 13000 -> "13.0"
std::string version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

std::uint32_t attribute(const DriverApi& api, CUdevice device, CUdevice_attribute which, const char* what) {
  int value = 0;
  check(api, api.device_get_attribute(&value, which, device), std::string("cuDeviceGetAttribute(") + what + ")");
  return static_cast<std::uint32_t>(value);
}

TargetDesc read_device(const DriverApi& api, int ordinal, const std::string& cuda_version) {
  CUdevice device = 0;
  check(api, api.device_get(&device, ordinal), "cuDeviceGet(" + std::to_string(ordinal) + ")");
  char name[256] = {};
  check(api, api.device_get_name(name, sizeof(name) - 1, device), "cuDeviceGetName");
  std::size_t memory = 0;
  check(api, api.device_total_mem(&memory, device), "cuDeviceTotalMem");

  auto get = [&](CUdevice_attribute which, const char* what) { return attribute(api, device, which, what); };
  const std::uint32_t major = get(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability major");
  const std::uint32_t minor = get(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability minor");

  TargetDesc target;
  target.backend = "cuda";
  target.device_name = name;
  target.device_type = get(CU_DEVICE_ATTRIBUTE_INTEGRATED, "integrated") ? "integrated-gpu" : "discrete-gpu";
  target.driver = "NVIDIA driver (CUDA " + cuda_version + ")";
  target.api_version = "CUDA " + cuda_version;
  target.arch = "sm_" + std::to_string(major * 10 + minor);
  target.subgroup_size = get(CU_DEVICE_ATTRIBUTE_WARP_SIZE, "warp size");
  target.max_workgroup_size = {get(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, "max block dim x"),
                               get(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, "max block dim y"),
                               get(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, "max block dim z")};
  target.max_workgroup_invocations = get(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max threads per block");
  target.max_workgroup_count = {get(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, "max grid dim x"),
                                get(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, "max grid dim y"),
                                get(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, "max grid dim z")};
  // Static __shared__ memory; more needs an opt-in kiln does not use.
  target.max_shared_memory_bytes = get(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, "max shared memory per block");
  target.max_buffer_bytes = memory;
  target.device_memory_bytes = memory;
  target.min_buffer_offset_alignment = 256;  // cudaMalloc's alignment
  target.fp16 = major * 10 + minor >= 53;     // native half arithmetic since sm_53
  target.int64 = true;
  target.storage8 = true;
  target.timestamps = true;  // CUDA events
  set_pointer_style_capabilities(target);
  return target;
}

DriverProbe run_probe() {
  const DriverApi api = load_driver();
  initialise(api);
  int driver_version = 0;
  check(api, api.driver_get_version(&driver_version), "cuDriverGetVersion");
  int count = 0;
  check(api, api.device_get_count(&count), "cuDeviceGetCount");
  KILN_CHECK(count > 0, ErrorKind::DeviceUnavailable, "no NVIDIA GPU: the driver reports 0 devices");

  DriverProbe probe;
  for (int ordinal = 0; ordinal < count; ++ordinal)
    probe.devices.push_back(read_device(api, ordinal, version_text(driver_version)));
  return probe;
}

}  // namespace

const DriverProbe& probe_driver() {
  static const DriverProbe probe = [] {
    try {
      return run_probe();
    } catch (const Error& error) {
      return DriverProbe{error.what(), {}};
    }
  }();
  return probe;
}

}  // namespace kiln::backend::cuda

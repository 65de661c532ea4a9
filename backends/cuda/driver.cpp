#include "backends/cuda/driver.h"

#include "backends/cuda/driver_library.h"
#include "backends/cuda/matrix_instructions.h"
#include "src/base/check.h"

#include <string>

namespace kiln::backend::cuda {
namespace {

constexpr const char* kDriverLibrary = "libcuda.so.1";

const DriverLibrary& load_driver() {
  const DriverLibrary& driver = driver_library();
  if (!driver.loaded()) throw_error(ErrorKind::DeviceUnavailable, driver.failure);
  return driver;
}

// cudaErrorInsufficientDriver: <cuda.h> no longer names it, but drivers older
// than the toolkit still answer cuInit with it.
constexpr int kInsufficientDriver = 35;

// "CUDA_ERROR_NO_DEVICE (100)". The stub library cannot name its own errors,
// so the ones that mean "no driver" are named here too.
std::string result_name(const DriverLibrary& api, CUresult result) {
  const int code = static_cast<int>(result);
  const char* name = nullptr;
  if (api.cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) {
    switch (code) {
      case CUDA_ERROR_STUB_LIBRARY: name = "CUDA_ERROR_STUB_LIBRARY"; break;
      case kInsufficientDriver: name = "CUDA_ERROR_INSUFFICIENT_DRIVER"; break;
      case CUDA_ERROR_NO_DEVICE: name = "CUDA_ERROR_NO_DEVICE"; break;
      default: name = "CUresult";
    }
  }
  return std::string(name) + " (" + std::to_string(code) + ")";
}

void check(const DriverLibrary& api, CUresult result, const std::string& call) {
  if (result != CUDA_SUCCESS)
    throw_error(ErrorKind::DeviceUnavailable, call + " failed: " + result_name(api, result));
}

void initialise(const DriverLibrary& api) {
  const CUresult result = api.cuInit(0);
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

std::uint32_t attribute(const DriverLibrary& api, CUdevice device, CUdevice_attribute which, const char* what) {
  int value = 0;
  check(api, api.cuDeviceGetAttribute(&value, which, device), std::string("cuDeviceGetAttribute(") + what + ")");
  return static_cast<std::uint32_t>(value);
}

TargetDesc read_device(const DriverLibrary& api, int ordinal, const std::string& cuda_version) {
  CUdevice device = 0;
  check(api, api.cuDeviceGet(&device, ordinal), "cuDeviceGet(" + std::to_string(ordinal) + ")");
  char name[256] = {};
  check(api, api.cuDeviceGetName(name, sizeof(name) - 1, device), "cuDeviceGetName");
  std::size_t memory = 0;
  check(api, api.cuDeviceTotalMem_v2(&memory, device), "cuDeviceTotalMem");

  auto get = [&](CUdevice_attribute which, const char* what) { return attribute(api, device, which, what); };
  const std::uint32_t major = get(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability major");
  const std::uint32_t minor = get(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability minor");

  TargetDesc target;
  target.backend = "cuda";
  target.device_name = name;
  target.discrete_gpu = get(CU_DEVICE_ATTRIBUTE_INTEGRATED, "integrated") == 0;
  target.device_type = target.discrete_gpu ? "discrete-gpu" : "integrated-gpu";
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
  // What a block may have with the opt-in (kernels past the static 48 KiB
  // declare it dynamically and opt in at load).
  target.max_shared_memory_bytes =
      get(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "max shared memory per block (opt-in)");
  target.max_buffer_bytes = memory;
  target.device_memory_bytes = memory;
  target.min_buffer_offset_alignment = 256;  // cudaMalloc's alignment
  target.fp16 = major * 10 + minor >= 53;     // native half arithmetic since sm_53
  target.tf32 = major >= 8;                    // TF32 tensor cores since sm_80
  target.matrix_shapes = matrix_shapes(major * 10 + minor);
  target.int64 = true;
  target.storage8 = true;
  target.storage16 = true;
  target.timestamps = true;  // CUDA events
  set_pointer_style_capabilities(target);
  return target;
}

cuda_style::RuntimeProbe run_probe() {
  const DriverLibrary& api = load_driver();
  initialise(api);
  int driver_version = 0;
  check(api, api.cuDriverGetVersion(&driver_version), "cuDriverGetVersion");
  int count = 0;
  check(api, api.cuDeviceGetCount(&count), "cuDeviceGetCount");
  KILN_CHECK(count > 0, ErrorKind::DeviceUnavailable, "no NVIDIA GPU: the driver reports 0 devices");

  cuda_style::RuntimeProbe probe;
  for (int ordinal = 0; ordinal < count; ++ordinal)
    probe.devices.push_back(read_device(api, ordinal, version_text(driver_version)));
  return probe;
}

}  // namespace

std::string result_name(int result) {
  const DriverLibrary& driver = driver_library();
  if (!driver.loaded()) return "CUresult (" + std::to_string(result) + ")";
  return result_name(driver, static_cast<CUresult>(result));
}

const cuda_style::RuntimeProbe& probe_driver() {
  static const cuda_style::RuntimeProbe probe = [] {
    try {
      return run_probe();
    } catch (const Error& error) {
      return cuda_style::RuntimeProbe{error.what(), {}};
    }
  }();
  return probe;
}

}  // namespace kiln::backend::cuda

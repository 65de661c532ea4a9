#include "backends/hip/runtime.h"

#include "backends/hip/hip_runtime_library.h"
#include "backends/hip/matrix_instructions.h"
#include "src/base/check.h"

#include <string>

namespace kiln::backend::hip {
namespace {

// "hipErrorInvalidDevice (101)"
std::string result_name(const HipRuntimeLibrary& api, hipError_t result) {
  const char* name = api.hipGetErrorName(result);
  return std::string(name ? name : "hipError") + " (" + std::to_string(static_cast<int>(result)) + ")";
}

void check(const HipRuntimeLibrary& api, hipError_t result, const std::string& call) {
  if (result == hipSuccess) return;
  // Without an AMD GPU the runtime answers hipInit with InvalidDevice and
  // hipGetDeviceCount with NoDevice: both mean "no GPU", not a fault.
  const bool no_gpu = result == hipErrorNoDevice || result == hipErrorInvalidDevice;
  throw_error(ErrorKind::DeviceUnavailable,
              std::string(no_gpu ? "no AMD GPU: " : "") + call + " returned " + result_name(api, result));
}

// "gfx90a:sramecc+:xnack-" -> "gfx90a"
std::string processor_name(const char* arch_name) {
  std::string name(arch_name);
  return name.substr(0, name.find(':'));
}

std::uint32_t positive(int value) { return value > 0 ? static_cast<std::uint32_t>(value) : 0; }

TargetDesc read_device(const HipRuntimeLibrary& api, int ordinal, int driver_version) {
  hipDeviceProp_t properties{};
  check(api, api.hipGetDeviceProperties(&properties, ordinal),
        "hipGetDeviceProperties(" + std::to_string(ordinal) + ")");

  TargetDesc target;
  target.backend = "hip";
  target.device_name = properties.name;
  target.device_type = properties.integrated ? "integrated-gpu" : "discrete-gpu";
  target.discrete_gpu = !properties.integrated;
  target.driver = "AMD HIP driver " + version_text(driver_version);
  target.api_version = "HIP " + version_text(driver_version);
  target.arch = processor_name(properties.gcnArchName);
  target.subgroup_size = positive(properties.warpSize);
  target.max_workgroup_size = {positive(properties.maxThreadsDim[0]), positive(properties.maxThreadsDim[1]),
                               positive(properties.maxThreadsDim[2])};
  target.max_workgroup_invocations = positive(properties.maxThreadsPerBlock);
  target.max_workgroup_count = {positive(properties.maxGridSize[0]), positive(properties.maxGridSize[1]),
                                positive(properties.maxGridSize[2])};
  target.max_shared_memory_bytes = properties.sharedMemPerBlock;
  target.max_buffer_bytes = properties.totalGlobalMem;
  target.device_memory_bytes = properties.totalGlobalMem;
  target.min_buffer_offset_alignment = 256;
  target.fp16 = true;  // every GPU ROCm supports has half arithmetic
  target.int64 = true;
  target.storage8 = true;
  target.storage16 = true;
  target.timestamps = true;  // HIP events
  target.matrix_shapes = matrix_shapes(target.arch);
  set_pointer_style_capabilities(target);
  return target;
}

cuda_style::RuntimeProbe run_probe() {
  const HipRuntimeLibrary& api = hip_runtime_library();
  if (!api.loaded()) throw_error(ErrorKind::DeviceUnavailable, api.failure);
  check(api, api.hipInit(0), "hipInit");
  int count = 0;
  check(api, api.hipGetDeviceCount(&count), "hipGetDeviceCount");
  KILN_CHECK(count > 0, ErrorKind::DeviceUnavailable, "no AMD GPU: the HIP runtime reports 0 devices");
  int driver_version = 0;
  check(api, api.hipDriverGetVersion(&driver_version), "hipDriverGetVersion");

  cuda_style::RuntimeProbe probe;
  for (int ordinal = 0; ordinal < count; ++ordinal) probe.devices.push_back(read_device(api, ordinal, driver_version));
  return probe;
}

}  // namespace

std::string version_text(int hip_version) {
  return std::to_string(hip_version / 10000000) + "." + std::to_string(hip_version / 100000 % 100) + "." +
         std::to_string(hip_version % 100000);
}

const cuda_style::RuntimeProbe& probe_runtime() {
  static const cuda_style::RuntimeProbe probe = [] {
    try {
      return run_probe();
    } catch (const Error& error) {
      return cuda_style::RuntimeProbe{error.what(), {}};
    }
  }();
  return probe;
}

}  // namespace kiln::backend::hip

// The CUDA-style backends (CUDA, HIP) as one family: one Backend class over a
// vendor's description, so that each vendor's folder holds only what
// differs: its runtime probe and device table (the runtime: device.h), its
// runtime compiler, its language table, and its rules for compiled-model
// files.
#pragma once

#include "backends/backend.h"
#include "backends/cuda_style/rtc.h"
#include "backends/cuda_style/vendor_table.h"

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kiln::backend::cuda_style {

// What a vendor's runtime library found: its devices, or why none can run.
struct RuntimeProbe {
  // Why no device can run kernels here; nullopt when at least one can.
  std::optional<std::string> unavailable_reason;
  // One entry per device the runtime reports, limits read from the device.
  std::vector<TargetDesc> devices;
};

struct Vendor {
  std::string name;  // "cuda"
  // The runtime compiler (lives for the process).
  const RuntimeCompiler* compiler = nullptr;
  // Loads and probes the runtime once per process; never throws.
  std::function<const RuntimeProbe&()> probe;
  // The runtime's functions (valid once the probe found a device).
  std::function<const VendorTable&()> device_table;
  std::function<const LanguageTable&()> language;
  std::function<std::vector<TargetDesc>()> offline_targets;
  // The target kernels for a probed device are compiled for (CUDA: PTX of an
  // older architecture where its compiler does not know the device's); unset: the device's own.
  std::function<TargetDesc(TargetDesc)> compile_target;
  // Backend::binary_targets and foreign_plan_refusal; unset: the defaults.
  std::function<std::vector<TargetDesc>(const TargetDesc&)> binary_targets;
  std::function<std::optional<std::string>(const TargetDesc& planned, const TargetDesc& device,
                                           const std::set<std::string>& formats)>
      foreign_plan_refusal;
};

// Running needs both the compiler and the runtime: without either, each
// missing one is named.
std::unique_ptr<Backend> make_backend(Vendor vendor);

}  // namespace kiln::backend::cuda_style

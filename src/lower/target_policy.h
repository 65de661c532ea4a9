// The compiler's one reading of a target's capability record
// (backend::TargetDesc): every choice that depends on the kind of device is
// made from this value. build_plan derives it once and hands each stage its
// view: the graph passes their options (the device class, the largest
// binding, the templates' answers), fusion and lowering the LowerTarget the
// templates' heuristics read. Nothing outside backends/ reads a device's
// type by name.
#pragma once

#include "backends/backend.h"
#include "graph/passes/passes.h"
#include "shaders/target.h"

#include <cstdint>

namespace kiln::lower {

struct TargetPolicy {
  // The device class (device_class below). A CPU implementation (lavapipe,
  // the cpu backend) takes the CPU variants of passes
  // (pack_matmul_weights=auto), kernels (register blocks, texel loads) and
  // parameterisation (loop bounds as parameters); a discrete GPU the large
  // double-buffered shared-memory blocks; an integrated one blocks within
  // Vulkan's guaranteed limits.
  DeviceClass device_class = DeviceClass::integrated_gpu;
  bool cpu_device() const { return lower.cpu_device(); }
  // What lowering, fusion and the templates' heuristics know of the device.
  LowerTarget lower;
  std::uint32_t max_kernel_buffers = 0;  // buffers one kernel may bind; 0: no limit
  std::uint64_t max_binding_bytes = 0;   // the largest storage buffer; 0: no limit
  std::uint32_t max_kernel_param_bytes = 0;  // per-dispatch parameters; 0: unstated
  // What the graph passes ask of the heuristics, answered for `lower`.
  graph::passes::TemplateQueries templates;
  // When the winograd pass rewrites a convolution on this device: the
  // thresholds of its class, the GEMM heuristic's column multiple, the
  // largest transformed weight the device binds.
  graph::passes::WinogradRule winograd;

  // The graph passes' options under this policy (compiled mode).
  graph::passes::PipelineOptions pass_options(const Settings& settings, graph::passes::GraphChooser chooser = {}) const;
  // Eager mode's (algorithm choices and the f32 products' precision only).
  graph::passes::EagerPassOptions eager_pass_options(const Settings& settings) const;
  // The input types of the device's matrix units ("tf32", "f16", "bf16").
  std::vector<std::string> matrix_inputs() const;
};

// The class of `target`'s device, from its capability record
// (TargetDesc::cpu_cores, host_code, discrete_gpu): kernels on CPU cores are
// the host's (the cpu backend) or emulate a GPU (Vulkan on the CPU); a GPU
// the backend reports discrete is discrete; every other GPU (integrated,
// virtual, of no stated type, an offline Vulkan target) is taken as
// integrated, whose choices fit every GPU.
DeviceClass device_class(const backend::TargetDesc& target);

// Fields the target leaves 0 keep LowerTarget's defaults.
TargetPolicy target_policy(const backend::TargetDesc& target);

}  // namespace kiln::lower

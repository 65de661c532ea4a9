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
  // The device class: a CPU implementation (lavapipe, the cpu backend) takes
  // the CPU variants of passes (pack_matmul_weights=auto), kernels (register
  // blocks, texel loads) and parameterisation (loop bounds as parameters).
  bool cpu_device = false;
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

// Fields the target leaves 0 keep LowerTarget's defaults.
TargetPolicy target_policy(const backend::TargetDesc& target);

}  // namespace kiln::lower

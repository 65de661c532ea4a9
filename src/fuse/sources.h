// The kernels compiled mode builds for a model, rendered for one backend's
// language without a device: what `kiln dump` writes. The plan is the one
// the executor makes (graph passes, then plan_kernels with fusion), sized
// for the backend's first device when it has one, else its first offline
// target.
#pragma once

#include "backends/backend.h"
#include "src/kernel/parameterise.h"

#include <kiln/model.h>

#include <span>

#include <string>
#include <utility>
#include <vector>

namespace kiln::fuse {

struct KernelSourceFile {
  std::string file_name;    // "007_conv2d_add_relu.glsl": execution order, kernel name, extension
  std::string kernel_name;  // "conv2d_add_relu"
  std::vector<std::pair<std::string, std::string>> nodes;  // (node name, op), fused into this kernel, in order
  std::string source;
};

struct BackendSources {
  std::string backend;   // "vulkan"
  std::string language;  // "glsl"
  std::string target;    // the device or offline target the plan was sized for
  std::vector<KernelSourceFile> kernels;  // in execution order
  std::vector<std::string> host_steps;   // "node (op): reason" for each graph break
};

// Throws NotFound for a backend that is not built in. The sources are the
// ones the device compiles: after parameterise_for_target.
BackendSources generate_sources(const Model& model, const std::string& backend);

// Gives kernels of one structure shared sources with runtime parameters
// (src/kernel/parameterise.h) as compiled mode does for `target`: up to its
// parameter limit, with loop bounds as parameters on CPU devices.
// KILN_NO_PARAMETERISE=1 turns it off; KILN_PARAMETERISE_LOOP_BOUNDS=0/1
// decides loop bounds on any device.
kir::ParameteriseReport parameterise_for_target(std::span<kir::Kernel* const> kernels,
                                                const backend::TargetDesc& target);

// Every built-in backend's name, in preference order.
std::vector<std::string> source_backends();

}  // namespace kiln::fuse

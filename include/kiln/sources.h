// The kernels compiled mode builds for a model, as source text in a
// backend's language, without a device: what `kiln dump` writes.
//
//   for (const std::string& target : kiln::source_targets()) {   // "vulkan", "cuda", "hip", "c"
//     const kiln::KernelSources sources = kiln::kernel_sources(model, target);
//     for (const kiln::KernelSourceFile& k : sources.kernels) save(k.file_name, k.source);
//   }
//
// The plan is the one the executor makes, sized for the backend's first
// device when it has one, else its first offline target; max-autotune takes
// the tuning database's records and tunes nothing.
#pragma once

#include <kiln/export.h>
#include <kiln/model.h>
#include <kiln/settings.h>

#include <string>
#include <utility>
#include <vector>

namespace kiln {

struct KILN_API KernelSourceFile {
  std::string file_name;    // "007_conv2d_add_relu.comp": execution order, kernel name, the language's extension
  std::string kernel_name;  // "conv2d_add_relu"
  std::vector<std::pair<std::string, std::string>> nodes;  // (node name, op) fused into this kernel, in order
  std::string source;
};

struct KILN_API KernelSources {
  std::string backend;   // "vulkan"
  std::string language;  // "glsl"
  std::string target;    // the device or offline target the plan was sized for
  std::vector<KernelSourceFile> kernels;  // in execution order
  std::vector<std::string> host_steps;    // "node (op): reason" for each graph break
};

// The targets kernel_sources takes, one per built-in backend that declares
// one (Backend::source_target), in the backends' preference order.
KILN_API std::vector<std::string> source_targets();

// Throws Error(NotFound) naming the known targets for another name.
KILN_API KernelSources kernel_sources(const Model& model, const std::string& target, const Settings& settings = {});

}  // namespace kiln

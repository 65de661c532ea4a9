// The backend the model-level suites run on: KILN_TEST_BACKEND (the zoo_cpu
// test, tools/gpu-check.sh's CUDA runs), else the registry's first backend
// that has a device here (Vulkan, where it runs).
#pragma once

#include <kiln/kiln.h>

#include <cstdlib>
#include <string>

namespace kiln::testing {

// The type the model-level suites run models' f32 computation in:
// KILN_TEST_DTYPE ("f16" or "bf16": Model::with_float_type; the zoo_f16 and
// zoo_bf16 tests), else "" (the models' own types).
inline std::string test_dtype() {
  const char* named = std::getenv("KILN_TEST_DTYPE");
  return named != nullptr ? named : "";
}

inline std::string test_backend() {
  const char* named = std::getenv("KILN_TEST_BACKEND");
  if (named != nullptr && *named != '\0') return named;
  static const std::string first = [] {
    for (const kiln::BackendDescription& b : kiln::list_backends())
      if (b.available && !b.devices.empty()) return b.name;
    return std::string("vulkan");  // none runs here: the suites say why when they ask it for a device
  }();
  return first;
}

}  // namespace kiln::testing

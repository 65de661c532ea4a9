// The backend the model-level suites run on: KILN_TEST_BACKEND (the zoo_cpu
// test, tools/gpu-check.sh's CUDA runs), else Vulkan.
#pragma once

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
  return named != nullptr && *named != '\0' ? named : "vulkan";
}

}  // namespace kiln::testing

// The backend the model-level suites run on: KILN_TEST_BACKEND (the zoo_cpu
// test, tools/gpu-check.sh's CUDA runs), else Vulkan.
#pragma once

#include <cstdlib>
#include <string>

namespace kiln::testing {

inline std::string test_backend() {
  const char* named = std::getenv("KILN_TEST_BACKEND");
  return named != nullptr && *named != '\0' ? named : "vulkan";
}

}  // namespace kiln::testing

// The backend the model-level suites run on: KILN_TEST_BACKEND (the zoo's
// runs per built backend, tools/gpu-check.sh's CUDA runs), else the
// registry's first backend that has a device here (Vulkan, where it runs).
#pragma once

#include <kiln/kiln.h>

#include <cstdlib>
#include <iostream>
#include <string>

namespace kiln::testing {

// The type the model-level suites run models' f32 computation in:
// KILN_TEST_DTYPE ("f16" or "bf16": Model::with_float_type; the zoo_f16 and
// zoo_bf16 tests; "tf32": the f32 models, with TF32 products where the
// precision settings in the environment allow, in tools/gpu-check.sh), else
// "" (the models' own types).
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

// For a suite run once per built backend (tests/meson.build: zoo_<backend>):
// when KILN_TEST_BACKEND names a backend that cannot run here (not built,
// no driver, no device), prints why and exits 77, which Meson reports as a
// skip. Call it from a global fixture.
inline void skip_unless_named_backend_runs() {
  const char* named = std::getenv("KILN_TEST_BACKEND");
  if (named == nullptr || *named == '\0') return;
  std::string why = "it is not built";
  for (const kiln::BackendDescription& b : kiln::list_backends()) {
    if (b.name != named) continue;
    if (b.available && !b.devices.empty()) return;
    why = b.available ? "it has no device here" : b.unavailable_reason;
  }
  std::cout << "skipped: backend '" << named << "' cannot run here: " << why << std::endl;
  std::exit(77);
}

}  // namespace kiln::testing

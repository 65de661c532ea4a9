#pragma once

#include "backends/backend.h"

#include <memory>

namespace kiln::backend {

// Kernels compiled by the system C compiler and run on the host's threads:
// a second executing backend wherever kiln builds (backends/cpu/README: none;
// see docs/backends.md).
std::unique_ptr<Backend> create_cpu_backend();

}  // namespace kiln::backend

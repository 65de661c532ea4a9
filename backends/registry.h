// The built-in backends, in preference order (vulkan, cuda, hip, null). Which
// ones exist is decided at configure time (meson features); a compiled-in
// backend may still be unavailable at run time (no driver), see
// Backend::unavailable_reason().
#pragma once

#include "backends/backend.h"

#include <string_view>
#include <vector>

namespace kiln::backend {

const std::vector<const Backend*>& all_backends();
// Throws Error(NotFound) "unknown backend 'x' (built in: vulkan, cuda, hip, null)".
const Backend& get_backend(std::string_view name);

}  // namespace kiln::backend

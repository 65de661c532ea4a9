// The built-in backends, in preference order (vulkan, cuda, hip, null). Which
// ones exist is decided at configure time (meson features); a compiled-in
// backend may still be unavailable at run time (no driver), see
// Backend::unavailable_reason().
#pragma once

#include "backends/backend.h"

#include <string>
#include <string_view>
#include <vector>

namespace kiln::backend {

const std::vector<const Backend*>& all_backends();
// Throws Error(NotFound) "unknown backend 'x' (built in: vulkan, cuda, hip, null)".
const Backend& get_backend(std::string_view name);

// The index of the device `device_spec` names on `backend` ("" = the first
// device, "2" = an index, otherwise a case-insensitive substring of the device
// name). Throws NotFound listing the devices, or DeviceUnavailable with the
// backend's reason.
int resolve_device(const Backend& backend, const std::string& device_spec);

}  // namespace kiln::backend

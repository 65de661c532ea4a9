// The backends, in preference order (vulkan, cuda, hip, cpu, then any a
// program registers, then null). Which built-in ones exist is decided at
// configure time (meson features); a compiled-in backend may still be
// unavailable at run time (no driver), see Backend::unavailable_reason().
#pragma once

#include "backends/backend.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::backend {

// The built-in backends and any registered ones. The first call fixes the
// list for the life of the process (devices and cached kernels refer to
// their backend).
const std::vector<const Backend*>& all_backends();

// Adds a backend after the built-in ones (before null, the last): for a
// program that brings a backend of its own, such as the throwaway backend
// every suite crosses (tests/registered_backend.cpp). Call it before kiln
// first reads the list (any compile, load or device query). Throws
// InvalidArgument for a name already taken, and after the list is fixed.
void register_backend(std::unique_ptr<Backend> backend);
// Throws Error(NotFound) "unknown backend 'x' (built in: vulkan, cuda, hip, null)".
const Backend& get_backend(std::string_view name);

// The index of the device `device_spec` names on `backend` ("" = the first
// device, "2" = an index, otherwise a case-insensitive substring of the device
// name). Throws NotFound listing the devices, or DeviceUnavailable with the
// backend's reason.
int resolve_device(const Backend& backend, const std::string& device_spec);

}  // namespace kiln::backend

#pragma once
#include "backends/backend.h"
#include <memory>
namespace kiln::backend {
std::unique_ptr<Backend> create_vulkan_backend();
}  // namespace kiln::backend

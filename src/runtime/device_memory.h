// Device memory counted as kiln's buffers are made and freed, per pooled
// device (kiln::device_memory_use() reports it): a wrapper device whose
// buffers carry a guard that gives their bytes back when the last reference
// goes, whichever model, tensor or cache held it.
#pragma once

#include "backends/backend.h"

#include <atomic>
#include <cstdint>
#include <memory>

namespace kiln::runtime {

struct MemoryCounter {
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> buffers{0};
  std::atomic<std::uint64_t> peak_bytes{0};
};

// `device` with every buffer it allocates counted in `counter`.
std::shared_ptr<backend::Device> with_memory_accounting(std::shared_ptr<backend::Device> device,
                                                        std::shared_ptr<MemoryCounter> counter);

}  // namespace kiln::runtime

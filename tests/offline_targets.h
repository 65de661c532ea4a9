// Which offline CUDA/HIP targets a test compiles for: those KILN_OFFLINE_TARGETS
// lists (comma-separated arch names), all when it is unset. CI runs the long
// every-target cases as two processes at once, each for some targets
// (tests/meson.build): hiprtc compiles one program at a time per process.
#pragma once

#include <cstdlib>
#include <sstream>
#include <string>

namespace kiln::testing {

inline bool offline_target_listed(const std::string& arch) {
  const char* listed = std::getenv("KILN_OFFLINE_TARGETS");
  if (listed == nullptr) return true;
  std::istringstream list(listed);
  for (std::string item; std::getline(list, item, ',');)
    if (item == arch) return true;
  return false;
}

}  // namespace kiln::testing

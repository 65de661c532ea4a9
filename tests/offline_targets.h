// Every backend's offline targets (Backend::offline_targets: the targets code
// is generated for without a device), in registry order, for the tests that
// compile every kernel for each. CI runs those long cases as several
// processes at once (tests/meson.build): KILN_OFFLINE_PART=k/n keeps every
// n-th target from the k-th (1-based); unset, all of them.
#pragma once

#include "backends/registry.h"
#include "src/base/check.h"

#include <kiln/error.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace kiln::testing {

struct OfflineTarget {
  const backend::Backend* backend;
  backend::TargetDesc target;
};

// "k/n" -> {k, n}; {1, 1} when unset. Throws InvalidArgument for other text.
inline std::pair<std::size_t, std::size_t> offline_part() {
  const char* text = std::getenv("KILN_OFFLINE_PART");
  if (text == nullptr || *text == '\0') return {1, 1};
  const std::string part(text);
  const std::size_t slash = part.find('/');
  std::size_t k = 0, n = 0;
  try {
    k = std::stoul(part.substr(0, slash));
    n = slash == std::string::npos ? 0 : std::stoul(part.substr(slash + 1));
  } catch (const std::exception&) {
  }
  KILN_CHECK(n >= 1 && k >= 1 && k <= n, ErrorKind::InvalidArgument,
             "KILN_OFFLINE_PART must be k/n with 1 <= k <= n, not '" + part + "'");
  return {k, n};
}

// The offline targets of every backend compiled in, those of this part only.
inline std::vector<OfflineTarget> offline_targets_of_part() {
  const auto [k, n] = offline_part();
  std::vector<OfflineTarget> selected;
  std::size_t index = 0;
  for (const backend::Backend* b : backend::all_backends())
    for (backend::TargetDesc& target : b->offline_targets())
      if (index++ % n == k - 1) selected.push_back({b, std::move(target)});
  return selected;
}

}  // namespace kiln::testing

// What every libFuzzer target here asserts of one input: it ends in a
// result or in a kiln::Error that is a user error (Corrupt, Unsupported,
// InvalidArgument, ...). Anything else is a finding: an internal error,
// another exception type, a crash, a sanitizer report, an allocation past
// libFuzzer's limit, a hang.
#pragma once

#include <kiln/error.h>

#include <cstdio>
#include <cstdlib>

namespace kiln::fuzz {

template <class F>
void expect_result_or_user_error(const char* what, F&& read) {
  try {
    read();
  } catch (const kiln::Error& e) {
    if (e.is_user_error()) {
      // KILN_FUZZ_VERBOSE=1: say why each input was refused (to see how far seeds get).
      if (std::getenv("KILN_FUZZ_VERBOSE") != nullptr) std::fprintf(stderr, "refused: %s\n", e.what());
      return;
    }
    std::fprintf(stderr, "internal error reading %s: %s\n", what, e.what());
    std::abort();
  }
}

}  // namespace kiln::fuzz

#pragma once

#include "backends/language.h"

namespace kiln::backend::cpu {

// C99 (GNU C11 for __thread) for the cpu backend: one call of the kernel
// function runs one invocation; shared arrays are thread-local, since a
// worker thread runs one workgroup at a time; a barrier yields to the host.
const LanguageTable& cpu_language();

}  // namespace kiln::backend::cpu

#pragma once
#include "backends/language.h"
namespace kiln::backend {
// The hip spelling table for the C-style renderer (src/render/).
const LanguageTable& hip_language();
}  // namespace kiln::backend

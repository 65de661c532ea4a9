#pragma once
#include "backends/language.h"
namespace kiln::backend {
// The null spelling table for the C-style renderer (src/render/).
const LanguageTable& null_language();
}  // namespace kiln::backend

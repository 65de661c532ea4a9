#pragma once
#include "backends/language.h"
namespace kiln::backend {
// The glsl spelling table for the C-style renderer (src/render/).
const LanguageTable& glsl_language();
}  // namespace kiln::backend

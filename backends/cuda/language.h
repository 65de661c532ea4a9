#pragma once
#include "backends/language.h"
namespace kiln::backend {
// The cuda spelling table for the C-style renderer (src/render/).
const LanguageTable& cuda_language();
}  // namespace kiln::backend

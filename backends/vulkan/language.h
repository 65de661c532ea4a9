#pragma once
#include "backends/backend.h"
#include "backends/language.h"
namespace kiln::backend {
// The glsl spelling table for the C-style renderer (src/render/), for
// kernels converting f16 buffer elements as `f16` says.
const LanguageTable& glsl_language(F16Conversion f16 = F16Conversion::integer);
}  // namespace kiln::backend

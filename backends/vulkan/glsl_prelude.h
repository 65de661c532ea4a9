// Text emitted before every GLSL kernel: the #version line and the helper
// functions GLSL lacks (erf) or spells unsafely (tanh overflows to NaN).
#pragma once

#include <string>

namespace kiln::backend {

// #version 450, kiln_erf() and an overflow-safe kiln_tanh().
const std::string& glsl_prelude();

// The prelude's erf and tanh evaluated on the host in f32 with the same
// coefficients and operation order, so tests can bound their error.
float glsl_prelude_erf(float x);
float glsl_prelude_tanh(float x);

}  // namespace kiln::backend

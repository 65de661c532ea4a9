// Text emitted before every kernel of a language: includes and the helper
// functions a language lacks (GLSL has no erf). The language tables in
// backends/<name>/language.cpp reference these. Depends on nothing.
#pragma once

#include <string>

namespace kiln::shaders {

// #version 450, kiln_erf() and an overflow-safe kiln_tanh().
const std::string& glsl_prelude();
// NVRTC declares the math functions kernels use; nothing to add.
const std::string& cuda_prelude();
// hip_runtime.h for hipcc (hiprtc includes it implicitly).
const std::string& hip_prelude();
// Standard headers, the invocation-id struct and integer min/max helpers.
const std::string& c99_prelude();

// The GLSL prelude's erf and tanh evaluated on the host in f32 with the same
// coefficients and operation order, so tests can bound their error.
float glsl_prelude_erf(float x);
float glsl_prelude_tanh(float x);

}  // namespace kiln::shaders

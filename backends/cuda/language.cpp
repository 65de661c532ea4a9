// CUDA C++ for NVRTC: buffers are __restrict__ pointer parameters of an
// extern "C" kernel (so its name is not mangled), launched as 1-D blocks of
// workgroup_size threads on a 2-D grid. NVRTC declares the math functions kernels
// use, so there is no prelude.
#include "backends/cuda/language.h"

namespace kiln::backend {

const LanguageTable& cuda_language() {
  static const LanguageTable table = cuda_style_language("cuda", /*prelude=*/"");
  return table;
}

}  // namespace kiln::backend

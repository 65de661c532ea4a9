// CUDA C++ for NVRTC: buffers are __restrict__ pointer parameters of an
// extern "C" kernel (so its name is not mangled), launched as 1-D blocks of
// workgroup_size threads on a 2-D grid.
#include "backends/cuda/language.h"

#include "shaders/preludes.h"

namespace kiln::backend {

const LanguageTable& cuda_language() {
  static const LanguageTable table = cuda_style_language("cuda", shaders::cuda_prelude());
  return table;
}

}  // namespace kiln::backend

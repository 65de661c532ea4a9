// HIP C++ for hiprtc/hipcc: CUDA's spellings (HIP mirrors the CUDA device
// API) plus the runtime header for offline compiles.
#include "backends/hip/language.h"

#include "shaders/preludes.h"

namespace kiln::backend {

const LanguageTable& hip_language() {
  static const LanguageTable table = cuda_style_language("hip", shaders::hip_prelude());
  return table;
}

}  // namespace kiln::backend

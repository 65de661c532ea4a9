// HIP C++ for hiprtc/hipcc: CUDA's spellings (HIP mirrors the CUDA device
// API) plus the runtime header for offline compiles.
#include "backends/hip/language.h"

#include "shaders/preludes.h"

namespace kiln::backend {

const LanguageTable& hip_language() {
  static const LanguageTable table = [] {
    LanguageTable t = cuda_style_language("hip", shaders::hip_prelude());
    // HIP's shuffle takes no mask: a wavefront runs in lockstep.
    t.subgroup_broadcast = "__shfl({a}, {lane}, {sg})";
    return t;
  }();
  return table;
}

}  // namespace kiln::backend

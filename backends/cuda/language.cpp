// CUDA C++ for NVRTC: buffers are __restrict__ pointer parameters of an
// extern "C" kernel (so its name is not mangled), launched as 1-D blocks of
// workgroup_size threads on a 2-D grid. NVRTC declares the math functions kernels
// use, so there is no prelude.
#include "backends/cuda/language.h"

#include "backends/cuda/matrix_instructions.h"

namespace kiln::backend {

const LanguageTable& cuda_language() {
  static const LanguageTable table = [] {
    LanguageTable t = cuda_style_language("cuda", /*prelude=*/"");
    t.matrix_instructions = cuda::mma_sync_instructions();
    // Static __shared__ arrays stop at 48 KiB on every architecture; sm_70
    // and newer give a block more as dynamic shared memory, opted in to at load.
    t.max_static_shared_bytes = 48 * 1024;
    t.shared_dynamic_decl = "extern __shared__ __align__(16) unsigned char kiln_shared[];";
    t.shared_dynamic_view = "{type}* {name} = reinterpret_cast<{type}*>(kiln_shared + {offset});";
    return t;
  }();
  return table;
}

}  // namespace kiln::backend

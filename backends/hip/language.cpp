// HIP C++ for hiprtc/hipcc: CUDA's spellings (HIP mirrors the CUDA device
// API) plus the runtime header for offline compiles.
#include "backends/hip/language.h"

#include "backends/hip/matrix_instructions.h"

namespace kiln::backend {

const LanguageTable& hip_language() {
  static const LanguageTable table = [] {
    LanguageTable t = cuda_style_language("hip",
                                          // hiprtc includes the runtime header implicitly; hipcc needs it.
                                          "#if !defined(__HIPCC_RTC__)\n"
                                          "#include <hip/hip_runtime.h>\n"
                                          "#endif\n");
    // HIP's shuffle takes no mask: a wavefront runs in lockstep.
    t.subgroup_broadcast = "__shfl({a}, {lane}, {sg})";
    // hiprtc's clang has _Float16, whose conversions round to nearest even;
    // bf16 stays bits (CUDA's helpers, without CUDA's PTX).
    t.f16_storage = "_Float16";
    t.f16_from_storage = "((float)({a}))";
    t.f16_to_storage = "((_Float16)({a}))";
    t.f16_round = "((float)((_Float16)({a})))";
    t.type_f16 = "_Float16";  // f16 arithmetic in the GPU's own half instructions
    t.vector_u16 = "";  // _Float16 elements: scalar loads and stores
    t.vector_u16_store = "";
    t.storage16_helpers = bf16_conversions(kCudaStyleStorage16);
    t.matrix_instructions = hip::mfma_instructions();
    return t;
  }();
  return table;
}

}  // namespace kiln::backend

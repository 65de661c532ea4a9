// HIP C++ for hiprtc/hipcc: CUDA's spellings (HIP mirrors the CUDA device
// API) plus the runtime header for offline compiles.
#include "backends/hip/language.h"

#include "shaders/preludes.h"

namespace kiln::backend {

const LanguageTable& hip_language() {
  static const LanguageTable table = [] {
    LanguageTable t;
    t.name = "hip";
    t.prelude = shaders::hip_prelude();
    t.type_f32 = "float";
    t.type_i32 = "int";
    t.type_u32 = "unsigned int";
    t.type_bool = "bool";
    t.float_suffix = "f";
    t.float_inf = "__int_as_float(0x7f800000)";
    t.float_nan = "__int_as_float(0x7fc00000)";
    t.buffer_global_decl = "";
    t.buffer_param_decl = "{readonly}{type}* __restrict__ {name}";
    t.readonly_qualifier = "const ";
    t.buffer_access = "{name}[{index}]";
    t.extra_params = "";
    t.kernel_header = "extern \"C\" __global__ void __launch_bounds__({wg}) {name}({params})";
    t.global_index_expr = "(blockIdx.x * blockDim.x + threadIdx.x + blockIdx.y * (gridDim.x * blockDim.x))";
    t.exp = "expf({a})";
    t.log = "logf({a})";
    t.sqrt = "sqrtf({a})";
    t.rsqrt = "rsqrtf({a})";
    t.tanh = "tanhf({a})";
    t.erf = "erff({a})";
    t.abs = "fabsf({a})";
    t.iabs = "abs({a})";
    t.floor = "floorf({a})";
    t.ceil = "ceilf({a})";
    t.pow = "powf({a}, {b})";
    t.fmin = "fminf({a}, {b})";
    t.fmax = "fmaxf({a}, {b})";
    t.imin = "min({a}, {b})";
    t.imax = "max({a}, {b})";
    t.umin = "min({a}, {b})";  // HIP's min/max are templates over the argument type
    t.umax = "max({a}, {b})";
    t.cast = "(({type})({a}))";
    return t;
  }();
  return table;
}

}  // namespace kiln::backend

// The cpu backend's C: the null template's C99 with what running it needs.
// A worker thread runs a workgroup's invocations one after another (as
// fibres when the kernel has barriers), so a workgroup's shared arrays are
// the thread's own (__thread), and a barrier calls the host, which switches
// to the next invocation of the group (workers.h).
#include "backends/cpu/language.h"

#include "shaders/preludes.h"

namespace kiln::backend::cpu {

const LanguageTable& cpu_language() {
  static const LanguageTable table = [] {
    LanguageTable t;
    t.name = "c99";
    t.prelude = shaders::c99_prelude() +
                "// The host's barrier (backends/cpu/workers.h), set per worker thread.\n"
                "static __thread void (*kiln_barrier_fn)(void*) __attribute__((unused));\n"
                "static __thread void* kiln_barrier_ctx __attribute__((unused));\n";
    t.type_f32 = "float";
    t.type_i32 = "int32_t";
    t.type_u32 = "uint32_t";
    t.type_bool = "bool";
    t.type_i64 = "int64_t";
    t.i64_suffix = "LL";
    t.bool_storage = "uint8_t";
    t.bool_from_storage = "(({a}) != 0)";
    t.bool_to_storage = "((uint8_t)(({a}) ? 1 : 0))";
    t.float_suffix = "f";
    t.float_inf = "INFINITY";
    t.float_nan = "NAN";
    t.buffer_param_decl = "{readonly}{type}* restrict {name}";
    t.readonly_qualifier = "const ";
    t.buffer_access = "{name}[{index}]";
    t.vector_f32 = "";  // no vector types: vector loads become scalar loads
    t.params_global_decl = "typedef struct {{ {members} }} KilnParams;";
    t.params_param_decl = "KilnParams kiln_params";
    t.param_access = "kiln_params.p{index}";
    t.extra_params = "kiln_uvec3 kiln_global_id, kiln_uvec3 kiln_num_groups";
    // static: the entry points the compiler appends (compiler.cpp) call it,
    // and the C compiler inlines it into their loops.
    t.kernel_header = "static void {name}({params})";
    t.global_index_expr = "(kiln_global_id.x + kiln_global_id.y * (kiln_num_groups.x * {wg}u))";
    t.shared_global_decl = "static __thread {type} {name}[{count}];";
    t.shared_access = "{name}[{index}]";
    t.barrier = "kiln_barrier_fn(kiln_barrier_ctx);";
    t.texel_buffer_param_decl = "const float* restrict {name}";
    t.texel_load = "{name}[{index}]";
    t.texel_component_load = "{name}[{index}]";
    // The cpu target has no subgroups (TargetDesc::subgroup_size 0): kernels
    // using them are never planned for it; these keep the table complete.
    t.subgroup_lane_expr = "0";
    t.subgroup_id_expr = "((int32_t)(kiln_global_id.x % {wg}u))";
    t.subgroup_broadcast = "({a})";
    t.local_index_expr = "((int32_t)(kiln_global_id.x % {wg}u))";
    t.workgroup_index_expr = "((int32_t)(kiln_global_id.x / {wg}u + kiln_global_id.y * kiln_num_groups.x))";
    t.exp = "expf({a})";
    t.log = "logf({a})";
    t.sqrt = "sqrtf({a})";
    t.rsqrt = "(1.0f / sqrtf({a}))";
    t.tanh = "tanhf({a})";
    t.erf = "erff({a})";
    t.abs = "fabsf({a})";
    t.iabs = "abs({a})";
    t.floor = "floorf({a})";
    t.ceil = "ceilf({a})";
    t.pow = "powf({a}, {b})";
    t.fmin = "fminf({a}, {b})";
    t.fmax = "fmaxf({a}, {b})";
    t.imin = "kiln_imin({a}, {b})";
    t.lmin = "kiln_lmin({a}, {b})";
    t.lmax = "kiln_lmax({a}, {b})";
    t.labs = "kiln_labs({a})";
    t.imax = "kiln_imax({a}, {b})";
    t.umin = "kiln_umin({a}, {b})";
    t.umax = "kiln_umax({a}, {b})";
    t.cast = "(({type})({a}))";
    return t;
  }();
  return table;
}

}  // namespace kiln::backend::cpu

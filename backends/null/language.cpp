// Plain C99 for the null backend, the template for new backends: one call of
// the generated function runs one invocation, given its global id and the
// number of workgroups (what a GPU's built-ins would provide).
#include "backends/null/language.h"

#include "shaders/preludes.h"

namespace kiln::backend {

const LanguageTable& null_language() {
  static const LanguageTable table = [] {
    LanguageTable t;
    t.name = "c99";
    t.prelude = shaders::c99_prelude();
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
    t.buffer_global_decl = "";
    t.buffer_param_decl = "{readonly}{type}* restrict {name}";
    t.readonly_qualifier = "const ";
    t.buffer_access = "{name}[{index}]";
    t.vector_f32 = "";  // C99 has no vector types: vector loads become scalar loads
    t.params_global_decl = "typedef struct {{ {members} }} KilnParams;";
    t.params_param_decl = "KilnParams kiln_params";
    t.param_access = "kiln_params.p{index}";
    t.extra_params = "kiln_uvec3 kiln_global_id, kiln_uvec3 kiln_num_groups";
    t.kernel_header = "void {name}({params})";
    t.global_index_expr = "(kiln_global_id.x + kiln_global_id.y * (kiln_num_groups.x * {wg}u))";
    // One call runs one invocation, so a workgroup's shared arrays come from
    // the caller, and a barrier is the host's: it must run the group's
    // invocations concurrently (threads or fibres) and implement kiln_barrier.
    t.shared_param_decl = "{type}* restrict {name}";
    t.shared_access = "{name}[{index}]";
    t.barrier = "kiln_barrier();";
    t.barrier_global_decl = "void kiln_barrier(void);  // the host's workgroup barrier";
    // Texel buffers are plain read-only pointers.
    t.texel_buffer_param_decl = "const float* restrict {name}";
    t.texel_load = "{name}[{index}]";
    t.texel_component_load = "{name}[{index}]";
    // One call runs one invocation: a subgroup is that invocation alone (the
    // null target's subgroup size is 1), so a broadcast from lane 0 is the value.
    t.subgroup_lane_expr = "((int32_t)(kiln_global_id.x % {wg}u % {sg}u))";
    t.subgroup_id_expr = "((int32_t)(kiln_global_id.x % {wg}u / {sg}u))";
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

}  // namespace kiln::backend

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
    LanguageTable t = c99_language(
        shaders::c99_prelude() +
        "// The host's barrier (backends/cpu/workers.h), set per worker thread.\n"
        "static __thread void (*kiln_barrier_fn)(void*) __attribute__((unused));\n"
        "static __thread void* kiln_barrier_ctx __attribute__((unused));\n");
    // static: the entry points the compiler appends (compiler.cpp) call it,
    // and the C compiler inlines it into their loops.
    t.kernel_header = "static void {name}({params})";
    t.shared_param_decl = "";
    t.shared_global_decl = "static __thread {type} {name}[{count}];";
    t.barrier = "kiln_barrier_fn(kiln_barrier_ctx);";
    t.barrier_global_decl = "";
    // The cpu target has no subgroups (TargetDesc::subgroup_size 0): kernels
    // using them are never planned for it; these keep the table complete.
    t.subgroup_lane_expr = "0";
    t.subgroup_id_expr = "((int32_t)(kiln_global_id.x % {wg}u))";
    return t;
  }();
  return table;
}

}  // namespace kiln::backend::cpu

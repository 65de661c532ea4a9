// The workgroup size of kernels without a template: pointwise and reduction
// lowerings built by make_kernel (one invocation per output element, row or
// window, never cooperating with the others) are correct at any workgroup
// size, so it is their one knob ("wg64") and they are tuning sites like the
// templates'. Ops whose kernels cooperate within a workgroup (shared memory,
// barriers, subgroup operations) are not listed and keep their own size.
#pragma once

#include "graph/ir.h"
#include "src/kernel/ir.h"
#include "shaders/target.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::lower {

// Bumped when the same op, types and knob text would build a different
// kernel (a change to a pointwise or reduction lowering that matters for
// which workgroup size is fastest).
inline constexpr int kWorkgroupTemplateVersion = 1;

// The site's template name for `op`: "pointwise" (each invocation computes
// its own output elements: arithmetic, activations, copies and gathers,
// Winograd's per-tile transforms) or "reduction" (each invocation loops over
// a row, window or scan: Reduce*, Softmax, LayerNormalization, pooling,
// CumSum); nullptr when the op's kernel has no workgroup knob (templates
// with their own sites, views, host-only ops).
const char* workgroup_template(std::string_view op);

// "wg64" and back; parse errors are InvalidArgument naming the field.
std::string workgroup_knob_text(std::uint32_t size);
std::uint32_t parse_workgroup_knobs(const std::string& text);

// Why `size` cannot run on `target` (invocations per workgroup), or nullopt.
std::optional<std::string> workgroup_unfit(std::uint32_t size, const LowerTarget& target);

// The sizes worth trying: the target's subgroup size and 32 to 1024 in
// powers of two, ascending, before any filtering by the target.
std::vector<std::uint32_t> workgroup_size_space(const LowerTarget& target);

// What the kernel computes, as one line: the template, the op, its input
// types per slot ("-" for an omitted one), its output types and its
// attributes ("pointwise Clip in=f32[1,32,8,8] out=f32[1,32,8,8] max=6.0
// min=0.0"). Nodes that build the same kernel have the same text; the
// attributes are all of the node's, so nodes that differ in any never
// share it. An attribute value longer than 64 characters (Gather's index
// list) is written as '#' and its XXH3-64 digest.
std::string workgroup_problem_text(std::string_view template_name, const graph::Node& node,
                                   std::span<const graph::TensorType* const> inputs,
                                   std::span<const graph::TensorType> outputs);

// Sets `kernel`'s workgroup size from the target's override for `problem`
// (else it keeps the one make_kernel gave it), renames it "<name>_wg<N>"
// when overridden and records its tuning site. An override that does not
// parse or does not fit the target is logged as a warning and ignored.
// Throws Error(Internal) for a kernel that cooperates within its workgroup:
// an op listed by workgroup_template must not.
void build_tuned_workgroup(kir::Kernel& kernel, const char* template_name, const std::string& problem,
                           const LowerTarget& target);

}  // namespace kiln::lower

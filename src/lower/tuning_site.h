// Where lowering asks a heuristic for a template's knobs: the problem's
// canonical text, the override that may replace the heuristic's choice, and
// the tuning site recorded on the kernel (kir::TuningSite) for the autotuner.
#pragma once

#include "shaders/attention_template.h"
#include "shaders/conv_template.h"
#include "shaders/gemm_template.h"
#include "src/kernel/ir.h"
#include "shaders/target.h"

#include <span>
#include <string>
#include <string_view>

namespace kiln::graph {
struct Node;
struct TensorType;
}  // namespace kiln::graph

namespace kiln::lower {

// What a template computes, without its knobs: shapes and layouts, one
// canonical line ("gemm batch=1 m=64 n=32 k=16 a=row b=col"). Epilogues
// (bias, activation, fused consumers) are not part of it: they do not change
// which knobs are fastest or valid.
// `problem` with a node's 16-bit storage types (LowerTarget::storage16)
// appended (" storage=f16"), as every template's tuning site spells it, and
// for an f32 node the narrower type its products may use
// (LowerTarget::f32_products: " products=tf32").
std::string with_storage(std::string problem, const std::string& storage16, const std::string& f32_products = "");
// The 16-bit storage types of a node with these tensors ("" for none).
std::string storage16_of(std::span<const graph::TensorType> inputs, std::span<const graph::TensorType> outputs);
std::string gemm_problem_text(const shaders::GemmProblem& problem);
std::string conv_problem_text(const shaders::ConvProblem& problem);
std::string attention_problem_text(const shaders::AttentionProblem& problem);

// Builds the GEMM (or convolution) into `kernel` with the knobs the target's
// override names for this problem, else the heuristic's; names the kernel
// "<name_prefix>_<knobs>" and records its tuning site. An override that does
// not parse, does not fit the target (workgroup size, shared memory) or
// fails to build is logged as a warning and the heuristic's knobs are used.
void build_tuned_gemm(kir::Kernel& kernel, const shaders::GemmProblem& problem, const LowerTarget& target,
                      const std::string& name_prefix);
void build_tuned_conv(kir::Kernel& kernel, const shaders::ConvProblem& problem, const LowerTarget& target);
void build_tuned_attention(kir::Kernel& kernel, const shaders::AttentionProblem& problem, const LowerTarget& target);

// The knob text `target`'s overrides (else its pins by problem, else the
// pin of the node being lowered, for a site of `template_name`) hold for
// `problem`, if any, and what lowering logs when it ignores one (it does not
// parse, fit or build): a warning for the user's override, a debug line for
// a pin.
std::optional<std::string> knob_override(const LowerTarget& target, std::string_view template_name,
                                         const std::string& problem);
// Whether knob_override()'s answer is an override (the user's or the
// autotuner's: TuningSite::overridden) rather than a shape set's pin, which
// builds the kernel its set has, under the set kernel's name.
bool is_users_override(const LowerTarget& target, const std::string& problem);
void warn_override_ignored(const LowerTarget& target, const std::string& problem, const std::string& knobs,
                           const std::string& why);

// Why `knobs` cannot run on `target`, or nullopt: the target's limits that
// lowering knows (invocations per workgroup, shared memory).
std::optional<std::string> gemm_knobs_unfit(const shaders::GemmKnobs& knobs, const LowerTarget& target);
std::optional<std::string> conv_plan_unfit(const shaders::ConvPlan& plan, const shaders::ConvProblem& problem,
                                           const LowerTarget& target);

// The geometry of a Conv node (no buffers, no epilogue), for checking a
// convolution plan against it; throws Error(Unsupported) when the node cannot
// be lowered.
shaders::ConvProblem conv_problem_of(const graph::Node& node, std::span<const graph::TensorType> inputs,
                                     std::span<const graph::TensorType> outputs);

}  // namespace kiln::lower

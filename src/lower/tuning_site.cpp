#include "src/lower/tuning_site.h"

#include "shaders/gemm_shared.h"
#include "shaders/heuristic.h"
#include "src/base/log.h"

#include <kiln/error.h>

namespace kiln::lower {

namespace {

std::string strides(std::int64_t first, std::int64_t second) {
  return "s" + std::to_string(first) + "." + std::to_string(second);
}

// An operand's layout: "row" (contiguous along its second index), "col"
// (along its first), else its two strides.
std::string layout(std::int64_t first_stride, std::int64_t second_stride, std::int64_t first_extent,
                   std::int64_t second_extent) {
  if (second_stride == 1 && first_stride == second_extent) return "row";
  if (first_stride == 1 && second_stride == first_extent) return "col";
  return strides(first_stride, second_stride);
}

std::string pair(std::int64_t a, std::int64_t b) { return std::to_string(a) + "x" + std::to_string(b); }

// Builds with the override when it parses, fits and builds; else with the
// heuristic's knobs. `parse`, `unfit` and `build` are the template's.
template <class Knobs, class Parse, class Unfit, class Build>
Knobs build_with_override(kir::Kernel& kernel, const LowerTarget& target, const char* template_name,
                          const std::string& problem, const Knobs& heuristic, Parse parse, Unfit unfit, Build build,
                          bool& overridden) {
  overridden = false;
  if (const std::optional<std::string> wanted = knob_override(target, template_name, problem)) {
    try {
      const Knobs knobs = parse(*wanted);
      if (auto why = unfit(knobs)) throw_error(ErrorKind::InvalidArgument, *why);
      kir::Kernel trial = kernel;  // a failed build leaves `kernel` as it was
      build(trial, knobs);
      kernel = std::move(trial);
      overridden = is_users_override(target, problem);
      return knobs;
    } catch (const Error& error) {
      warn_override_ignored(target, problem, *wanted, error.what());
    }
  }
  build(kernel, heuristic);
  return heuristic;
}

}  // namespace

std::optional<std::string> knob_override(const LowerTarget& target, std::string_view template_name,
                                         const std::string& problem) {
  for (const auto& map : {target.knob_overrides, target.knob_pins}) {
    if (!map) continue;
    if (auto it = map->find(problem); it != map->end()) return it->second;
  }
  if (target.node_pin.template_name == template_name) return target.node_pin.knobs;
  return std::nullopt;
}

bool is_users_override(const LowerTarget& target, const std::string& problem) {
  return target.knob_overrides && target.knob_overrides->contains(problem);
}

void warn_override_ignored(const LowerTarget& target, const std::string& problem, const std::string& knobs,
                           const std::string& why) {
  if (is_users_override(target, problem))
    base::log(base::LogLevel::warning, "knob override '" + knobs + "' for '" + problem + "' ignored: " + why);
  else
    base::log(base::LogLevel::debug,
                 "the shape set's pinned knobs '" + knobs + "' do not fit '" + problem + "' (" + why +
                     "): the heuristic's knobs stay");
}

std::string gemm_problem_text(const shaders::GemmProblem& p) {
  std::string text = "gemm batch=" + std::to_string(p.batch) + " m=" + std::to_string(p.m) +
                     " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k) +
                     " a=" + layout(p.a_row_stride, p.a_k_stride, p.m, p.k) +
                     " b=" + layout(p.b_k_stride, p.b_col_stride, p.k, p.n);
  if (p.y_row_stride != p.n || p.y_col_stride != 1) text += " y=" + strides(p.y_row_stride, p.y_col_stride);
  // Base multiples decide where vector loads apply.
  if (p.bases)
    text += " bases=" + std::to_string(p.a_base_multiple) + "." + std::to_string(p.b_base_multiple) + "." +
            std::to_string(p.y_base_multiple);
  if (p.gather_b) text += " gather_b=" + std::to_string(p.gather_b->taps);
  return text;
}

std::string conv_problem_text(const shaders::ConvProblem& p) {
  return "conv batch=" + std::to_string(p.batch) + " in=" + std::to_string(p.in_channels) + "x" +
         pair(p.in_h, p.in_w) + " out=" + std::to_string(p.out_channels) + "x" + pair(p.out_h, p.out_w) +
         " groups=" + std::to_string(p.groups) + " kernel=" + pair(p.kernel_h, p.kernel_w) +
         " stride=" + pair(p.stride_h, p.stride_w) + " dilation=" + pair(p.dilation_h, p.dilation_w) +
         " pad=" + pair(p.pad_top, p.pad_left) + " weights=" + (p.packed_weights ? "oihw4o" : "oihw");
}

std::string attention_problem_text(const shaders::AttentionProblem& p) {
  std::string text = "attention heads=" + std::to_string(p.heads) + " lq=" + std::to_string(p.lq) +
                     " lk=" + std::to_string(p.lk) + " d=" + std::to_string(p.d) + " dv=" + std::to_string(p.dv) +
                     " k=" + (p.k_transposed ? "kt" : "k");
  if (p.mask.index >= 0) text += " mask=" + strides(p.mask_row_stride, p.mask_key_stride);
  return text;
}

std::optional<std::string> gemm_knobs_unfit(const shaders::GemmKnobs& knobs, const LowerTarget& target) {
  if (auto matrix = shaders::matrix_knobs_unfit(knobs, target)) return matrix;
  if (knobs.workgroup_size > target.max_workgroup_invocations)
    return "workgroup of " + std::to_string(knobs.workgroup_size) + " invocations exceeds the target's " +
           std::to_string(target.max_workgroup_invocations);
  if (knobs.shared_k_tile != 0) {
    const std::uint64_t bytes = shaders::detail::shared_gemm_bytes(knobs);
    if (bytes > target.max_shared_memory_bytes)
      return std::to_string(bytes) + " bytes of shared memory exceed the target's " +
             std::to_string(target.max_shared_memory_bytes);
  }
  return std::nullopt;
}

std::optional<std::string> conv_plan_unfit(const shaders::ConvPlan& plan, const shaders::ConvProblem& problem,
                                           const LowerTarget& target) {
  if (!shaders::conv_algorithm_applies(problem, plan.algorithm))
    return std::string("algorithm ") + shaders::conv_algorithm_name(plan.algorithm) + " does not apply to " +
           conv_problem_text(problem);
  const bool gemm = plan.algorithm == shaders::ConvAlgorithm::gemm_1x1 ||
                    plan.algorithm == shaders::ConvAlgorithm::implicit_gemm;
  if (plan.algorithm == shaders::ConvAlgorithm::implicit_gemm && plan.gemm.swap_operands)
    return std::string("implicit_gemm gathers B, which cannot trade places with A (swap)");
  if (gemm) return gemm_knobs_unfit(plan.gemm, target);
  if (plan.conv.workgroup_size > target.max_workgroup_invocations)
    return "workgroup of " + std::to_string(plan.conv.workgroup_size) + " invocations exceeds the target's " +
           std::to_string(target.max_workgroup_invocations);
  if (plan.algorithm == shaders::ConvAlgorithm::depthwise && plan.conv.tile_channels != 1)
    return "depthwise convolutions take tile_channels 1";
  return std::nullopt;
}

std::string with_storage(std::string problem, const std::string& storage16, const std::string& f32_products) {
  if (!storage16.empty()) problem += " storage=" + storage16;
  else if (!f32_products.empty()) problem += " products=" + f32_products;
  return problem;
}

void build_tuned_gemm(kir::Kernel& kernel, const shaders::GemmProblem& problem, const LowerTarget& target,
                      const std::string& name_prefix) {
  const std::string text = with_storage(gemm_problem_text(problem), target.storage16, target.f32_products);
  const shaders::GemmKnobs heuristic =
      shaders::choose_gemm_knobs(problem.batch, problem.m, problem.n, problem.k, target);
  bool overridden = false;
  const shaders::GemmKnobs knobs = build_with_override(
      kernel, target, "gemm", text, heuristic, shaders::parse_gemm_knobs,
      [&](const shaders::GemmKnobs& k) { return gemm_knobs_unfit(k, target); },
      [&](kir::Kernel& into, const shaders::GemmKnobs& k) { shaders::build_gemm(into, problem, k); }, overridden);
  kernel.name = name_prefix + "_" + shaders::to_string(knobs);
  kernel.tuning_site =
      kir::TuningSite{"gemm", shaders::kGemmTemplateVersion, text, shaders::to_string(knobs), overridden};
}

void build_tuned_conv(kir::Kernel& kernel, const shaders::ConvProblem& problem, const LowerTarget& target) {
  const std::string text = with_storage(conv_problem_text(problem), target.storage16, target.f32_products);
  bool overridden = false;
  const shaders::ConvPlan plan = build_with_override(
      kernel, target, "conv", text, shaders::choose_conv_plan(problem, target), shaders::parse_conv_plan,
      [&](const shaders::ConvPlan& p) { return conv_plan_unfit(p, problem, target); },
      [&](kir::Kernel& into, const shaders::ConvPlan& p) { shaders::build_conv(into, problem, p); }, overridden);
  const bool uses_gemm_knobs =
      plan.algorithm == shaders::ConvAlgorithm::gemm_1x1 || plan.algorithm == shaders::ConvAlgorithm::implicit_gemm;
  kernel.name = std::string("conv2d_") + shaders::conv_algorithm_name(plan.algorithm) + "_" +
                (uses_gemm_knobs ? shaders::to_string(plan.gemm) : shaders::to_string(plan.conv)) +
                (problem.packed_weights ? "_oihw4o" : "");
  kernel.tuning_site =
      kir::TuningSite{"conv", shaders::kConvTemplateVersion, text, shaders::to_string(plan), overridden};
}

void build_tuned_attention(kir::Kernel& kernel, const shaders::AttentionProblem& problem,
                           const LowerTarget& target) {
  const std::string text = with_storage(attention_problem_text(problem), target.storage16);
  bool overridden = false;
  const shaders::AttentionKnobs knobs = build_with_override(
      kernel, target, "attention", text, shaders::choose_attention_knobs(problem, target.cpu_device()),
      shaders::parse_attention_knobs,
      [&](const shaders::AttentionKnobs& k) -> std::optional<std::string> {
        if (k.workgroup_size > target.max_workgroup_invocations)
          return "workgroup of " + std::to_string(k.workgroup_size) + " invocations exceeds the target's " +
                 std::to_string(target.max_workgroup_invocations);
        return std::nullopt;
      },
      [&](kir::Kernel& into, const shaders::AttentionKnobs& k) { shaders::build_attention(into, problem, k); },
      overridden);
  kernel.name = "attention_" + shaders::to_string(knobs);
  kernel.tuning_site =
      kir::TuningSite{"attention", shaders::kAttentionTemplateVersion, text, shaders::to_string(knobs), overridden};
}

}  // namespace kiln::lower

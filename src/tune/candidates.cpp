#include "src/base/check.h"
#include "src/lower/target_policy.h"
#include "src/tune/candidates.h"
#include "src/tune/search.h"

#include "shaders/attention_template.h"
#include "shaders/heuristic.h"
#include "src/lower/tuning_site.h"
#include "src/lower/workgroup_site.h"
#include "src/render/cstyle.h"

#include <kiln/error.h>

#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>

namespace kiln::tune {

namespace {

// Why a CPU device gets no shared-memory tiling: it runs a workgroup's
// invocations one after another, so every barrier switches between all of
// them, and each such candidate costs the search a timeout.
constexpr const char* kSharedOnCpu =
    "shared-memory tiling on a CPU device: its invocations run one after another, so every barrier switches "
    "between all of them";

// The GEMM configurations worth trying on `target`: its heuristic's space
// and the shared-memory tilings a GPU with room for them would get (none on
// a CPU device: `filtered` says why).
std::vector<shaders::GemmKnobs> gemm_space(const lower::LowerTarget& target,
                                           std::vector<std::pair<std::string, std::string>>& filtered) {
  std::vector<shaders::GemmKnobs> space = shaders::gemm_knob_space(target);
  if (target.cpu_device()) {
    filtered.emplace_back("shared-memory tilings (_s<N>)", kSharedOnCpu);
    return space;
  }
  lower::LowerTarget roomy = target;
  roomy.max_workgroup_invocations = std::max<std::uint32_t>(target.max_workgroup_invocations, 1024);
  roomy.max_shared_memory_bytes = std::max<std::uint64_t>(target.max_shared_memory_bytes, 65536);
  for (const shaders::GemmKnobs& knobs : shaders::gemm_knob_space(roomy))
    if (knobs.shared_k_tile != 0) space.push_back(knobs);
  return space;
}

// Swapped operands (GemmKnobs::swap_operands) turn the kernel's wide side
// to Y's rows: worth measuring only where Y has more rows than columns.
constexpr const char* kSwapNotTaller = "swapped operands (_swap): Y has no more rows than columns";

// A GEMM problem text's "m=" or "n=" value (lower::gemm_problem_text); 0 if absent.
std::int64_t problem_extent(const std::string& problem, const std::string& field) {
  const std::size_t at = problem.find(" " + field + "=");
  return at == std::string::npos ? 0 : std::atoll(problem.c_str() + at + field.size() + 2);
}

// The site's knob space for `target`; `heads` receives the heuristic's own
// knobs for each algorithm it did not choose, where the template has them.
std::vector<std::string> space_of(const Site& site, const lower::LowerTarget& target,
                                  std::vector<std::pair<std::string, std::string>>& filtered,
                                  std::vector<std::string>& heads) {
  std::vector<std::string> texts;
  if (site.id.template_name == "gemm") {
    const bool taller = problem_extent(site.id.problem, "m") > problem_extent(site.id.problem, "n");
    for (const shaders::GemmKnobs& knobs : gemm_space(target, filtered)) {
      if (auto why = lower::gemm_knobs_unfit(knobs, target)) filtered.emplace_back(shaders::to_string(knobs), *why);
      else if (knobs.swap_operands && !taller) filtered.emplace_back(shaders::to_string(knobs), kSwapNotTaller);
      else texts.push_back(shaders::to_string(knobs));
    }
  } else if (site.id.template_name == "conv") {
    std::vector<graph::TensorType> inputs;
    for (const std::optional<graph::TensorType>& type : site.inputs) inputs.push_back(type.value_or(graph::TensorType{}));
    const shaders::ConvProblem problem = lower::conv_problem_of(site.node, inputs, site.outputs);
    const bool taller = problem.out_channels_per_group() > problem.out_h * problem.out_w;
    std::vector<shaders::ConvPlan> plans = shaders::conv_plan_space(target);
    for (const shaders::GemmKnobs& knobs : gemm_space(target, filtered))
      if (knobs.shared_k_tile != 0)
        for (shaders::ConvAlgorithm algorithm : {shaders::ConvAlgorithm::gemm_1x1, shaders::ConvAlgorithm::implicit_gemm})
          plans.push_back({algorithm, knobs, {}});
    for (shaders::ConvAlgorithm algorithm : {shaders::ConvAlgorithm::gemm_1x1, shaders::ConvAlgorithm::implicit_gemm,
                                             shaders::ConvAlgorithm::direct, shaders::ConvAlgorithm::depthwise})
      if (shaders::conv_algorithm_applies(problem, algorithm))
        heads.push_back(shaders::to_string(shaders::choose_conv_plan(problem, algorithm, target)));
    for (const shaders::ConvPlan& plan : plans) {
      // A plan whose algorithm does not apply is not a candidate at all (not a capability limit).
      if (!shaders::conv_algorithm_applies(problem, plan.algorithm)) continue;
      if (auto why = lower::conv_plan_unfit(plan, problem, target)) filtered.emplace_back(shaders::to_string(plan), *why);
      else if (plan.gemm.swap_operands && !taller) filtered.emplace_back(shaders::to_string(plan), kSwapNotTaller);
      else texts.push_back(shaders::to_string(plan));
    }
  } else if (site.id.template_name == "attention") {
    // Query rows up to Lq, output-column blocks that split Dv evenly (in vec4 multiples where Dv allows).
    const Shape& y = site.outputs.at(0).shape;
    const std::int64_t lq = y.at(y.size() - 2), dv = y.back();
    std::set<std::uint32_t> column_blocks;
    for (std::int64_t blocks = 1; blocks <= 4; ++blocks) {
      std::int64_t columns = (dv + blocks - 1) / blocks;
      if (dv % 4 == 0) columns = (columns + 3) / 4 * 4;
      if (columns <= 128) column_blocks.insert(static_cast<std::uint32_t>(columns));
    }
    for (std::uint32_t rows : {1u, 2u, 4u, 8u})
      for (std::uint32_t columns : column_blocks)
        for (std::uint32_t key_block : {1u, 2u, 4u, 8u})
          for (std::uint32_t vector : {4u, 1u}) {
            if (rows > 1 && rows > lq) continue;
            shaders::AttentionKnobs knobs;
            knobs.rows = rows, knobs.columns = columns, knobs.key_block = key_block, knobs.vector_width = vector;
            texts.push_back(shaders::to_string(knobs));
          }
  } else if (const char* kind = lower::workgroup_template(site.node.op); kind && site.id.template_name == kind) {
    // Pointwise and reduction kernels: only the workgroup size.
    for (std::uint32_t size : lower::workgroup_size_space(target)) {
      const std::string text = lower::workgroup_knob_text(size);
      if (auto why = lower::workgroup_unfit(size, target)) filtered.emplace_back(text, *why);
      else texts.push_back(text);
    }
  } else {
    throw_error(ErrorKind::Unsupported, "the autotuner has no knob space for template '" + site.id.template_name + "'");
  }
  return texts;
}

}  // namespace

int knob_distance(const std::string& a, const std::string& b) {
  const std::set<std::string> fa = knob_fields(a), fb = knob_fields(b);
  std::vector<std::string> only_a, only_b;
  std::set_difference(fa.begin(), fa.end(), fb.begin(), fb.end(), std::back_inserter(only_a));
  std::set_difference(fb.begin(), fb.end(), fa.begin(), fa.end(), std::back_inserter(only_b));
  return static_cast<int>(std::max(only_a.size(), only_b.size()));
}

CandidateList candidates(const Site& site, const backend::Backend& backend, const backend::TargetDesc& target,
                         std::uint64_t seed) {
  const lower::LowerTarget lower_target = lower::target_policy(target).lower;
  // Buffers are the site's, whatever the knobs: too large for the target is no candidate at all.
  std::vector<graph::TensorType> types = site.outputs;
  for (const std::optional<graph::TensorType>& type : site.inputs)
    if (type) types.push_back(*type);
  for (const graph::TensorType& type : types) {
    const auto bytes = static_cast<std::uint64_t>(num_elements(type.shape)) * dtype_size(type.dtype);
    KILN_CHECK(target.max_buffer_bytes == 0 || bytes <= target.max_buffer_bytes, ErrorKind::Unsupported,
               "tuning site '" + site.node.name + "': " + graph::type_str(type) + " needs " + std::to_string(bytes) +
                   " bytes; " + target.device_name + " binds at most " + std::to_string(target.max_buffer_bytes));
  }
  CandidateList list;
  const kir::Kernel chosen = site.lower(lower_target);
  KILN_CHECK(chosen.tuning_site.has_value(), ErrorKind::Internal,
             "tuning site '" + site.node.name + "' lowers to a kernel without a tuning site");
  const std::string heuristic = chosen.tuning_site->knobs;

  // The space as lowering sees this node: its 16-bit storage types and its
  // f32 products' precision decide which matrix instructions it may use.
  lower::LowerTarget node_target = lower_target;
  std::vector<graph::TensorType> input_types;
  for (const std::optional<graph::TensorType>& type : site.inputs)
    if (type) input_types.push_back(*type);
  node_target.storage16 = lower::storage16_of(input_types, site.outputs);
  if (node_target.storage16.empty()) node_target.f32_products = site.node.attrs.get_string("f32_products", "");
  std::vector<std::string> heads;
  std::vector<std::string> texts = space_of(site, node_target, list.filtered, heads);
  texts.push_back(heuristic);
  std::sort(texts.begin(), texts.end());
  texts.erase(std::unique(texts.begin(), texts.end()), texts.end());

  // Each family's head (search.h: a family is a set of knobs; a convolution
  // algorithm is one): the heuristic's own knobs for it where the template
  // has them, else its member nearest to the heuristic's (ties: seeded).
  const auto seeded_hash = [seed](const std::string& text) {
    return XXH3_64bits_withSeed(text.data(), text.size(), seed);
  };
  std::map<std::string, std::string> head_of;  // family -> head
  std::set<std::string> fixed = {heuristic};   // heads no nearer member replaces
  head_of[knob_family(heuristic)] = heuristic;
  for (const std::string& head : heads)
    if (std::binary_search(texts.begin(), texts.end(), head) && head_of.emplace(knob_family(head), head).second)
      fixed.insert(head);
  for (const std::string& text : texts) {
    auto [it, added] = head_of.emplace(knob_family(text), text);
    if (added || fixed.count(it->second) != 0) continue;
    const int d = knob_distance(text, heuristic), nearest = knob_distance(it->second, heuristic);
    if (d < nearest || (d == nearest && seeded_hash(text) < seeded_hash(it->second))) it->second = text;
  }
  std::set<std::string> family_heads;
  for (const auto& [family, head] : head_of) family_heads.insert(head);

  // (group, seeded hash, text): the heuristic's, the other families' heads,
  // the heuristic's neighbours, then the rest.
  std::vector<std::tuple<int, std::uint64_t, std::string>> order;
  for (const std::string& text : texts) {
    const int group = text == heuristic                  ? 0
                      : family_heads.count(text) != 0    ? 1
                      : knob_distance(text, heuristic) <= 1 ? 2
                                                            : 3;
    order.emplace_back(group, seeded_hash(text), text);
  }
  std::sort(order.begin(), order.end());

  for (const auto& [group, hash, text] : order) {
    // What the target cannot run, judged on the kernel this candidate builds.
    const kir::Kernel kernel = site.lower(lower_target, text);
    if (group != 0 && (!kernel.tuning_site || !kernel.tuning_site->overridden || kernel.tuning_site->knobs != text)) {
      list.filtered.emplace_back(text, "lowering did not build these knobs");
      continue;
    }
    if (auto why = backend.supports(render::kernel_requirements(kernel), target)) {
      if (group == 0) list.knobs.push_back(text);  // the heuristic's stays first: its failure is reported, not hidden
      else list.filtered.emplace_back(text, *why);
      continue;
    }
    list.knobs.push_back(text);
  }
  return list;
}

}  // namespace kiln::tune

#include "src/compile/plan.h"

#include "src/base/check.h"
#include "src/base/log.h"
#include "src/fuse/schedule.h"
#include "src/kernel/parameterise.h"
#include "src/lower/target_policy.h"
#include "src/render/cstyle.h"

#include <kiln/error.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <set>

namespace kiln::compiler {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

constexpr const char* kDynamicInput = "input shape depends on data";

// The reason without value names, so that breaks of one op group together.
std::string reason_kind(const std::string& reason) {
  return reason.starts_with(kDynamicInput) ? std::string(kDynamicInput) : reason;
}

std::vector<SiteKnobs> site_knobs(const graph::Graph& g, const fuse::KernelPlan& kernel_plan) {
  std::vector<SiteKnobs> sites;
  for (const fuse::PlanStep& step : kernel_plan.steps)
    if (!step.host && step.kernel->kernel.tuning_site) {
      SiteKnobs site{step.kernel->kernel.tuning_site->template_name, step.kernel->kernel.tuning_site->knobs, {}};
      for (graph::NodeId node : step.nodes) site.nodes.push_back(g.node(node).name);
      sites.push_back(std::move(site));
    }
  return sites;
}

// Whether every node of `g` has a name of its own (pins by name need it).
bool names_are_unique(const graph::Graph& g) {
  std::set<std::string_view> names;
  for (const graph::Node& node : g.nodes())
    if (node.name.empty() || !names.insert(node.name).second) return false;
  return true;
}

// The pins by node name (LowerTarget::node_pins): every node of a pinned
// site's dispatch takes its template's knobs (the node whose lowering makes
// a site of that template uses them). Null where some pin names no nodes (a
// plan file's from before they were kept) or a node would take two.
std::shared_ptr<const lower::NodeKnobPins> pins_by_node(const std::vector<SiteKnobs>& pins) {
  auto by_node = std::make_shared<lower::NodeKnobPins>();
  for (const SiteKnobs& pin : pins) {
    if (pin.nodes.empty()) return nullptr;
    const lower::KnobPin knobs{pin.template_name, pin.knobs};
    for (const std::string& node : pin.nodes)
      if (const auto [it, added] = by_node->emplace(node, knobs); !added && it->second != knobs) return nullptr;
  }
  return by_node;
}

// fuse::plan_kernels() with the pinned knobs: by node name where the pins
// name their nodes (one lowering); else lowered with the heuristic's knobs
// and, if some tuning site's knobs differ from the pinned ones (the k-th
// site of a template against the k-th pinned of it), again with those as
// knob pins (LowerTarget::knob_pins). The user's overrides come first.
// Pins that do not fit are dropped by lowering (a debug line, not a
// warning: the user set none of them) and the heuristic's knobs stay.
fuse::KernelPlan plan_pinned(const graph::Graph& g, fuse::PlanOptions options, const std::vector<SiteKnobs>& pins) {
  if (!pins.empty() && names_are_unique(g))
    if (std::shared_ptr<const lower::NodeKnobPins> by_node = pins_by_node(pins)) {
      options.target.node_pins = std::move(by_node);
      return fuse::plan_kernels(g, options);
    }
  fuse::KernelPlan planned = fuse::plan_kernels(g, options);
  if (pins.empty()) return planned;
  std::map<std::string, std::vector<const std::string*>> pinned;
  for (const SiteKnobs& pin : pins) pinned[pin.template_name].push_back(&pin.knobs);
  auto overrides = std::make_shared<lower::KnobOverrides>();
  std::map<std::string, std::size_t> seen;
  bool changed = false;
  for (const fuse::PlanStep& step : planned.steps) {
    if (step.host || !step.kernel->kernel.tuning_site) continue;
    const kir::TuningSite& site = *step.kernel->kernel.tuning_site;
    const std::size_t k = seen[site.template_name]++;
    const auto it = pinned.find(site.template_name);
    if (it == pinned.end() || k >= it->second.size() || *it->second[k] == site.knobs) continue;
    changed = overrides->emplace(site.problem, *it->second[k]).second || changed;
  }
  if (!changed) return planned;
  options.target.knob_pins = std::move(overrides);
  return fuse::plan_kernels(g, options);
}

// A set kernel a new extent's kernel may take, with its rendered source
// (null: a generalised kernel this plan made, to be rendered).
struct SetKernel {
  const kir::Kernel* kernel = nullptr;
  const RenderedKernel* rendered = nullptr;
};

// A new extent of a dynamic shape set: each step kernel from the set's
// kernels (PlanRequest::set_plans), without a probe. A kernel takes the
// set's kernel it is at other parameter values, else a set kernel of its
// structure with more parameters (its source new, compiled once: later
// extents take it), else stays as lowered here; those are parameterised among
// themselves. Fills `report` as parameterise() would and `rendered` (by step
// kernel: the taken kernel's source, else null); returns how each step
// kernel came.
std::vector<SetKernelUse> take_set_kernels(const std::vector<kir::Kernel*>& step_kernels,
                                           const std::vector<std::shared_ptr<const Plan>>& set_plans,
                                           const kir::ParameteriseOptions& options, kir::ParameteriseReport& report,
                                           std::vector<const RenderedKernel*>& rendered) {
  std::map<std::string, std::vector<SetKernel>> by_name;
  for (const std::shared_ptr<const Plan>& set_plan : set_plans)
    if (set_plan)
      for (std::size_t k = 0; k < set_plan->kernels.size(); ++k)
        by_name[set_plan->kernels[k].name].push_back(
            {&set_plan->kernels[k], k < set_plan->rendered.size() ? &set_plan->rendered[k] : nullptr});
  // Kernels with parameters serve more extents: they are tried first.
  for (auto& [name, candidates] : by_name)
    std::stable_partition(candidates.begin(), candidates.end(),
                          [](const SetKernel& k) { return !k.kernel->params.empty(); });

  const std::size_t n = step_kernels.size();
  report = {};
  report.same_source_as.resize(n);
  rendered.assign(n, nullptr);
  std::vector<SetKernelUse> use(n, SetKernelUse::specialised);
  std::map<const kir::Kernel*, std::size_t> first_step_of;  // a candidate and the first step that took it
  std::deque<kir::Kernel> generalised;                      // candidates too: later steps may take them
  std::vector<kir::Kernel*> specialised;
  std::vector<std::size_t> specialised_step;
  for (std::size_t i = 0; i < n; ++i) {
    kir::Kernel& step = *step_kernels[i];
    report.same_source_as[i] = i;
    std::vector<SetKernel>* candidates = nullptr;
    if (auto it = by_name.find(step.name); it != by_name.end()) candidates = &it->second;
    const SetKernel* taken = nullptr;
    std::vector<std::int32_t> params;
    for (std::size_t c = 0; candidates && c < candidates->size() && !taken; ++c)
      if (std::optional<std::vector<std::int32_t>> matched = kir::match_parameters(*(*candidates)[c].kernel, step)) {
        taken = &(*candidates)[c];
        params = std::move(*matched);
      }
    if (taken) {
      // Its own extent and tuning site (the problem is this extent's shape).
      const std::int64_t global_size = step.global_size;
      std::optional<kir::TuningSite> site = std::move(step.tuning_site);
      step = *taken->kernel;
      step.params = std::move(params);
      step.global_size = global_size;
      step.tuning_site = std::move(site);
      report.same_source_as[i] = first_step_of.try_emplace(taken->kernel, i).first->second;
      rendered[i] = taken->rendered;
      use[i] = SetKernelUse::taken;
      continue;
    }
    for (std::size_t c = 0; candidates && c < candidates->size(); ++c)
      if (std::optional<kir::Kernel> general =
              kir::generalise_parameters(*(*candidates)[c].kernel, step, options.max_params)) {
        step = std::move(*general);
        generalised.push_back(step);
        candidates->insert(candidates->begin(), SetKernel{&generalised.back(), nullptr});
        first_step_of.emplace(&generalised.back(), i);
        use[i] = SetKernelUse::generalised;
        break;
      }
    if (use[i] == SetKernelUse::specialised) {
      specialised.push_back(&step);
      specialised_step.push_back(i);
    }
  }
  const kir::ParameteriseReport own = kir::parameterise(specialised, options);
  for (std::size_t j = 0; j < specialised.size(); ++j)
    report.same_source_as[specialised_step[j]] = specialised_step[own.same_source_as[j]];
  report.groups = own.groups;
  report.groups_over_limit = own.groups_over_limit;
  report.kernels = own.kernels;
  for (std::size_t i = 0; i < n; ++i) {
    if (use[i] == SetKernelUse::specialised) continue;
    ++report.kernels;
    report.max_params_used = std::max(report.max_params_used, static_cast<int>(step_kernels[i]->params.size()));
  }
  report.max_params_used = std::max(report.max_params_used, own.max_params_used);
  return use;
}

// Steps: lowering, fusion, parameterisation; fills plan.steps, kernels, breaks.
// `probe` gives the probe twin's graph after passes (null: no dynamic dims);
// it is asked only when `set_plans` do not cover every kernel. Returns, by
// kernel index, the set's rendered source of each kernel taken from the
// set (null: to be rendered).
std::vector<const RenderedKernel*> plan_kernels(Plan& plan, const backend::Backend& backend,
                                                const lower::TargetPolicy& policy,
                                                const std::function<const graph::Graph*()>& probe,
                                                bool spatial_extents_vary, const std::vector<SiteKnobs>& pinned_sites,
                                                const std::vector<std::shared_ptr<const Plan>>& set_plans) {
  const graph::Graph& g = *plan.graph;
  const backend::TargetDesc& target = plan.target;
  fuse::PlanOptions options;
  options.fuse = plan.compiled && plan.settings.flag("fuse");
  options.max_fused_nodes = static_cast<std::size_t>(std::max<std::int64_t>(1, plan.settings.integer("max_fused_nodes")));
  options.max_kernel_buffers = policy.max_kernel_buffers;
  options.target = policy.lower;
  options.target.spatial_extents_vary = spatial_extents_vary;
  if (plan.autotune) options.target.knob_overrides = plan.autotune->overrides;
  options.kernel_unsupported = [&](const kir::Kernel& kernel) -> std::optional<std::string> {
    if (auto why = backend.supports(render::kernel_requirements(kernel), target))
      return "kernel '" + kernel.name + "' cannot run on " + target.device_name + ": " + *why;
    return std::nullopt;
  };
  const auto start = Clock::now();
  const bool dynamic = static_cast<bool>(probe);
  const bool from_set = dynamic && !set_plans.empty() && plan.settings.flag("parameterise");
  // A new extent's kernels are mostly the set's, checked when it was
  // planned: only the others are checked, below.
  options.verify_fused = !from_set;
  // f16 arithmetic only where the target runs it natively; elsewhere the
  // setting changes nothing (explain says so).
  options.f16_arithmetic = plan.settings.flag("f16_arithmetic") && !f16_arithmetic_unavailable(backend, target);
  fuse::KernelPlan kernel_plan = dynamic ? plan_pinned(g, options, pinned_sites) : fuse::plan_kernels(g, options);
  plan.site_knobs = site_knobs(g, kernel_plan);
  base::log(base::LogLevel::debug, plan.model_name + ": lowered " + std::to_string(kernel_plan.kernel_nodes) +
                                             " nodes and fused them into " + std::to_string(kernel_plan.steps.size()) +
                                             " steps in " + std::to_string(static_cast<int>(ms_since(start))) + " ms");
  plan.root = std::move(kernel_plan.root);
  plan.fused_away = std::move(kernel_plan.fused_away);
  plan.kernel_nodes = kernel_plan.kernel_nodes;

  std::vector<kir::Kernel*> step_kernels;
  for (fuse::PlanStep& step : kernel_plan.steps)
    if (!step.host) step_kernels.push_back(&step.kernel->kernel);
  const auto parameterise_start = Clock::now();
  // New extents of a shape set: its kernels, and no probe lowered.
  std::vector<SetKernelUse> use_of_step;
  std::vector<const RenderedKernel*> rendered_of_step;
  if (from_set) {
    use_of_step = take_set_kernels(step_kernels, set_plans, parameterise_options(policy, plan.settings),
                                   plan.parameterise_report, rendered_of_step);
    for (std::size_t i = 0; i < step_kernels.size(); ++i)
      if (use_of_step[i] != SetKernelUse::taken) kir::verify(*step_kernels[i]);
    plan.dynamic_kernels = plan.parameterise_report.kernels;
    const auto count = [&](SetKernelUse u) { return std::to_string(std::ranges::count(use_of_step, u)); };
    base::log(base::LogLevel::debug, plan.model_name + ": of " + std::to_string(step_kernels.size()) +
                                               " kernels, " + count(SetKernelUse::taken) + " are the shape set's, " +
                                               count(SetKernelUse::generalised) + " the set's with more parameters, " +
                                               count(SetKernelUse::specialised) + " of their own; no probe lowered");
  } else if (dynamic && plan.settings.flag("parameterise")) {
    fuse::KernelPlan probe_plan = plan_pinned(*probe(), options, plan.site_knobs);
    std::vector<kir::Kernel*> probe_kernels;
    for (fuse::PlanStep& step : probe_plan.steps)
      if (!step.host) probe_kernels.push_back(&step.kernel->kernel);
    plan.parameterise_report = kir::parameterise_with_probes(
        step_kernels, probe_kernels, parameterise_options(policy, plan.settings), &plan.dynamic_kernels);
  } else {
    plan.parameterise_report = parameterise_for_target(step_kernels, policy, plan.settings);
  }
  const kir::ParameteriseReport& report = plan.parameterise_report;
  base::log(base::LogLevel::debug,
               "parameterised " + std::to_string(report.kernels) + " kernels of " + plan.model_name + " into " +
                   std::to_string(report.groups) + " shared sources (up to " + std::to_string(report.max_params_used) +
                   " parameters; " + std::to_string(report.groups_over_limit) + " groups over the limit) in " +
                   std::to_string(static_cast<int>(ms_since(parameterise_start))) + " ms");
  // Kernels parameterisation made alike (a transformer's blocks) are kept,
  // and later rendered and compiled, once.
  std::vector<std::size_t> kernel_index(step_kernels.size());
  std::vector<const RenderedKernel*> rendered;
  for (std::size_t i = 0; i < step_kernels.size(); ++i) {
    const std::size_t same = report.same_source_as.size() == step_kernels.size() ? report.same_source_as[i] : i;
    if (same != i) {
      kernel_index[i] = kernel_index[same];
      continue;
    }
    kernel_index[i] = plan.kernels.size();
    plan.kernels.push_back(*step_kernels[i]);
    rendered.push_back(rendered_of_step.empty() ? nullptr : rendered_of_step[i]);
    if (!use_of_step.empty()) plan.set_kernel_use.push_back(use_of_step[i]);
  }

  std::size_t next = 0;
  for (fuse::PlanStep& step : kernel_plan.steps) {
    if (step.host) {
      const graph::Node& node = g.node(step.nodes[0]);
      plan.breaks.push_back({node.id, node.op, node.name, step.host_reason, reason_kind(step.host_reason)});
      plan.steps.push_back({.host = true, .host_node = node.id, .dispatch = std::nullopt});
      continue;
    }
    Dispatch d;
    d.nodes = std::move(step.nodes);
    d.kernel = kernel_index[next++];
    d.kernel_name = step.kernel->kernel.name;
    d.grid = kir::dispatch_grid(step.kernel->kernel, target.max_workgroup_count[0]);
    d.values = std::move(step.kernel->values);
    d.params = step.kernel->kernel.params;
    plan.steps.push_back({.host = false, .host_node = graph::kNoNode, .dispatch = std::move(d)});
  }

  plan.read_by_kernel.assign(g.values().size(), false);
  for (const Step& step : plan.steps)
    if (step.dispatch)
      for (graph::ValueId v : step.dispatch->values) plan.read_by_kernel[plan.root[v]] = true;
  return rendered;
}

void check_fullgraph(const Plan& plan, bool fullgraph) {
  if (plan.breaks.empty()) return;
  // Bounded: a model may have a million host nodes.
  std::string list;
  for (std::size_t i = 0; i < std::min(plan.breaks.size(), kMaxListedEntries); ++i)
    list += "\n  " + graph_break_line(plan.breaks[i]);
  if (plan.breaks.size() > kMaxListedEntries)
    list += "\n  ... (" + std::to_string(plan.breaks.size() - kMaxListedEntries) + " more; explain() lists them all)";
  if (plan.compiled && fullgraph)
    throw_error(ErrorKind::Unsupported, "fullgraph: model '" + plan.model_name + "' has " +
                                            std::to_string(plan.breaks.size()) + " graph break(s) on " + plan.backend +
                                            ":" + list);
  base::log(base::LogLevel::warning, "model '" + plan.model_name + "': " + std::to_string(plan.breaks.size()) +
                                               " node(s) run on the host (on the reference implementation; "
                                               "control flow runs its subgraphs as models of their own):" + list);
}

void plan_storage(Plan& plan) {
  const graph::Graph& g = *plan.graph;
  StoragePlan& storage = plan.storage;
  storage.alignment = std::max<std::uint64_t>(plan.target.min_buffer_offset_alignment, 16);

  // Step index of every dispatch and host node, in execution order.
  std::vector<int> step_of_node(g.nodes().size(), -1);
  int steps = 0;
  for (const Step& step : plan.steps) {
    if (step.host) step_of_node[step.host_node] = steps;
    else
      for (graph::NodeId node : step.dispatch->nodes) step_of_node[node] = steps;  // a fusion group is one step
    ++steps;
  }
  // Views (aliases) have no step: they take their input's, so lifetimes stay closed.
  const std::size_t n = g.values().size();
  std::vector<int> first(n, std::numeric_limits<int>::max()), last(n, -1);
  for (const graph::Node& node : g.nodes()) {
    const int step = step_of_node[node.id];
    if (step < 0) continue;  // a view
    for (graph::ValueId v : node.outputs) first[plan.root[v]] = std::min(first[plan.root[v]], step);
  }
  for (const graph::Node& node : g.nodes()) {
    const int step = step_of_node[node.id];
    if (step < 0) continue;
    for (graph::ValueId v : node.inputs)
      if (v >= 0) last[plan.root[v]] = std::max(last[plan.root[v]], step);
  }
  for (graph::ValueId v : g.outputs()) last[plan.root[v]] = steps;  // read back after the last step

  for (const graph::Value& v : g.values()) {
    // Dynamic values live on the host only; fused values only in registers.
    if (plan.root[v.id] != v.id || v.type.dynamic || plan.fused_away[v.id]) continue;
    // A constant only host steps read stays on the host (a large embedding table read by a host Gather).
    if (v.constant) {
      if (plan.read_by_kernel[v.id]) storage.constants.push_back(v.id);
    }
    else if (v.producer == graph::kNoNode) storage.inputs.push_back(v.id);
    else storage.intermediates.push_back(v.id);
  }

  const std::uint64_t max_buffer = plan.target.max_buffer_bytes ? plan.target.max_buffer_bytes : UINT64_MAX;
  storage.arenas = plan.compiled;
  if (storage.arenas) {
    for (graph::ValueId id : storage.intermediates) {
      // A zero-sized value no step writes (fuse::plan_kernels skips its node).
      if (first[id] > steps) first[id] = 0;
      KILN_ASSERT(first[id] <= steps);
      storage.lifetimes.push_back({value_bytes(g.value(id)), first[id], std::max(first[id], last[id])});
    }
    storage.memory_plan = compiler::plan_memory(storage.lifetimes, storage.alignment, max_buffer);
  } else {
    std::uint64_t total = 0;
    for (graph::ValueId id : storage.intermediates) total += align_up(value_bytes(g.value(id)), storage.alignment);
    storage.memory_plan.arena_bytes = total;
    storage.memory_plan.unshared_bytes = total;
  }
}

// A chooser answering `pinned`'s choice for a node of that pass and name
// where the pass offers it, else the rule's.
graph::passes::GraphChooser pinned_chooser(const std::vector<GraphChoiceMade>& pinned) {
  if (pinned.empty()) return {};
  auto by_node = std::make_shared<std::map<std::pair<std::string, std::string>, std::string>>();
  for (const GraphChoiceMade& made : pinned) by_node->emplace(std::pair(made.pass, made.node), made.choice);
  return [by_node](const graph::passes::GraphChoice& choice) {
    const auto it = by_node->find({choice.pass, choice.node->name});
    return it != by_node->end() && std::ranges::find(choice.options, it->second) != choice.options.end() ? it->second
                                                                                                          : choice.rule;
  };
}

// The request's pinned choices, else its graph chooser, else the rule; every
// answer is recorded in `made`. None (the passes' rules, unrecorded) where
// nothing asks for choices: no chooser, no pins, no dynamic dims whose later
// extents would pin these.
graph::passes::GraphChooser recording_chooser(const PlanRequest& request, std::vector<GraphChoiceMade>& made) {
  if (!request.graph_chooser && request.pinned_choices.empty() && !request.probe_graph) return {};
  graph::passes::GraphChooser pinned = pinned_chooser(request.pinned_choices);
  std::set<std::pair<std::string, std::string>> pinned_nodes;
  for (const GraphChoiceMade& choice : request.pinned_choices) pinned_nodes.emplace(choice.pass, choice.node);
  return [&request, &made, pinned = std::move(pinned), pinned_nodes = std::move(pinned_nodes)](
             const graph::passes::GraphChoice& choice) {
    std::string answer = choice.rule;
    if (pinned && pinned_nodes.contains({choice.pass, choice.node->name})) answer = pinned(choice);
    else if (request.graph_chooser) answer = request.graph_chooser(choice);
    if (std::ranges::find(choice.options, answer) == choice.options.end()) answer = choice.rule;
    made.push_back({choice.pass, choice.node->name, answer});
    return answer;
  };
}

// Whether some input of `graph` has another extent in `probe` past its first
// dim (a height, a width, a sequence; not only the batch).
bool image_extents_vary(const graph::Graph& graph, const graph::Graph& probe) {
  const std::vector<graph::ValueId>& inputs = graph.inputs();
  const std::vector<graph::ValueId>& probe_inputs = probe.inputs();
  if (inputs.size() != probe_inputs.size()) return true;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Shape& a = graph.value(inputs[i]).type.shape;
    const Shape& b = probe.value(probe_inputs[i]).type.shape;
    if (a.size() != b.size() || !std::equal(a.begin() + std::min<std::ptrdiff_t>(1, std::ssize(a)), a.end(),
                                            b.begin() + std::min<std::ptrdiff_t>(1, std::ssize(b))))
      return true;
  }
  return false;
}

}  // namespace

std::string graph_break_line(const GraphBreak& b) {
  return "graph break: " + b.op + " '" + b.node_name + "': " + b.reason;
}

std::uint64_t value_bytes(const graph::Value& v) {
  return std::max<std::uint64_t>(static_cast<std::uint64_t>(num_elements(v.type.shape)) * dtype_size(v.type.dtype), 4);
}

int Plan::dispatch_count() const {
  int count = 0;
  for (const Step& step : steps) count += step.dispatch ? 1 : 0;
  return count;
}

kir::ParameteriseReport parameterise_for_target(std::span<kir::Kernel* const> kernels,
                                                const lower::TargetPolicy& policy, const Settings& settings) {
  if (!settings.flag("parameterise")) return {};
  return kir::parameterise(kernels, parameterise_options(policy, settings));
}

const char* device_class_name(const backend::TargetDesc& target) {
  return lower::device_class_name(lower::device_class(target));
}

std::optional<std::string> f16_arithmetic_unavailable(const backend::Backend& backend,
                                                      const backend::TargetDesc& target) {
  if (!target.fp16) return target.device_name + " has no f16 arithmetic";
  if (backend.language_for(target).type_f16.empty())
    return backend.name() + "'s kernels have no f16 type here and would only emulate it (slower than f32)";
  return std::nullopt;
}

kir::ParameteriseOptions parameterise_options(const lower::TargetPolicy& policy, const Settings& settings) {
  constexpr std::uint32_t kParamBytes = sizeof(std::int32_t);
  constexpr std::uint32_t kUnstatedLimitBytes = 128;  // what every Vulkan device offers
  const std::uint32_t limit = policy.max_kernel_param_bytes;
  kir::ParameteriseOptions options;
  options.max_params = (limit != 0 ? limit : kUnstatedLimitBytes) / kParamBytes;
  // Loop bounds as parameters: fewer kernels (faster cold compiles) for loops
  // whose trip count the driver does not know (ParameteriseOptions::
  // loop_bounds). Worth it where the driver's compiler is the cost of a cold
  // compile, a CPU device (lavapipe's LLVM); GPU drivers compile a kernel in
  // tens of milliseconds, so there the bounds stay constants.
  const std::string& loop_bounds = settings.choice("parameterise_loop_bounds");
  options.loop_bounds = loop_bounds == "auto" ? policy.cpu_device() : loop_bounds == "on";
  return options;
}

std::shared_ptr<const Plan> build_plan(std::shared_ptr<const graph::Graph> graph, const backend::Backend& backend,
                                       const backend::TargetDesc& target, const PlanRequest& request) {
  auto plan = std::make_shared<Plan>();
  plan->model_name = request.model_name;
  plan->compiled = request.compiled;
  plan->settings = request.settings;
  plan->backend = backend.name();
  plan->target = target;
  // Every choice that depends on the kind of device reads this one value.
  const lower::TargetPolicy policy = lower::target_policy(target);

  auto last = Clock::now();
  // Where a cold compile goes, phase by phase (KILN_LOG=debug).
  auto phase_done = [&](const char* phase) {
    base::log(base::LogLevel::debug, plan->model_name + ": " + phase + " in " +
                                               std::to_string(static_cast<int>(ms_since(last))) + " ms");
    last = Clock::now();
  };
  // The dtype setting converts the graph (and its probe) before any pass.
  std::optional<graph::passes::PassReport> float_type;
  std::shared_ptr<const graph::Graph> probe_graph = request.probe_graph;
  if (const std::string& dtype = plan->settings.choice("dtype"); dtype != "model") {
    const graph::passes::FloatTypeOptions convert{.to = dtype == "f16" ? DType::f16 : DType::bf16};
    graph::passes::PassResult converted = graph::passes::convert_float_type(*graph, convert);
    graph = std::make_shared<const graph::Graph>(std::move(converted.graph));
    float_type = std::move(converted.report);
    if (probe_graph)
      probe_graph = std::make_shared<const graph::Graph>(graph::passes::convert_float_type(*probe_graph, convert).graph);
  }
  // The device's pass options with the model's weight memo (the probe's too).
  const auto pass_options = [&](graph::passes::GraphChooser chooser) {
    graph::passes::PipelineOptions options = policy.pass_options(plan->settings, std::move(chooser));
    options.weight_memo = request.weight_memo;
    return options;
  };
  if (plan->compiled) {
    graph::passes::PipelineResult passed =
        graph::passes::run_compile_passes(*graph, pass_options(recording_chooser(request, plan->graph_choices)));
    plan->graph = std::make_shared<const graph::Graph>(std::move(passed.graph));
    plan->pass_reports = std::move(passed.reports);
  } else {
    // Op by op, but with a vendor library's algorithm choices (Winograd 3x3s).
    graph::passes::PipelineResult passed =
        graph::passes::run_eager_passes(*graph, policy.eager_pass_options(plan->settings));
    plan->graph = std::make_shared<const graph::Graph>(std::move(passed.graph));
    plan->pass_reports = std::move(passed.reports);
  }
  if (float_type) plan->pass_reports.insert(plan->pass_reports.begin(), std::move(*float_type));
  // The probe takes the same passes and this plan's choices (not a tuner's:
  // it makes none of its own), so that it is this graph at other extents.
  // Only when it is needed (a new extent of a
  // shape set whose kernels all match the set's needs none).
  std::optional<graph::Graph> probe;
  std::function<const graph::Graph&()> probe_pending;
  if (plan->compiled && probe_graph)
    probe_pending = [&]() -> const graph::Graph& {
      if (!probe)
        probe = graph::passes::run_compile_passes(*probe_graph, pass_options(pinned_chooser(plan->graph_choices))).graph;
      return *probe;
    };
  phase_done("graph passes");
  if (request.autotune && plan->settings.flag("autotune")) {
    plan->autotune = request.autotune(*plan->graph, policy.lower);
    phase_done("autotuning (tuning database lookups and tuning)");
  }
  std::function<const graph::Graph*()> probe_after_passes;
  if (probe_pending) probe_after_passes = [&]() -> const graph::Graph* { return &probe_pending(); };
  const std::vector<const RenderedKernel*> set_rendered =
      plan_kernels(*plan, backend, policy, probe_after_passes,
                   probe_pending && image_extents_vary(*graph, *probe_graph), request.pinned_sites, request.set_plans);
  phase_done("lowering, fusion and parameterisation");
  // A kernel taken from the set renders as the set's did: its source is copied.
  plan->rendered.reserve(plan->kernels.size());
  for (std::size_t k = 0; k < plan->kernels.size(); ++k)
    if (const RenderedKernel* set_source = set_rendered[k])
      plan->rendered.push_back({set_source->source, set_source->requirements, {}});
    else
      plan->rendered.push_back({render::make_kernel_source(plan->kernels[k], backend.language_for(plan->target)),
                                render::kernel_requirements(plan->kernels[k]), {}});
  phase_done("rendering");
  check_fullgraph(*plan, request.fullgraph);
  plan_storage(*plan);
  phase_done("memory plan");
  return plan;
}

}  // namespace kiln::compiler

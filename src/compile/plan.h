// The compiled plan: what a model becomes before it meets a device, as one
// immutable value. build_plan() is the one compile path: the executor binds a
// plan to a device (src/runtime/executor.h), `kiln dump` renders its kernels,
// `kiln explain` prints it, and tests inspect it.
//
//   (graph, backend, target capabilities, settings) -> Plan
//
// A plan holds the graph after passes and their reports, the steps in
// execution order (a dispatch of a fused kernel, or a host step for a graph
// break), the distinct kernels to compile (same-structure kernels share one,
// with per-dispatch parameters), and the memory plan (which values live where
// in the arenas). It needs no device: only the target's capability record.
#pragma once

#include "backends/backend.h"
#include "graph/ir.h"
#include "graph/passes/passes.h"
#include "src/compile/memory_plan.h"
#include "src/kernel/ir.h"
#include "src/kernel/parameterise.h"
#include "src/lower/target_policy.h"
#include "src/tune/autotune.h"

#include <kiln/settings.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::compiler {

// A node run on the host instead of as a kernel, and why.
struct GraphBreak {
  graph::NodeId node = graph::kNoNode;
  std::string op;
  std::string node_name;
  std::string reason;  // "output shape depends on data"
  std::string kind;    // the reason without value names, to group breaks by ("input shape depends on data")
};

// "graph break: NonZero 'postprocess.nonzero': output shape depends on data"
std::string graph_break_line(const GraphBreak& b);

// One kernel launch: a fusion group of nodes (one node in eager mode).
struct Dispatch {
  std::vector<graph::NodeId> nodes;  // in execution order; the first is the producer
  std::size_t kernel = 0;            // index into Plan::kernels
  std::string kernel_name;           // this dispatch's own kernel's name (before sharing a source)
  std::array<std::uint32_t, 3> grid{};
  std::vector<graph::ValueId> values;  // bindings, in kernel buffer order
  std::vector<std::int32_t> params;    // the kernel's per-dispatch parameters
};

// A distinct kernel rendered for the plan's backend: what a device loads.
// binaries is empty for a plan built here (the kernel cache compiles the
// source); a plan read from a compiled-model file carries them, best first
// (CUBIN before PTX), and nothing is compiled.
struct RenderedKernel {
  backend::KernelSource source;
  backend::KernelRequirements requirements;
  std::vector<backend::KernelBinary> binaries;
};

struct Step {
  bool host = false;                          // a graph break run on the reference implementation
  graph::NodeId host_node = graph::kNoNode;
  std::optional<Dispatch> dispatch;           // a device step
};

// Where every value that reaches device memory lives. Values are stored by
// their root (a view shares its input's storage); constants and inputs are
// packed one after another into buffers of at most the device's largest
// buffer; intermediates get arenas (compiled: the static memory plan) or a
// buffer each (eager, as a caching allocator would keep them).
struct StoragePlan {
  std::uint64_t alignment = 16;               // offsets within a buffer
  std::vector<graph::ValueId> constants;      // roots, in value order
  std::vector<graph::ValueId> inputs;
  std::vector<graph::ValueId> intermediates;
  bool arenas = false;                        // compiled: intermediates placed by memory_plan
  std::vector<compiler::Lifetime> lifetimes;   // per intermediate (arenas only)
  compiler::MemoryPlan memory_plan;            // arenas: offsets; eager: the totals only
};

// A tuning site's template ("gemm", "conv") and the knobs its kernel was
// built with, and the names of the nodes of its dispatch (empty in a plan
// file written before they were kept).
struct SiteKnobs {
  std::string template_name;
  std::string knobs;
  std::vector<std::string> nodes;
  friend bool operator==(const SiteKnobs&, const SiteKnobs&) = default;
};

// How a kernel of a new extent of a dynamic shape set came from the set's.
enum class SetKernelUse : std::uint8_t {
  taken,        // one of the set's kernels, its parameters read off this extent (kir::match_parameters)
  generalised,  // a set kernel with more of its literals made parameters (kir::generalise_parameters): a new source
  specialised,  // no set kernel has its structure (the extents decide a bound check or a vector width)
};

// What a graph pass chose for one node where it had a choice
// (graph::passes::GraphChoice): Winograd or direct, its tile, packed weights.
struct GraphChoiceMade {
  std::string pass;
  std::string node;    // the node's name
  std::string choice;  // one of the choice's options

  friend bool operator==(const GraphChoiceMade&, const GraphChoiceMade&) = default;
};

struct Plan {
  std::string model_name;
  bool compiled = false;                      // false: eager (no passes, no fusion)
  Settings settings;
  std::string backend;
  backend::TargetDesc target;
  std::shared_ptr<const graph::Graph> graph;  // after passes in compiled mode
  std::vector<graph::passes::PassReport> pass_reports;
  std::vector<Step> steps;
  std::vector<kir::Kernel> kernels;           // distinct kernels (one per source), in first-use order;
                                              // empty in a plan read from a file (src/artifact)
  std::vector<RenderedKernel> rendered;       // by kernel index: each kernel rendered for `backend`
  std::vector<graph::ValueId> root;           // by value id: the value whose memory it views
  std::vector<bool> fused_away;               // by value id: lives only in registers
  std::vector<bool> read_by_kernel;           // by root value id: some dispatch binds it
  int kernel_nodes = 0;                       // nodes lowered to kernels, before fusion
  std::vector<GraphBreak> breaks;             // in execution order
  StoragePlan storage;
  kir::ParameteriseReport parameterise_report;
  // Built with a probe graph (dynamic dims): kernels whose literals vary
  // with the dynamic extents, now parameters. -1: no probe.
  int dynamic_kernels = -1;
  // A new extent of a dynamic shape set (PlanRequest::set_plans), by
  // kernel index: how each kernel came from the set's. Empty otherwise, and
  // in a plan read from a file.
  std::vector<SetKernelUse> set_kernel_use;
  // Compiled mode with a graph chooser, pinned choices or a probe: the graph
  // passes' choices, in the order they were made (PlanRequest::pinned_choices).
  std::vector<GraphChoiceMade> graph_choices;
  // Every dispatch's tuning site, in step order (PlanRequest::pinned_sites).
  std::vector<SiteKnobs> site_knobs;
  // With the autotune setting: what the tuning database (or tuning now)
  // decided for each tuning site, and the knobs lowering was given.
  std::optional<tune::AutotuneResult> autotune;
  // Where the plan came from when it was not built here: "" (built by
  // build_plan), else the file it was read from (a compiled-model file, the
  // plan cache). Such a plan ran no graph pass; its kernels and reports are
  // what the file holds.
  std::string read_from;

  int dispatch_count() const;
};

struct PlanRequest {
  std::string model_name = "model";
  bool compiled = true;
  bool fullgraph = false;  // compiled: a graph break is an error listing every break
  Settings settings{};
  // Called with the graph after passes when the autotune setting is on: the
  // knobs each tuning site gets (the executor tunes on its device; kiln dump
  // reads records only). Null: the heuristic's knobs everywhere.
  std::function<tune::AutotuneResult(const graph::Graph& passed, const lower::LowerTarget& target)> autotune{};
  // Compiled mode: asked by the graph passes where they have a choice
  // (Winograd or direct, packed or plain weights; graph/passes/passes.h).
  // max-autotune's is tune::Autotuner::choose, whose decisions its autotune
  // callback then returns; the tuning worker's forces one option. Null: the
  // passes' rules.
  graph::passes::GraphChooser graph_chooser{};
  // Compiled mode, dynamic dims: the same model at other extents of those
  // dims. Its kernels tell which literals vary with the extents, and those
  // become kernel parameters (kir::parameterise_with_probes), so every shape
  // set of the dims renders the same sources and compiles nothing new.
  std::shared_ptr<const graph::Graph> probe_graph{};
  // With probe_graph: knobs for the tuning sites, in step order (another
  // shape set's Plan::site_knobs). Each node of a pinned site's dispatch
  // takes its knobs where they fit (LowerTarget::node_pins; where some pin
  // names no nodes, the k-th site of each template takes the k-th pinned
  // knobs of that template, lowering twice), as the probe takes this plan's,
  // so the heuristic's shape-dependent choices do not change the kernels'
  // structure from one extent to the next.
  std::vector<SiteKnobs> pinned_sites{};
  // With probe_graph: the graph passes' choices for nodes of these names
  // (another shape set's Plan::graph_choices), taken where the pass offers
  // them, before graph_chooser: a pass's rule that depends on the extents
  // (Winograd's tile) must not change the graph from one extent to the next.
  // The probe takes this plan's choices.
  std::vector<GraphChoiceMade> pinned_choices{};
  // With probe_graph: the plans of the shape set these are new extents of
  // (its own and its members' so far). Given, no probe is run through
  // passes or lowered: each kernel of this plan takes a set kernel it is at
  // other parameter values (kir::match_parameters), with its rendered
  // source, or else a set kernel of its structure with more parameters
  // (kir::generalise_parameters), or else stays as lowered for these
  // extents (Plan::set_kernel_use says which).
  std::vector<std::shared_ptr<const Plan>> set_plans{};
  // Compiled mode: weight rewrites shared with the model's other plans
  // (its shape sets'), so each is computed and held once. Null: per plan.
  std::shared_ptr<graph::passes::WeightMemo> weight_memo{};
};

// Throws Unsupported (fullgraph with graph breaks), and what lowering throws
// for a malformed node.
std::shared_ptr<const Plan> build_plan(std::shared_ptr<const graph::Graph> graph, const backend::Backend& backend,
                                       const backend::TargetDesc& target, const PlanRequest& request);

// Gives kernels of one structure shared sources with runtime parameters
// (src/kernel/parameterise.h) as compiled mode does for a target: up to its
// parameter limit, with loop bounds as parameters per the
// parameterise_loop_bounds setting (auto: on CPU devices). Nothing when the
// parameterise setting is off.
kir::ParameteriseReport parameterise_for_target(std::span<kir::Kernel* const> kernels,
                                                const lower::TargetPolicy& policy, const Settings& settings);
// The name of the device class whose kernels `target` gets
// (lower::device_class): "discrete-gpu", "integrated-gpu", "emulated-gpu",
// "host-cpu"; for `kiln devices` and explain.
const char* device_class_name(const backend::TargetDesc& target);

// Why the f16_arithmetic setting cannot apply on `target` (no f16
// arithmetic, or a language that would only emulate it: slower than f32, so
// it is not used), or nullopt where kernels compute in f16 natively.
std::optional<std::string> f16_arithmetic_unavailable(const backend::Backend& backend,
                                                      const backend::TargetDesc& target);

// The options parameterise_for_target() uses.
kir::ParameteriseOptions parameterise_options(const lower::TargetPolicy& policy, const Settings& settings);

// Bytes a value takes in device memory (at least 4: Vulkan bindings must not be empty).
std::uint64_t value_bytes(const graph::Value& v);

}  // namespace kiln::compiler

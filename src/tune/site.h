// A tuning site: one template kernel whose knobs a heuristic chose, with
// what the autotuner needs to rebuild and check it on its own: the graph
// node it was lowered from (op, attributes, input and output types). The
// site's identity (template, version, problem text) is what lowering records
// on the kernel (kir::TuningSite) and what the tuning database is keyed by.
#pragma once

#include "graph/ir.h"
#include "src/kernel/ir.h"
#include "shaders/target.h"

#include <optional>
#include <string>
#include <vector>

namespace kiln::tune {

struct Site {
  kir::TuningSite id;  // template, version, problem, and the heuristic's knobs for the target it was found for
  graph::Node node;    // op, name and attributes; its value ids are not used
  std::vector<std::optional<graph::TensorType>> inputs;  // per input slot; nullopt: an omitted optional input
  std::vector<graph::TensorType> outputs;

  // The site's node lowered for `target` (whose own overrides are replaced
  // by `knobs` when given): the kernel a candidate runs.
  kir::Kernel lower(const lower::LowerTarget& target, const std::optional<std::string>& knobs = std::nullopt) const;
};

// `node` on its own, as a site holds it: op, name, attributes, its input
// and output types, value ids renumbered 0, 1, ... (only which slots are
// present matters); `id` left empty. Nullopt when a type is dynamic.
std::optional<Site> node_alone(const graph::Graph& graph, const graph::Node& node);

// The site of `node` in `graph` for `target` (the heuristic's knobs, any
// override in `target` ignored), or nullopt when its kernel has no choices
// or it cannot be lowered.
std::optional<Site> site_of(const graph::Graph& graph, const graph::Node& node, const lower::LowerTarget& target);

// Every tuning site of `graph`, one per distinct (template, problem), in
// graph order: what a model-level loop tunes (ordering them by their share
// of device time is its job; Site::node.name says which node each came
// from). A pointwise or reduction site (the workgroup size,
// lower/workgroup_site.h) is listed only where it anchors a kernel of
// compiled mode's fused plan: one fused into another kernel keeps that
// kernel's workgroup size, so tuning it would change nothing.
std::vector<Site> sites_of(const graph::Graph& graph, const lower::LowerTarget& target);

// A site as one JSON line and back (the worker protocol); from_json throws
// Error(Corrupt) naming what is malformed.
std::string to_json(const Site& site);
Site site_from_json(const std::string& text);

}  // namespace kiln::tune

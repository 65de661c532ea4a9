// Graph-level tuning sites: a choice a graph pass makes per node by a rule
// (graph/passes/passes.h, GraphChoice): Winograd or direct for a 3x3
// convolution (template "winograd": "direct", "f2", "f4"), packed or plain
// weights for a MatMul (template "pack_matmul_weights": "plain", "packed").
// Such a site is a tune::Site like a kernel's: its node and types, the
// template (the pass), the problem (the node's shapes as the kernel sites
// spell them, then " choices=" and the options offered, so a record tuned
// over other options does not apply) and knobs (the rule's choice). A
// candidate is one option; the tuning worker measures it by compiling the
// node alone as a one-node graph with that option forced and timing whole
// calls (src/tune/worker/graph_measure.h).
#pragma once

#include "graph/ir.h"
#include "graph/passes/passes.h"
#include "src/tune/site.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::tune {

// Bumped when the same option would build a different graph.
inline constexpr int kGraphChoiceVersion = 1;

// Whether the site is a graph pass's choice (its template names the pass).
bool is_graph_site(const Site& site);

// The site of a pass's choice, or nullopt when the node's types are dynamic
// or its shapes cannot be described.
std::optional<Site> graph_site_of(const graph::passes::GraphChoice& choice);

// The options the site offers (from its problem text), in the pass's order.
std::vector<std::string> graph_site_options(const Site& site);

// The candidates in search order: the rule's choice first, then the other options.
std::vector<std::string> graph_site_candidates(const Site& site);

// The site's node alone: its first input a graph input, every other present
// input a constant of seeded random values in [-1, 1) (seed + 1, seed + 2,
// ...: the weight the site stands for is not kept), its outputs the graph's.
graph::Graph graph_site_graph(const Site& site, std::uint64_t seed);

// A chooser that answers `option` for the site's pass and the rule's choice
// elsewhere (the one-node graph has one node where the pass has a choice);
// `asked` (if given) is set when the site's pass asked.
graph::passes::GraphChooser forcing_chooser(const Site& site, const std::string& option, bool* asked = nullptr);

// The kernel sites (GEMM, convolution, attention) that taking `option` at
// the site builds: the one-node graph through the compile passes (`passes`,
// its chooser replaced) with that option forced. kiln tune tunes them before
// the choice, so that an option the rule does not take is measured with its
// kernels tuned (a plain weight's GEMM on the subgroup path), not only with
// the heuristic's knobs.
std::vector<Site> option_kernel_sites(const Site& site, const std::string& option,
                                      graph::passes::PipelineOptions passes, const lower::LowerTarget& target);

}  // namespace kiln::tune

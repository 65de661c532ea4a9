// Eager mode's algorithm choices (passes.h: run_eager_passes). Kept apart
// from the compile pipeline: only passes that pick how an op is computed
// belong here, never fusion, constant folding or weight layouts, so eager
// stays the op-by-op baseline compiled mode is measured against; and weights
// split where the device could not bind them whole (split_large_weights).
#include "graph/passes/passes.h"

namespace kiln::graph::passes {

PipelineResult run_eager_passes(const Graph& graph, const EagerPassOptions& options) {
  PipelineResult result{graph, {}};
  // Not an algorithm choice but the precision the user set, which eager follows too.
  if (!options.f32_products.matrix_inputs.empty()) {
    PassResult chosen = choose_f32_products(graph, options.f32_products);
    if (chosen.report.changes != 0) {
      chosen.graph.verify();
      result.graph = std::move(chosen.graph);
    }
    result.reports.push_back(std::move(chosen.report));
  }
  // Weights too large to bind are split first: without that eager could not run them at all.
  if (options.max_binding_bytes != 0) {
    PassResult split = split_large_weights(result.graph, {.max_binding_bytes = options.max_binding_bytes});
    if (split.report.changes != 0) {
      split.graph.verify();
      result.graph = std::move(split.graph);
    }
    result.reports.push_back(std::move(split.report));
  }
  if (!options.eager_winograd) {
    result.reports.push_back({"winograd", 0, {"off: EagerPassOptions::eager_winograd=false"}});
    return result;
  }
  PassResult step = winograd(result.graph, {.rule = options.winograd, .runtime_weight_transform = true});
  if (step.report.changes == 0) {
    // The model's own graph, value ids included, as eager ran it before.
    result.reports.push_back(std::move(step.report));
    return result;
  }
  try {
    step.graph.verify();
  } catch (const Error& e) {
    // The input was valid, so an invalid result is a bug in the pass.
    throw_error(ErrorKind::Internal, "graph pass " + step.report.pass + " produced an invalid graph: " + e.what());
  }
  result.graph = std::move(step.graph);
  result.reports.push_back(std::move(step.report));
  return result;
}

}  // namespace kiln::graph::passes

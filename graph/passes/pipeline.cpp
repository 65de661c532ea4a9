// The default pass pipeline of compile(), and report formatting.
#include "graph/passes/passes.h"

namespace kiln::graph::passes {

PipelineResult run_compile_passes(const Graph& graph, const PipelineOptions& options) {
  using Pass = PassResult (*)(const Graph&);
  static constexpr Pass kPipeline[] = {&fold_constants, &fold_batch_norm, &fuse_activation, &drop_identity_resize,
                                      &conv_before_upsample, &trim_conv_window, &slice_strided_pointwise_conv,
                                      &winograd, &pack_weights,
                                      &eliminate_dead_code,
                                      &recognise_layer_norm, &recognise_gelu, &recognise_silu, &scale_conv_weights,
                                      &recognise_attention, &narrow_before_gather, &transpose_to_reshape,
                                      &pack_matmul_weights};

  PipelineResult result{graph, {}};
  for (Pass pass : kPipeline) {
    if (pass == &pack_matmul_weights && !options.cpu_device) {
      PassReport skipped{"pack_matmul_weights", 0, {"not for this device: NK16n MatMul weights are chosen for CPU devices"}};
      result.reports.push_back(std::move(skipped));
      continue;
    }
    PassResult step = pass(result.graph);
    try {
      step.graph.verify();
    } catch (const Error& e) {
      // The input was valid, so an invalid result is a bug in the pass.
      throw_error(ErrorKind::Internal, "graph pass " + step.report.pass + " produced an invalid graph: " + e.what());
    }
    result.graph = std::move(step.graph);
    result.reports.push_back(std::move(step.report));
  }
  return result;
}

std::string report_str(const PassReport& report) {
  std::string text = report.pass + ": " + std::to_string(report.changes) +
                     (report.changes == 1 ? " change" : " changes") + "\n";
  for (const std::string& line : report.details) text += "  " + line + "\n";
  return text;
}

}  // namespace kiln::graph::passes

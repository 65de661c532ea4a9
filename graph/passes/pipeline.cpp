// The default pass pipeline of compile(), and report formatting.
#include "graph/passes/passes.h"

#include <functional>

namespace kiln::graph::passes {

PipelineResult run_compile_passes(const Graph& graph, const PipelineOptions& options) {
  const Settings& settings = options.settings;
  const WinogradOptions winograd_options{.rule = options.winograd,
                                         .max_tile = settings.choice("winograd_tile") == "2" ? 2 : 4,
                                         .chooser = options.chooser,
                                         .weight_memo = options.weight_memo};
  // auto: the device kind's rule, which a chooser may overrule per MatMul; on: every MatMul.
  const bool pack_automatic = settings.choice("pack_matmul_weights") == "auto";
  const PackMatMulOptions pack_options{.pack = !pack_automatic || options.cpu_device,
                                       .chooser = pack_automatic ? options.chooser : GraphChooser{}};
  struct Step {
    const char* pass;     // the report's name
    const char* setting;  // the flag that switches it (pack_matmul_weights: a choice; null: always runs)
    std::function<PassResult(const Graph&)> run;
  };
  const F32ProductOptions f32_products = f32_product_options(settings, options.matrix_inputs);
  const Step pipeline[] = {
      // First, so that every later pass keeps (or hands on) the nodes' choice.
      {"choose_f32_products", nullptr, [&](const Graph& g) { return choose_f32_products(g, f32_products); }},
      {"fold_constants", "fold_constants", &fold_constants},
      {"fold_batch_norm", "fold_batch_norm", &fold_batch_norm},
      {"fuse_activation", "fuse_activation", &fuse_activation},
      {"drop_identity_resize", "drop_identity_resize", &drop_identity_resize},
      {"conv_before_upsample", "conv_before_upsample", &conv_before_upsample},
      {"trim_conv_window", "trim_conv_window", &trim_conv_window},
      {"slice_strided_pointwise_conv", "slice_strided_conv", &slice_strided_pointwise_conv},
      {"winograd", "winograd", [&](const Graph& g) { return winograd(g, winograd_options); }},
      {"pack_weights", "pack_weights", [&](const Graph& g) { return pack_weights(g, options.templates); }},
      {"eliminate_dead_code", "eliminate_dead_code", &eliminate_dead_code},
      {"recognise_layer_norm", "recognise_layer_norm", &recognise_layer_norm},
      {"recognise_gelu", "recognise_gelu", &recognise_gelu},
      {"recognise_silu", "recognise_silu", &recognise_silu},
      {"scale_conv_weights", "scale_conv_weights", &scale_conv_weights},
      {"recognise_attention", "recognise_attention", &recognise_attention},
      {"narrow_before_gather", "narrow_gather", &narrow_before_gather},
      {"transpose_to_reshape", "transpose_to_reshape", &transpose_to_reshape},
      // Before packing, which then packs each part.
      {"split_large_weights", nullptr,
       [&](const Graph& g) { return split_large_weights(g, {.max_binding_bytes = options.max_binding_bytes}); }},
      {"pack_matmul_weights", "pack_matmul_weights",
       [&](const Graph& g) { return pack_matmul_weights(g, pack_options); }},
  };

  PipelineResult result{graph, {}};
  for (const Step& step : pipeline) {
    static const Settings::Entry always{.value = "on"};
    const Settings::Entry& setting = step.setting ? settings.entry(step.setting) : always;
    const bool automatic = setting.value == "auto";
    if (setting.value == "off") {
      result.reports.push_back({step.pass, 0, {"off: setting " + std::string(step.setting) + "=off (" + setting.origin + ")"}});
      continue;
    }
    if (automatic && std::string_view(step.pass) == "pack_matmul_weights" && !options.cpu_device && !options.chooser) {
      result.reports.push_back({step.pass, 0, {"not for this device: NK16n MatMul weights are chosen for CPU devices"}});
      continue;
    }
    PassResult done = step.run(result.graph);
    try {
      done.graph.verify();
    } catch (const Error& e) {
      // The input was valid, so an invalid result is a bug in the pass.
      throw_error(ErrorKind::Internal, "graph pass " + done.report.pass + " produced an invalid graph: " + e.what());
    }
    result.graph = std::move(done.graph);
    result.reports.push_back(std::move(done.report));
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

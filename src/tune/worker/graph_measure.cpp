#include "src/tune/worker/graph_measure.h"

#include "graph/model_access.h"
#include "graph/op_registry.h"
#include "src/runtime/executor.h"
#include "src/tune/choice.h"
#include "src/tune/graph_site.h"

#include <kiln/error.h>
#include <kiln/float16.h>

#include <chrono>
#include <cmath>
#include <limits>

namespace kiln::tune {

namespace {


// Whether the compiled graph took `option` for the site's pass.
bool applied(const graph::Graph& passed, const Site& site, const std::string& option) {
  bool winograd = false, packed = false;
  for (const graph::Node& node : passed.nodes()) {
    winograd |= node.op == "WinogradInput";
    packed |= node.op == "MatMul" && node.attrs.has("weight_layout");
  }
  if (site.id.template_name == "winograd") return winograd == (option != "direct");
  return packed == (option == "packed");
}

// The worst |got - want| / max(1, |want|) and where, NaN included.

}  // namespace

struct GraphMeasurer::Reference {
  std::shared_ptr<const graph::Graph> graph;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
};

GraphMeasurer::GraphMeasurer(std::string backend, int device) : backend_(std::move(backend)), device_(device) {}

GraphMeasurer::~GraphMeasurer() = default;

const GraphMeasurer::Reference& GraphMeasurer::reference(const Site& site, const MeasureOptions& options) {
  const std::string key = to_json(site) + "#" + std::to_string(options.seed);
  auto it = references_.find(key);
  if (it != references_.end()) return *it->second;
  auto ref = std::make_unique<Reference>();
  ref->graph = std::make_shared<const graph::Graph>(graph_site_graph(site, options.seed));
  for (graph::ValueId id : ref->graph->inputs()) {
    const graph::TensorType& type = ref->graph->value(id).type;
    const Tensor values =
        Tensor::from_f32(type.shape, random_values(static_cast<std::size_t>(num_elements(type.shape)), options.seed));
    ref->inputs.push_back(type.dtype == DType::f32 ? values : values.to(type.dtype));
  }
  ref->outputs = graph::run_reference(*ref->graph, ref->inputs);
  return *references_.emplace(key, std::move(ref)).first->second;
}

CandidateResult GraphMeasurer::measure(const Site& site, const std::string& option, const MeasureOptions& options) {
  const std::string fault = injected_fault(option);
  crash_or_hang_if_injected(fault);
  const Reference& ref = reference(site, options);

  Executor::Options run_options;
  run_options.backend = backend_;
  run_options.device = std::to_string(device_);
  run_options.compiled = true;
  // Default mode, whatever the environment says about autotuning: the worker
  // never tunes; with kernel records, max-autotune that reads them only.
  run_options.settings = Settings::resolve(Mode::default_).with("autotune", "off");
  if (!options.kernel_records.empty())
    run_options.settings = run_options.settings.with("autotune", "on")
                               .with("tune_budget", "0")
                               .with("tune_db", options.kernel_records);
  bool asked = false;
  run_options.graph_chooser = forcing_chooser(site, option, &asked);
  std::unique_ptr<Executor> executor;
  try {
    executor = std::make_unique<Executor>(internal::make_model(ref.graph, "graph_site"), run_options);
    executor->prepare();
  } catch (const Error& error) {
    return failed_candidate(option, status_of(error, CandidateStatus::compile_failed), error.what());
  }
  if (!asked)
    return failed_candidate(option, CandidateStatus::compile_failed,
                  "the " + site.id.template_name + " pass did not offer this choice (is its setting off?)");
  if (!applied(executor->planned_graph(), site, option))
    return failed_candidate(option, CandidateStatus::compile_failed,
                  "the " + site.id.template_name + " pass did not take '" + option + "' for this node");

  CandidateResult result;
  result.knobs = option;
  try {
    auto timed_call = [&] {
      const std::vector<Tensor> outputs = executor->run(ref.inputs);
      return std::pair(outputs, executor->stats().last_device_ms.value_or(executor->stats().last_run_ms));
    };
    const std::vector<Tensor> outputs = timed_call().first;
    if (outputs.size() != ref.outputs.size())
      return failed_candidate(option, CandidateStatus::wrong_result,
                    std::to_string(outputs.size()) + " outputs, expected " + std::to_string(ref.outputs.size()));
    for (std::size_t o = 0; o < outputs.size(); ++o) {
      // 16-bit outputs compare as f32; a graph choice (Winograd's tiles are
      // rounded between its kernels) may move them a few values of the type.
      const DType dtype = ref.outputs[o].dtype();
      const auto wide = [](const Tensor& t) { return t.dtype() == DType::f32 ? t : t.to(DType::f32); };
      const Tensor output = wide(outputs[o]), expected = wide(ref.outputs[o]);
      const double tolerance =
          dtype == DType::f32 ? options.tolerance : std::max(options.tolerance, 8 * float_epsilon(dtype));
      std::vector<float> got(output.values<float>().begin(), output.values<float>().end());
      if (fault == "wrong" && !got.empty()) got.back() += 1.0f;  // the test hook: an edge element off by one
      const std::span<const float> reference = expected.values<float>();
      if (got.size() != reference.size())
        return failed_candidate(option, CandidateStatus::wrong_result, "output " + std::to_string(o) + " has the wrong size");
      const std::vector<double> want(reference.begin(), reference.end());
      const auto [worst, at] = output_error(got, want);
      if (!(worst <= tolerance))
        return failed_candidate(option, CandidateStatus::wrong_result,
                      "output " + std::to_string(o) + " element " + std::to_string(at) + " is " +
                          std::to_string(got[at]) + ", expected " + std::to_string(want[at]) + " (relative error " +
                          std::to_string(worst) + ", tolerance " + std::to_string(tolerance) + ")");
    }
    result.times_ms = time_calls(options, [&](int) { return timed_call().second; });
  } catch (const Error& error) {
    return failed_candidate(option, status_of(error, CandidateStatus::crashed), std::string("device error: ") + error.what());
  }
  const TimeSummary summary = summarize(result.times_ms);
  result.status = CandidateStatus::ok;
  result.median_ms = summary.median;
  result.spread = summary.spread;
  return result;
}

}  // namespace kiln::tune

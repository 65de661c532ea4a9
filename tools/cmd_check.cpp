// `kiln check`: runs a model on two backends, or on one and the reference
// implementation, kernel by kernel, reading back what each kernel writes, and
// names the first kernel (with the nodes fused into it) whose output differs
// beyond the tolerance. Two backends plan differently (their fusion groups
// and kernels differ), so their outputs are matched by the graph value they
// hold; against the reference, by value in the backend's own planned graph.
#include "commands.h"
#include "image.h"
#include "model_args.h"
#include "src/base/check.h"

#include "graph/op_registry.h"
#include "src/runtime/internal_access.h"

#include <kiln/kiln.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>

namespace kiln::tools {
namespace {

constexpr const char* kReference = "reference";

// The model's inputs: the image for a model with one [N, 3, S, S] f32 input,
// else seeded normal values (f32) or zeros (other types).
std::vector<Tensor> check_inputs(const Model& model, const std::string& image, std::uint64_t seed) {
  const std::vector<TensorSpec> specs = model.inputs();
  if (specs.size() == 1) {
    const TensorSpec& w = specs[0];
    if (w.dtype == DType::f32 && w.shape.size() == 4 && w.shape[1] == 3 && w.shape[2] == w.shape[3])
      return {load_image_tensor(image, w.shape[2], w.shape[0])};
  }
  std::mt19937_64 random(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<Tensor> inputs;
  for (const TensorSpec& spec : specs) {
    Tensor t(spec.dtype, spec.shape);
    if (spec.dtype == DType::f32)
      for (float& x : t.values<float>()) x = normal(random);
    inputs.push_back(std::move(t));
  }
  return inputs;
}

struct KernelResult {
  std::string kernel;
  std::vector<std::string> nodes;
  std::string value;  // the graph value it writes
  Tensor tensor;
};

// One side of the comparison: every kernel's output in execution order.
struct Side {
  std::string name;
  std::vector<KernelResult> kernels;
  std::map<std::string, Tensor> by_value;  // the reference: every value it computed
};

std::vector<KernelResult> traced(Executor& engine, const std::vector<Tensor>& inputs) {
  std::vector<KernelResult> results;
  for (Executor::KernelOutput& out : engine.trace(inputs))
    results.push_back({std::move(out.kernel), std::move(out.nodes), engine.planned_graph().value(out.value).name,
                       std::move(out.tensor)});
  return results;
}

// A backend's side: the model it ran (kept alive: its planned graph is
// what the reference runs) and the kernels' outputs.
struct BackendRun {
  std::optional<CompiledModel> compiled;
  std::optional<EagerModel> eager_model;
  const graph::Graph* planned = nullptr;
  Side side;
};

void run_backend(const Model& model, const ModelArgs& args, const std::string& backend, bool eager_mode,
                 const std::vector<Tensor>& inputs, BackendRun& run) {
  run.side.name = backend;
  Executor* engine = nullptr;
  if (eager_mode) {
    DeviceOptions device;
    device.backend = backend;
    device.device = args.device;
    run.eager_model.emplace(eager(model, device));
    engine = &internal::mutable_engine(*run.eager_model);
  } else {
    CompileOptions options = args.compile_options();
    options.backend = backend;
    run.compiled.emplace(compile(model, options));
    engine = &internal::mutable_engine(*run.compiled);
  }
  run.side.kernels = traced(*engine, inputs);
  run.planned = &engine->planned_graph();
}

// Every value the reference computes for `graph` (a backend's planned graph,
// so that each kernel's output has its counterpart), by name.
Side run_reference(const graph::Graph& graph, const std::vector<Tensor>& inputs) {
  Side side{kReference, {}, {}};
  graph::run_reference(graph, inputs, [&](const graph::Node& node, std::span<const Tensor> outputs) {
    for (std::size_t i = 0; i < outputs.size() && i < node.outputs.size(); ++i)
      side.by_value.emplace(graph.value(node.outputs[i]).name, outputs[i]);
  });
  return side;
}

struct Difference {
  double max_abs = 0;  // f32: the largest |a - b|; else the count of differing elements
  double scale = 0;    // f32: the largest |b|
  bool comparable = true;
};

Difference difference(const Tensor& a, const Tensor& b) {
  Difference d;
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) {
    d.comparable = false;
    return d;
  }
  if (a.dtype() == DType::f32) {
    const auto x = a.values<float>(), y = b.values<float>();
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double diff = std::fabs(static_cast<double>(x[i]) - y[i]);
      d.max_abs = std::isnan(diff) && !(std::isnan(x[i]) && std::isnan(y[i])) ? INFINITY : std::max(d.max_abs, diff);
      d.scale = std::max(d.scale, static_cast<double>(std::fabs(y[i])));
    }
    return d;
  }
  const std::size_t size = dtype_size(a.dtype());
  const auto x = a.bytes(), y = b.bytes();
  for (std::size_t i = 0; i + size <= x.size(); i += size)
    if (!std::equal(x.begin() + i, x.begin() + i + size, y.begin() + i)) ++d.max_abs;
  return d;
}

std::string joined(const std::vector<std::string>& nodes) {
  std::string text;
  for (const std::string& n : nodes) text += (text.empty() ? "" : ", ") + n;
  return text;
}

struct CheckConfig {
  std::string backends = "vulkan,cpu";
  std::string image = default_image_path();
  double tolerance = 1e-3;
  bool eager_mode = false;
  bool all = false;
};

// Returns 0 when every compared kernel agrees, 1 when one differs.
int run_check(const ModelArgs& args, const CheckConfig& config) {
  std::vector<std::string> names;
  std::stringstream list(config.backends);
  for (std::string item; std::getline(list, item, ',');) names.push_back(item);
  KILN_CHECK(names.size() == 2 && names[0] != names[1], ErrorKind::InvalidArgument,
             "--backends takes two different names, a backend and another backend or 'reference', not '" +
                 config.backends + "'");
  KILN_CHECK(names[0] != kReference || names[1] != kReference, ErrorKind::InvalidArgument,
             "--backends needs at least one backend besides the reference");
  if (names[0] == kReference) std::swap(names[0], names[1]);

  const Model model = args.load();
  const std::vector<Tensor> inputs = check_inputs(model, config.image, args.seed);
  BackendRun runs[2];
  run_backend(model, args, names[0], config.eager_mode, inputs, runs[0]);
  if (names[1] == kReference)
    runs[1].side = run_reference(*runs[0].planned, inputs);
  else
    run_backend(model, args, names[1], config.eager_mode, inputs, runs[1]);
  const Side& first = runs[0].side;
  const Side& second = runs[1].side;
  std::map<std::string, const KernelResult*> second_by_value;
  for (const KernelResult& k : second.kernels) second_by_value[k.value] = &k;

  std::printf("kiln check: %s, %s mode, %s against %s, tolerance %g of each output's largest value\n",
              model.name().c_str(), config.eager_mode ? "eager" : args.mode.c_str(), first.name.c_str(),
              second.name.c_str(), config.tolerance);
  std::printf("%zu kernels on %s", first.kernels.size(), first.name.c_str());
  if (second.name != kReference) std::printf(", %zu on %s", second.kernels.size(), second.name.c_str());
  std::printf("\n\n%4s  %-11s %-12s %-12s %-40s %s\n", "#", "verdict", "max |diff|", "scale", "kernel", "value (nodes)");

  int compared = 0, unmatched = 0;
  std::optional<std::size_t> first_bad;
  for (std::size_t i = 0; i < first.kernels.size(); ++i) {
    const KernelResult& k = first.kernels[i];
    const Tensor* other = nullptr;
    std::string other_kernel;
    if (second.name == kReference) {
      auto it = second.by_value.find(k.value);
      if (it != second.by_value.end()) other = &it->second;
    } else if (auto it = second_by_value.find(k.value); it != second_by_value.end()) {
      other = &it->second->tensor;
      other_kernel = it->second->kernel;
    }
    const Difference d = other ? difference(k.tensor, *other) : Difference{0, 0, false};
    std::string verdict;
    bool bad = false;
    if (!other || !d.comparable) {
      verdict = other ? "other shape" : "no match";
      ++unmatched;
    } else {
      ++compared;
      const bool exact = k.tensor.dtype() != DType::f32;
      bad = exact ? d.max_abs > 0 : !(d.max_abs <= config.tolerance * std::max(d.scale, 1e-30));
      verdict = bad ? "DIFFERS" : "ok";
    }
    if (bad && !first_bad) first_bad = i;
    if (config.all || bad || i + 1 == first.kernels.size() || (first_bad && *first_bad == i))
      std::printf("%4zu  %-11s %-12.4g %-12.4g %-40s %s (%s)%s\n", i, verdict.c_str(), d.max_abs, d.scale,
                  k.kernel.c_str(), k.value.c_str(), joined(k.nodes).c_str(),
                  other_kernel.empty() ? "" : ("  [" + second.name + ": " + other_kernel + "]").c_str());
    if (first_bad) break;
  }
  std::printf("\n%d kernel outputs compared, %d without a counterpart on %s\n", compared, unmatched,
              second.name.c_str());
  if (first_bad) {
    const KernelResult& k = first.kernels[*first_bad];
    std::printf("first kernel that differs: '%s' on %s, writing '%s', fused nodes: %s\n", k.kernel.c_str(),
                first.name.c_str(), k.value.c_str(), joined(k.nodes).c_str());
    return 1;
  }
  KILN_CHECK(compared > 0, ErrorKind::InvalidArgument,
             "no kernel output of " + first.name + " has a counterpart on " + second.name + " to compare with");
  std::printf("every compared kernel agrees within the tolerance\n");
  return 0;
}

}  // namespace

void add_check_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "check", "run a model on two backends (or one and the reference implementation) kernel by kernel and name the "
               "first kernel, with its fused nodes, whose output differs beyond the tolerance; exit status 1 if one does");
  auto args = std::make_shared<ModelArgs>();
  auto config = std::make_shared<CheckConfig>();
  args->add_to(*cmd);
  cmd->add_option("--backends", config->backends, "two backends, or a backend and 'reference'")->capture_default_str();
  cmd->add_option("--image", config->image, "the image a one-image model is fed (other inputs: seeded random values)")
      ->capture_default_str();
  cmd->add_option("--tolerance", config->tolerance,
                  "allowed max |a - b| relative to the largest |b| of each kernel's output (integer outputs: exact)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_flag("--eager", config->eager_mode, "check eager mode (one kernel per op) instead of the compiled model");
  cmd->add_flag("--all", config->all, "list every compared kernel, not only the first that differs");
  cmd->callback([args, config] {
    const int status = run_check(*args, *config);
    if (status != 0) throw CLI::RuntimeError(status);
  });
}

}  // namespace kiln::tools

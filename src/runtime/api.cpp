// kiln::eager, kiln::compile and the callables they return.
#include <kiln/kiln.h>

#include "backends/registry.h"
#include "graph/model_access.h"
#include "src/artifact/model_file.h"
#include "src/base/check.h"
#include "src/runtime/device_pool.h"
#include "src/runtime/executor.h"
#include "src/runtime/shape_sets.h"

namespace kiln {

EagerModel eager(const Model& model, const DeviceOptions& options) {
  Executor::Options o;
  o.backend = options.backend;
  o.device = options.device;
  o.compiled = false;
  o.compile.backend = options.backend;
  o.compile.device = options.device;
  EagerModel m;
  m.impl_ = std::make_shared<Executor>(model, o);
  if (model.has_symbolic_dims()) m.shape_sets_ = std::make_shared<runtime::ShapeSets>(m.impl_, o, CompileOptions{}.recompile_limit, false);
  return m;
}

CompiledModel compile(const Model& model, const CompileOptions& options) {
  Executor::Options o;
  o.backend = options.backend;
  o.device = options.device;
  o.compiled = true;
  o.compile = options;
  // The environment is read here, once; the compiler sees only the result.
  o.settings = Settings::resolve(options.mode, options.settings);
  // Shape sets import the same weights: their plans share rewritten weights.
  if (model.has_symbolic_dims()) o.weight_memo = std::make_shared<graph::passes::WeightMemo>();
  CompiledModel m;
  // Dims marked dynamic are checked here, and the first shape set is compiled with them.
  const runtime::ShapeSets::Dims marked = runtime::ShapeSets::marked_dims(model, options);
  m.impl_ = std::make_shared<Executor>(model, runtime::ShapeSets::with_dynamic_dims(model, marked, o));
  if (model.has_symbolic_dims())
    m.shape_sets_ = std::make_shared<runtime::ShapeSets>(m.impl_, o, options.recompile_limit,
                                                         options.eager_past_recompile_limit);
  return m;
}

void compile_to_file(const Model& model, const std::string& path, const AheadOfTimeOptions& options) {
  artifact::ModelFileOptions o;
  for (const std::string& spec : options.targets) o.targets.push_back(artifact::parse_target_spec(spec));
  o.mode = options.mode;
  o.settings = options.settings;
  o.cache_dir = options.cache_dir;
  o.shape_sets = options.shape_sets;
  artifact::write_model_file(model, path, o);
}

CompiledModel load(const std::string& path, const LoadOptions& options) {
  const artifact::ModelFile file = artifact::read_model_file(path);
  std::string backend = options.backend;
  if (backend.empty()) {
    // The file's backends in order; the first with a device here.
    std::string why;
    for (const auto& plan : file.plans) {
      const backend::Backend* b = nullptr;
      for (const backend::Backend* candidate : backend::all_backends())
        if (candidate->name() == plan->backend) b = candidate;
      if (b == nullptr) {
        why += "\n  " + plan->backend + ": not built into this kiln";
      } else if (auto reason = b->unavailable_reason()) {
        why += "\n  " + plan->backend + ": " + *reason;
      } else if (b->enumerate_devices().empty()) {
        why += "\n  " + plan->backend + ": no device";
      } else {
        backend = plan->backend;
        break;
      }
    }
    KILN_CHECK(!backend.empty(), ErrorKind::DeviceUnavailable,
               "'" + path + "' holds plans for " + artifact::describe_targets(file) + "; none can run here:" + why);
  }
  bool any_for_backend = false;
  for (const auto& plan : file.plans) any_for_backend = any_for_backend || plan->backend == backend;
  KILN_CHECK(any_for_backend, ErrorKind::Unsupported,
             "'" + path + "' holds no plan for backend " + backend + "; it holds " + artifact::describe_targets(file) +
                 ": compile it for " + backend + " with `kiln compile --target " + backend + "`");
  const std::shared_ptr<runtime::DeviceContext> ctx =
      runtime::acquire_device(backend, options.device, options.cache_dir);
  // A plan per shape set the file holds for this backend, each on its own executor.
  artifact::ModelFile for_backend = file;
  std::erase_if(for_backend.plans, [&](const auto& plan) { return plan->backend != backend; });
  std::vector<std::shared_ptr<Executor>> executors;
  for (const std::vector<Shape>& shapes : artifact::shape_sets(for_backend)) {
    std::shared_ptr<const compiler::Plan> plan =
        artifact::select_plan(file, *ctx->backend, ctx->device->target(), shapes);
    Executor::Options o;
    o.backend = backend;
    o.device = options.device;
    o.compiled = true;
    o.compile.backend = backend;
    o.compile.device = options.device;
    o.compile.mode = plan->settings.mode();
    o.compile.cache_dir = options.cache_dir;
    o.settings = plan->settings;
    o.plan = plan;
    executors.push_back(
        std::make_shared<Executor>(internal::make_model(plan->graph, file.model_name).with_task(file.task), o));
  }
  CompiledModel m;
  m.impl_ = executors.front();
  // Calls pick their set; other shapes get an error naming what the file holds.
  m.shape_sets_ = std::make_shared<runtime::ShapeSets>(std::move(executors), path);
  return m;
}

namespace {

// The executor for a call's inputs: the model's own, or its shape set's.
template <class Inputs>
std::shared_ptr<Executor> executor_for(const std::shared_ptr<Executor>& impl,
                                       const std::shared_ptr<runtime::ShapeSets>& sets, const Inputs& inputs) {
  return sets ? sets->select(runtime::shapes_of(inputs)) : impl;
}

RunStats with_shape_sets(RunStats stats, const std::shared_ptr<runtime::ShapeSets>& sets) {
  if (sets) stats.shape_sets = sets->compiled_sets();
  return stats;
}

}  // namespace

std::vector<Tensor> EagerModel::operator()(const std::vector<Tensor>& inputs) {
  return executor_for(impl_, shape_sets_, inputs)->run(inputs);
}
std::vector<DeviceTensor> EagerModel::call_on_device(const std::vector<CallInput>& inputs) {
  return executor_for(impl_, shape_sets_, inputs)->run_on_device(inputs);
}
PendingCall EagerModel::submit(std::vector<CallInput> inputs) {
  return executor_for(impl_, shape_sets_, inputs)->submit(std::move(inputs));
}
DeviceTensor EagerModel::to_device(const Tensor& tensor) const { return impl_->to_device(tensor); }
RunStats EagerModel::stats() const {
  return with_shape_sets((shape_sets_ ? shape_sets_->latest() : impl_)->stats(), shape_sets_);
}
const Model& EagerModel::model() const { return impl_->model(); }

std::vector<Tensor> CompiledModel::operator()(const std::vector<Tensor>& inputs) {
  return executor_for(impl_, shape_sets_, inputs)->run(inputs);
}
std::vector<DeviceTensor> CompiledModel::call_on_device(const std::vector<CallInput>& inputs) {
  return executor_for(impl_, shape_sets_, inputs)->run_on_device(inputs);
}
PendingCall CompiledModel::submit(std::vector<CallInput> inputs) {
  return executor_for(impl_, shape_sets_, inputs)->submit(std::move(inputs));
}
DeviceTensor CompiledModel::to_device(const Tensor& tensor) const { return impl_->to_device(tensor); }
void CompiledModel::prepare() { impl_->prepare(); }
RunStats CompiledModel::stats() const {
  return with_shape_sets((shape_sets_ ? shape_sets_->latest() : impl_)->stats(), shape_sets_);
}
void CompiledModel::wait_for_tuning() {
  impl_->wait_for_tuning();
  if (shape_sets_)
    for (const std::shared_ptr<Executor>& executor : shape_sets_->executors()) executor->wait_for_tuning();
}
const Model& CompiledModel::model() const { return impl_->model(); }
const Model& CompiledModel::model_for(const std::vector<Shape>& input_shapes) {
  return (shape_sets_ ? shape_sets_->select(input_shapes) : impl_)->model();
}
const CompileOptions& CompiledModel::options() const { return impl_->options().compile; }
std::string CompiledModel::explain() const {
  return impl_->explain() + (shape_sets_ ? shape_sets_->describe() : std::string());
}
std::vector<KernelTiming> CompiledModel::profile(const std::vector<Tensor>& inputs, int calls) {
  return executor_for(impl_, shape_sets_, inputs)->profile(inputs, calls);
}
std::vector<KernelTiming> EagerModel::profile(const std::vector<Tensor>& inputs, int calls) {
  return executor_for(impl_, shape_sets_, inputs)->profile(inputs, calls);
}

}  // namespace kiln

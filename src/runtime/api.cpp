// kiln::eager, kiln::compile and the callables they return.
#include <kiln/kiln.h>

#include "backends/registry.h"
#include "src/runtime/executor.h"

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
  CompiledModel m;
  m.impl_ = std::make_shared<Executor>(model, o);
  return m;
}

std::vector<Tensor> EagerModel::operator()(const std::vector<Tensor>& inputs) { return impl_->run(inputs); }
const RunStats& EagerModel::stats() const { return impl_->stats(); }
const Model& EagerModel::model() const { return impl_->model(); }

std::vector<Tensor> CompiledModel::operator()(const std::vector<Tensor>& inputs) { return impl_->run(inputs); }
void CompiledModel::prepare() { impl_->prepare(); }
const RunStats& CompiledModel::stats() const { return impl_->stats(); }
const Model& CompiledModel::model() const { return impl_->model(); }
const CompileOptions& CompiledModel::options() const { return impl_->options().compile; }
std::string CompiledModel::explain() const { return impl_->explain(); }
std::vector<KernelTiming> CompiledModel::profile(const std::vector<Tensor>& inputs, int calls) {
  return impl_->profile(inputs, calls);
}
std::vector<KernelTiming> EagerModel::profile(const std::vector<Tensor>& inputs, int calls) {
  return impl_->profile(inputs, calls);
}

}  // namespace kiln

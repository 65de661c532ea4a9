#include "src/runtime/shape_sets.h"

#include "graph/model_access.h"
#include "src/base/check.h"
#include "src/base/log.h"

#include <kiln/error.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

namespace kiln::runtime {

namespace {

std::vector<Shape> model_shapes(const Model& model) {
  std::vector<Shape> shapes;
  for (const TensorSpec& input : model.inputs()) shapes.push_back(input.shape);
  return shapes;
}

std::string shapes_str(const std::vector<Shape>& shapes) {
  std::string text;
  for (const Shape& s : shapes) text += (text.empty() ? "" : ", ") + shape_str(s);
  return text;
}

bool any(const ShapeSets::Dims& dims) {
  for (const std::vector<bool>& input : dims)
    for (bool dynamic : input)
      if (dynamic) return true;
  return false;
}

// Marks every dim sharing a symbolic name with a dynamic one ("?" names none).
void close_over_names(ShapeSets::Dims& dims, const std::vector<TensorSpec>& inputs) {
  std::set<std::string> names;
  for (std::size_t i = 0; i < dims.size(); ++i)
    for (std::size_t d = 0; d < dims[i].size(); ++d)
      if (dims[i][d] && d < inputs[i].symbolic_dims.size() && inputs[i].symbolic_dims[d] != "?")
        names.insert(inputs[i].symbolic_dims[d]);
  for (std::size_t i = 0; i < dims.size(); ++i)
    for (std::size_t d = 0; d < dims[i].size(); ++d)
      if (d < inputs[i].symbolic_dims.size() && names.count(inputs[i].symbolic_dims[d])) dims[i][d] = true;
}

// "input 'x' dim 0 (batch), input 'x' dim 2 (height)"
std::string dims_text(const ShapeSets::Dims& dims, const std::vector<TensorSpec>& inputs) {
  std::string text;
  for (std::size_t i = 0; i < dims.size(); ++i)
    for (std::size_t d = 0; d < dims[i].size(); ++d) {
      if (!dims[i][d]) continue;
      const std::string& name = d < inputs[i].symbolic_dims.size() ? inputs[i].symbolic_dims[d] : "";
      text += (text.empty() ? "" : ", ") + ("input '" + inputs[i].name + "' dim " + std::to_string(d)) +
              (name.empty() || name == "?" ? "" : " (" + name + ")");
    }
  return text;
}

// The probe's extents: each dynamic symbol (a name, or an unnamed dim) times
// an odd factor. Odd factors keep each extent's power of two, on which vector
// widths depend, so the probe's kernels have the same structure. With
// `distinct`, each symbol has its own (3, 5, 7, ...), so literals of
// different symbols do not look alike and each gets a parameter of its own;
// otherwise all take 3, which keeps linear relations between symbols
// ("past_sequence + sequence") that distinct factors break.
std::vector<Shape> probe_shapes(const std::vector<Shape>& shapes, const ShapeSets::Dims& dims,
                                const std::vector<TensorSpec>& inputs, bool distinct) {
  std::map<std::string, std::int64_t> factor_of;
  std::vector<Shape> probe = shapes;
  for (std::size_t i = 0; i < dims.size(); ++i)
    for (std::size_t d = 0; d < dims[i].size(); ++d) {
      if (!dims[i][d]) continue;
      const std::string& name = d < inputs[i].symbolic_dims.size() ? inputs[i].symbolic_dims[d] : "";
      const std::string symbol = name.empty() || name == "?" ? "?" + std::to_string(i) + ":" + std::to_string(d) : name;
      const std::int64_t next = distinct ? 3 + 2 * static_cast<std::int64_t>(factor_of.size()) : 3;
      const std::int64_t factor = factor_of.try_emplace(symbol, next).first->second;
      const std::int64_t extent = shapes[i][d];
      probe[i][d] = extent == 0 ? factor : extent * factor;
    }
  return probe;
}

}  // namespace

ShapeSets::Dims ShapeSets::marked_dims(const Model& model, const CompileOptions& options) {
  if (options.dynamic_dims.empty()) return {};
  const std::vector<TensorSpec> inputs = model.inputs();
  Dims dims(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) dims[i].assign(inputs[i].shape.size(), false);
  for (const DynamicDim& marked : options.dynamic_dims) {
    const std::string what = "CompileOptions::dynamic_dims: input '" + marked.input + "' dim " + std::to_string(marked.dim);
    std::size_t i = 0;
    std::string names;
    while (i < inputs.size() && inputs[i].name != marked.input) names += (names.empty() ? "" : ", ") + inputs[i++].name;
    KILN_CHECK(i < inputs.size(), ErrorKind::InvalidArgument,
               what + ": model '" + model.name() + "' has no such input (its inputs: " + names + ")");
    KILN_CHECK(marked.dim >= 0 && static_cast<std::size_t>(marked.dim) < inputs[i].shape.size(),
               ErrorKind::InvalidArgument, what + ": the input has rank " + std::to_string(inputs[i].shape.size()));
    const auto d = static_cast<std::size_t>(marked.dim);
    KILN_CHECK(d < inputs[i].symbolic_dims.size() && !inputs[i].symbolic_dims[d].empty(), ErrorKind::InvalidArgument,
               what + " is fixed at " + std::to_string(inputs[i].shape[d]) + " by model '" + model.name() +
                   "' (only symbolic dims can be dynamic)");
    KILN_CHECK(marked.min >= 0 && marked.min <= marked.max, ErrorKind::InvalidArgument,
               what + ": bounds [" + std::to_string(marked.min) + ", " + std::to_string(marked.max) + "] are empty");
    dims[i][d] = true;
  }
  close_over_names(dims, inputs);
  return dims;
}

Executor::Options ShapeSets::with_dynamic_dims(const Model& model, const Dims& dims, Executor::Options options) {
  if (!options.compiled || !any(dims)) return options;
  const auto& source = internal::ModelAccess::shape_source(model);
  if (!source) return options;
  const std::vector<TensorSpec> inputs = model.inputs();
  std::vector<Shape> shapes;
  for (const TensorSpec& input : inputs) shapes.push_back(input.shape);
  const std::string text = dims_text(dims, inputs);
  std::string why;
  for (const bool distinct : {true, false}) {
    try {
      options.dynamic_probe = internal::graph_ptr(source->instantiate(probe_shapes(shapes, dims, inputs, distinct)));
      options.dynamic_dims = text;
      return options;
    } catch (const Error& e) {
      why = e.what();
    }
  }
  // The model admits only some extents (a Reshape that needs a multiple):
  // the set is compiled for its own extents.
  base::log(base::LogLevel::info, "model '" + model.name() + "': " + text + " stay static: the model at other extents fails (" +
                          why + ")");
  return options;
}

std::vector<Shape> shapes_of(const std::vector<Tensor>& inputs) {
  std::vector<Shape> shapes;
  shapes.reserve(inputs.size());
  for (const Tensor& t : inputs) shapes.push_back(t.shape());
  return shapes;
}

std::vector<Shape> shapes_of(const std::vector<CallInput>& inputs) {
  std::vector<Shape> shapes;
  shapes.reserve(inputs.size());
  for (const CallInput& input : inputs)
    shapes.push_back(std::visit([](const auto& t) { return t.shape(); }, input));
  return shapes;
}

ShapeSets::ShapeSets(std::shared_ptr<Executor> first, Executor::Options options, int limit, bool eager_past_limit)
    : options_(std::move(options)), limit_(limit), eager_past_limit_(eager_past_limit), source_model_(first->model()) {
  KILN_CHECK(limit_ >= 1, ErrorKind::InvalidArgument,
             "CompileOptions::recompile_limit is " + std::to_string(limit_) + "; it must be at least 1");
  Dims marked = marked_dims(source_model_, options_.compile);
  compiled_.push_back({model_shapes(source_model_), first, "", std::move(marked), {}, 1});
  latest_ = std::move(first);
}

ShapeSets::ShapeSets(std::vector<std::shared_ptr<Executor>> held, std::string file)
    : options_(held.at(0)->options()),
      limit_(static_cast<int>(held.size())),
      eager_past_limit_(false),
      source_model_(held.front()->model()),
      file_(std::move(file)) {
  for (std::shared_ptr<Executor>& executor : held)
    compiled_.push_back({model_shapes(executor->model()), std::move(executor), "", {}, {}, 1});
  latest_ = compiled_.front().executor;
}

std::shared_ptr<Executor> ShapeSets::make(Model model, const Dims& dims, const compiler::Plan* set_plan,
                                          std::string extends,
                                          std::vector<std::shared_ptr<const compiler::Plan>> set_plans) const {
  Executor::Options options = with_dynamic_dims(model, dims, options_);
  if (options.dynamic_probe) {
    if (set_plan) {
      options.pinned_sites = set_plan->site_knobs;
      options.pinned_choices = set_plan->graph_choices;
    }
    options.set_plans = std::move(set_plans);
  }
  options.extends = std::move(extends);
  return std::make_shared<Executor>(std::move(model), std::move(options));
}

bool ShapeSets::serves(const Set& set, const std::vector<Shape>& shapes) const {
  // A set whose probe could not be made was compiled static: it serves only its own shapes.
  if (!any(set.dynamic) || !set.executor->options().dynamic_probe || shapes.size() != set.shapes.size()) return false;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (shapes[i].size() != set.shapes[i].size()) return false;
    for (std::size_t d = 0; d < shapes[i].size(); ++d)
      if (!set.dynamic[i][d] && shapes[i][d] != set.shapes[i][d]) return false;
  }
  const std::vector<TensorSpec> inputs = source_model_.inputs();
  for (const DynamicDim& marked : options_.compile.dynamic_dims)
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].name != marked.input || static_cast<std::size_t>(marked.dim) >= shapes[i].size()) continue;
      const std::int64_t extent = shapes[i][static_cast<std::size_t>(marked.dim)];
      KILN_CHECK(extent >= marked.min && extent <= marked.max, ErrorKind::ShapeMismatch,
                 "model '" + source_model_.name() + "': input '" + marked.input + "' dim " + std::to_string(marked.dim) +
                     " is " + std::to_string(extent) + ", outside the bounds [" + std::to_string(marked.min) + ", " +
                     std::to_string(marked.max) + "] it was marked dynamic with");
    }
  return true;
}

ShapeSets::Dims ShapeSets::dims_for_new_set(const std::vector<Shape>& shapes) const {
  Dims dims = compiled_.front().dynamic;
  dims.resize(shapes.size());
  for (std::size_t i = 0; i < shapes.size(); ++i) dims[i].resize(shapes[i].size(), false);
  if (!options_.compiled || !options_.compile.automatic_dynamic) return dims;
  // Dims whose extent changed from the first set's, and those dynamic already.
  const std::vector<Shape>& first = compiled_.front().shapes;
  for (std::size_t i = 0; i < shapes.size() && i < first.size(); ++i)
    for (std::size_t d = 0; d < shapes[i].size() && shapes[i].size() == first[i].size(); ++d)
      if (shapes[i][d] != first[i][d]) dims[i][d] = true;
  for (const Set& set : compiled_)
    for (std::size_t i = 0; i < set.dynamic.size() && i < dims.size(); ++i)
      for (std::size_t d = 0; d < set.dynamic[i].size() && d < dims[i].size(); ++d)
        if (set.dynamic[i][d]) dims[i][d] = true;
  close_over_names(dims, source_model_.inputs());
  return dims;
}

std::string ShapeSets::why_new(const std::vector<Shape>& shapes) const {
  // Against the first shape set, as the guard that failed first.
  const std::vector<TensorSpec> inputs = source_model_.inputs();
  const std::vector<Shape>& first = compiled_.front().shapes;
  std::string why;
  for (std::size_t i = 0; i < shapes.size() && i < first.size(); ++i) {
    if (shapes[i] == first[i]) continue;
    const std::string input = "input '" + (i < inputs.size() ? inputs[i].name : std::to_string(i)) + "'";
    if (shapes[i].size() != first[i].size()) {
      why += (why.empty() ? "" : ", ") + input + " was " + shape_str(first[i]) + ", now " + shape_str(shapes[i]);
      continue;
    }
    for (std::size_t d = 0; d < shapes[i].size(); ++d)
      if (shapes[i][d] != first[i][d])
        why += (why.empty() ? "" : ", ") + input + " dim " + std::to_string(d) + " was " + std::to_string(first[i][d]) +
               ", now " + std::to_string(shapes[i][d]);
  }
  return why;
}

std::shared_ptr<Executor> ShapeSets::select(const std::vector<Shape>& shapes) {
  std::lock_guard lock(mutex_);
  for (auto* sets : {&compiled_, &eager_})
    for (Set& set : *sets) {
      // A model whose import waited is imported at the first call's shapes, even the placeholders'.
      if (set.shapes == shapes && !set.executor->model().import_pending()) return latest_ = set.executor;
      for (auto member = set.members.begin(); member != set.members.end(); ++member)
        if (member->shapes == shapes) {
          std::rotate(set.members.begin(), member, member + 1);  // most recent first
          return latest_ = set.members.front().executor;
        }
    }
  if (!file_.empty()) {
    // Another number of inputs: the executor's own error says so.
    if (shapes.size() != compiled_.front().shapes.size()) return compiled_.front().executor;
    const std::vector<TensorSpec> inputs = source_model_.inputs();
    auto named = [&](const std::vector<Shape>& set) {
      std::string text;
      for (std::size_t i = 0; i < set.size(); ++i)
        text += (i ? ", " : "") + inputs[i].name + " " + std::string(dtype_name(inputs[i].dtype)) + shape_str(set[i]);
      return text;
    };
    std::string held, spec;
    for (std::size_t k = 0; k < compiled_.size(); ++k)
      held += (k == 0 ? "" : k + 1 == compiled_.size() ? " and " : "; ") + named(compiled_[k].shapes);
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      std::string dims;
      for (const std::int64_t extent : shapes[i]) dims += (dims.empty() ? "" : "x") + std::to_string(extent);
      spec += (i ? ";" : "") + inputs[i].name + "=" + dims;
    }
    throw_error(ErrorKind::ShapeMismatch,
                "'" + file_ + "' holds plans for input shapes " + held + "; this call gives " + named(shapes) +
                    ". A compiled-model file runs only the shape sets compiled into it: add this one with "
                    "`kiln compile --shape-set '" + spec + "'` (AheadOfTimeOptions::shape_sets), or compile the "
                    "model itself with kiln::compile, which compiles new shapes as they come");
  }
  const auto& source = internal::ModelAccess::shape_source(source_model_);
  KILN_ASSERT(source != nullptr);
  // The model for these shapes: errors name what the file fixes.
  const auto import_start = std::chrono::steady_clock::now();
  Model model = [&] {
    try {
      return source->instantiate(shapes);
    } catch (const Error& e) {
      throw Error(e.kind(), "model '" + source_model_.name() + "': " + e.what());
    }
  }();
  const auto import_ms = static_cast<int>(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - import_start).count());
  // Until the first set has run (a call or prepare()), its shapes are only
  // those the model was imported at: the first call's shapes take its place,
  // as torch.compile compiles for the shapes of its first call.
  if (compiled_.size() == 1 && !compiled_.front().executor->prepared()) {
    base::log(base::LogLevel::info, "model '" + source_model_.name() + "': " + (options_.compiled ? "compiling" : "preparing eager") +
                            " for the first call's input shapes " + shapes_str(shapes));
    Dims marked = std::move(compiled_.front().dynamic);
    std::shared_ptr<Executor> first = make(std::move(model), marked);
    compiled_.front() = {shapes, std::move(first), "", std::move(marked), {}, 1};
    return latest_ = compiled_.front().executor;
  }
  for (std::size_t k = 0; k < compiled_.size(); ++k) {
    Set& set = compiled_[k];
    if (!serves(set, shapes)) continue;
    base::log(base::LogLevel::info, "model '" + source_model_.name() + "': input shapes " + shapes_str(shapes) +
                            " served by shape set " + std::to_string(k + 1) + " (dynamic: " +
                            dims_text(set.dynamic, source_model_.inputs()) +
                            "): its kernels reused where their code does not depend on the extents (imported at "
                            "these shapes in " + std::to_string(import_ms) + " ms)");
    // The set's knobs and graph choices, so that the heuristic's and the
    // passes' choices for these extents do not change the kernels' structure.
    std::shared_ptr<const compiler::Plan> set_plan;
    if (set.executor->prepared()) set_plan = set.executor->current_plan();
    // The plans of the set and of its members so far, for their kernels:
    // extents whose kernels are all among them plan without a probe.
    std::vector<std::shared_ptr<const compiler::Plan>> set_plans;
    auto add_plan = [&](const std::shared_ptr<Executor>& executor) {
      if (!executor->prepared()) return;
      std::shared_ptr<const compiler::Plan> plan = executor->current_plan();
      if (!plan->kernels.empty()) set_plans.push_back(std::move(plan));
    };
    add_plan(set.executor);
    for (const Member& member : set.members) add_plan(member.executor);
    set.members.insert(set.members.begin(),
                       {shapes,  make(std::move(model), set.dynamic, set_plan.get(), "shape set " + std::to_string(k + 1),
                                     std::move(set_plans))});
    if (set.members.size() > kKeptMembers) set.members.pop_back();
    ++set.served;
    return latest_ = set.members.front().executor;
  }
  const std::string why = why_new(shapes);
  // Eager mode compiles nothing a set could amortise, so it has no limit:
  // it keeps the first set and the latest ones, dropping the oldest other.
  if (!options_.compiled && static_cast<int>(compiled_.size()) >= limit_ && compiled_.size() > 1) {
    base::log(base::LogLevel::info, "model '" + source_model_.name() + "': eager shape sets past " + std::to_string(limit_) +
                            ": dropping the oldest after the first, " + shapes_str(compiled_[1].shapes));
    compiled_.erase(compiled_.begin() + 1);
  }
  const bool within_limit = static_cast<int>(compiled_.size()) < limit_;
  if (within_limit) {
    base::log(base::LogLevel::info, "model '" + source_model_.name() + "': new input shapes (" + why + "): " +
                            (options_.compiled ? "compiling" : "preparing eager") + " shape set " +
                            std::to_string(compiled_.size() + 1) + " of " + std::to_string(limit_));
    Dims dims = dims_for_new_set(shapes);
    std::shared_ptr<Executor> executor = make(std::move(model), dims);
    compiled_.push_back({shapes, std::move(executor), why, std::move(dims), {}, 1});
    return latest_ = compiled_.back().executor;
  }
  const std::string past = "model '" + source_model_.name() + "': input shapes " + shapes_str(shapes) + " (" + why +
                           ") would be shape set " + std::to_string(compiled_.size() + 1) + ", past the recompile limit of " +
                           std::to_string(limit_);
  KILN_CHECK(eager_past_limit_ && options_.compiled, ErrorKind::ShapeMismatch,
             past + " (raise CompileOptions::recompile_limit, or set eager_past_recompile_limit to run such calls "
                    "eagerly)");
  base::log(base::LogLevel::warning, past + ": running it eagerly");
  Executor::Options eager = options_;
  eager.compiled = false;
  eager_.push_back({shapes, std::make_shared<Executor>(std::move(model), eager), why, {}, {}, 1});
  return latest_ = eager_.back().executor;
}

std::shared_ptr<Executor> ShapeSets::latest() const {
  std::lock_guard lock(mutex_);
  return latest_;
}

int ShapeSets::compiled_sets() const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(compiled_.size());
}

std::vector<std::shared_ptr<Executor>> ShapeSets::executors() const {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<Executor>> all;
  for (const Set& set : compiled_) {
    all.push_back(set.executor);
    for (const Member& member : set.members) all.push_back(member.executor);
  }
  return all;
}

std::string ShapeSets::describe() const {
  std::lock_guard lock(mutex_);
  std::string text = file_.empty() ? "shape sets (" + std::string(options_.compiled ? "compiled" : "eager") + "): " +
                                         std::to_string(compiled_.size()) + " of " + std::to_string(limit_) + "\n"
                                   : "shape sets held by '" + file_ + "': " + std::to_string(compiled_.size()) + "\n";
  for (const Set& set : compiled_) {
    text += "  " + shapes_str(set.shapes) + (!file_.empty() ? "" : set.why.empty() ? " (the first)" : ": " + set.why);
    if (any(set.dynamic) && set.executor->options().dynamic_probe)
      text += "; dynamic: " + dims_text(set.dynamic, source_model_.inputs()) + " (" + std::to_string(set.served) +
              " input shape(s) served)";
    text += "\n";
  }
  for (const Set& set : eager_) text += "  " + shapes_str(set.shapes) + ": " + set.why + " (eager: past the limit)\n";
  return text;
}

}  // namespace kiln::runtime

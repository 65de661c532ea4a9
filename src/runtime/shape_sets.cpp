#include "src/runtime/shape_sets.h"

#include "graph/model_access.h"
#include "src/runtime/log.h"

#include <kiln/error.h>

#include <algorithm>

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

}  // namespace

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
  compiled_.push_back({model_shapes(source_model_), first, ""});
  latest_ = std::move(first);
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
    for (const Set& set : *sets)
      if (set.shapes == shapes) return latest_ = set.executor;
  const auto& source = internal::ModelAccess::shape_source(source_model_);
  KILN_ASSERT(source != nullptr);
  // The model for these shapes: errors name what the file fixes.
  Model model = [&] {
    try {
      return source->instantiate(shapes);
    } catch (const Error& e) {
      throw Error(e.kind(), "model '" + source_model_.name() + "': " + e.what());
    }
  }();
  // Until the first set has run (a call or prepare()), its shapes are only
  // those the model was imported at: the first call's shapes take its place,
  // as torch.compile compiles for the shapes of its first call.
  if (compiled_.size() == 1 && !compiled_.front().executor->prepared()) {
    log(LogLevel::info, "model '" + source_model_.name() + "': " + (options_.compiled ? "compiling" : "preparing eager") +
                            " for the first call's input shapes " + shapes_str(shapes));
    compiled_.front() = {shapes, std::make_shared<Executor>(std::move(model), options_), ""};
    return latest_ = compiled_.front().executor;
  }
  const std::string why = why_new(shapes);
  const bool within_limit = static_cast<int>(compiled_.size()) < limit_;
  if (within_limit) {
    log(LogLevel::info, "model '" + source_model_.name() + "': new input shapes (" + why + "): " +
                            (options_.compiled ? "compiling" : "preparing eager") + " shape set " +
                            std::to_string(compiled_.size() + 1) + " of " + std::to_string(limit_));
    compiled_.push_back({shapes, std::make_shared<Executor>(std::move(model), options_), why});
    return latest_ = compiled_.back().executor;
  }
  const std::string past = "model '" + source_model_.name() + "': input shapes " + shapes_str(shapes) + " (" + why +
                           ") would be shape set " + std::to_string(compiled_.size() + 1) + ", past the recompile limit of " +
                           std::to_string(limit_);
  KILN_CHECK(eager_past_limit_ && options_.compiled, ErrorKind::ShapeMismatch,
             past + " (raise CompileOptions::recompile_limit, or set eager_past_recompile_limit to run such calls "
                    "eagerly)");
  log(LogLevel::warning, past + ": running it eagerly");
  Executor::Options eager = options_;
  eager.compiled = false;
  eager_.push_back({shapes, std::make_shared<Executor>(std::move(model), eager), why});
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

std::string ShapeSets::describe() const {
  std::lock_guard lock(mutex_);
  std::string text = "shape sets (" + std::string(options_.compiled ? "compiled" : "eager") + "): " +
                     std::to_string(compiled_.size()) + " of " + std::to_string(limit_) + "\n";
  for (const Set& set : compiled_)
    text += "  " + shapes_str(set.shapes) + (set.why.empty() ? " (the first)" : ": " + set.why) + "\n";
  for (const Set& set : eager_) text += "  " + shapes_str(set.shapes) + ": " + set.why + " (eager: past the limit)\n";
  return text;
}

}  // namespace kiln::runtime

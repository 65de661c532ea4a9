#include "src/runtime/subgraph_models.h"

#include "graph/model_access.h"
#include "graph/passes/rewrite.h"
#include "src/base/check.h"

#include <algorithm>
#include <optional>

namespace kiln::runtime {

namespace {

// A subgraph made into a model for the shapes of a call: its dynamic extents
// are the model's symbolic dims ("?"), its fixed ones stay fixed.
class SubgraphShapes final : public internal::ShapeSource, public std::enable_shared_from_this<SubgraphShapes> {
 public:
  SubgraphShapes(std::shared_ptr<const graph::Graph> subgraph, std::string name, const std::vector<Shape>& first)
      : subgraph_(std::move(subgraph)), name_(std::move(name)) {
    for (std::size_t i = 0; i < first.size(); ++i) {
      const graph::TensorType& declared = subgraph_->value(subgraph_->inputs()[i]).type;
      const bool rank_known = !declared.dynamic || !declared.shape.empty();
      std::vector<std::string> dims;
      for (std::size_t d = 0; d < first[i].size(); ++d)
        dims.push_back(rank_known && d < declared.shape.size() && declared.shape[d] != graph::kDynamicDim ? "" : "?");
      symbolic_.push_back(std::move(dims));
    }
  }

  const std::vector<std::vector<std::string>>& symbolic_dims() const override { return symbolic_; }

  Model instantiate(const std::vector<Shape>& input_shapes) const override {
    const std::vector<graph::ValueId>& inputs = subgraph_->inputs();
    KILN_CHECK(input_shapes.size() == inputs.size(), ErrorKind::InvalidArgument,
               "subgraph '" + name_ + "' takes " + std::to_string(inputs.size()) + " inputs, got " +
                   std::to_string(input_shapes.size()));
    std::vector<graph::TensorType> types;
    for (std::size_t i = 0; i < inputs.size(); ++i)
      types.push_back({subgraph_->value(inputs[i]).type.dtype, input_shapes[i]});
    auto graph = std::make_shared<const graph::Graph>(graph::passes::with_input_types(*subgraph_, types));
    return internal::ModelAccess::with_shape_source(internal::make_model(std::move(graph), name_),
                                                    shared_from_this());
  }

 private:
  std::shared_ptr<const graph::Graph> subgraph_;
  std::string name_;
  std::vector<std::vector<std::string>> symbolic_;
};

std::vector<Shape> shapes_of(std::span<const Tensor> tensors) {
  std::vector<Shape> shapes;
  for (const Tensor& t : tensors) shapes.push_back(t.shape());
  return shapes;
}

std::vector<std::size_t> ranks_of(std::span<const Tensor> tensors) {
  std::vector<std::size_t> ranks;
  for (const Tensor& t : tensors) ranks.push_back(t.shape().size());
  return ranks;
}

}  // namespace

struct SubgraphModels::Entry {
  const graph::Graph* subgraph = nullptr;
  std::vector<std::size_t> ranks;
  std::string name;
  std::optional<CompiledModel> compiled;
  std::optional<EagerModel> eager;
  int calls = 0;
};

SubgraphModels::SubgraphModels(std::string model_name, const Executor::Options& options)
    : model_name_(std::move(model_name)), options_(options) {
  // The enclosing model's input dims mean nothing to a subgraph, and a
  // subgraph of a model with graph breaks has its own breaks to run.
  options_.compile.dynamic_dims.clear();
  options_.compile.fullgraph = false;
}

SubgraphModels::~SubgraphModels() = default;

graph::OpSchema::SubgraphRunner SubgraphModels::runner(const graph::Node& node) {
  return [this, &node](const graph::Graph& subgraph, std::span<const Tensor> inputs) {
    return run(node, subgraph, inputs);
  };
}

std::vector<Tensor> SubgraphModels::run(const graph::Node& node, const graph::Graph& subgraph,
                                        std::span<const Tensor> inputs) {
  const std::vector<std::size_t> ranks = ranks_of(inputs);
  auto found = std::find_if(entries_.begin(), entries_.end(), [&](const std::unique_ptr<Entry>& e) {
    return e->subgraph == &subgraph && e->ranks == ranks;
  });
  if (found == entries_.end()) {
    const auto held = std::find_if(node.subgraphs.begin(), node.subgraphs.end(),
                                   [&](const auto& s) { return s.get() == &subgraph; });
    KILN_ASSERT(held != node.subgraphs.end());
    const auto index = held - node.subgraphs.begin();
    auto entry = std::make_unique<Entry>();
    entry->subgraph = &subgraph;
    entry->ranks = ranks;
    entry->name = model_name_ + "/" + node.name + "/" +
                  (node.op == "If" ? (index == 0 ? "then" : "else") : "body");
    if (std::any_of(entries_.begin(), entries_.end(), [&](const auto& e) { return e->name == entry->name; })) {
      std::string text;
      for (std::size_t r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
      entry->name += " (input ranks " + text + ")";
    }
    auto source = std::make_shared<SubgraphShapes>(*held, entry->name, shapes_of(inputs));
    const Model model = source->instantiate(shapes_of(inputs));
    if (options_.compiled)
      entry->compiled = compile(model, options_.compile);
    else
      entry->eager = eager(model, {options_.backend, options_.device});
    entries_.push_back(std::move(entry));
    found = entries_.end() - 1;
  }
  Entry& entry = **found;
  ++entry.calls;
  const std::vector<Tensor> args(inputs.begin(), inputs.end());
  return entry.compiled ? (*entry.compiled)(args) : (*entry.eager)(args);
}

std::string SubgraphModels::describe() const {
  std::string out;
  for (const auto& e : entries_) {
    const RunStats stats = e->compiled ? e->compiled->stats() : e->eager->stats();
    out += "  '" + e->name + "': " + (e->compiled ? "compiled, " : "eager, ") + std::to_string(stats.kernels) +
           " kernels, " + std::to_string(stats.shape_sets) + " shape set(s), " + std::to_string(e->calls) +
           " call(s)\n";
  }
  return out;
}

}  // namespace kiln::runtime

// kiln::Model (include/kiln/model.h): a verified, immutable graph with a name.
#include <kiln/error.h>
#include <kiln/model.h>

#include "graph/ir.h"
#include "graph/model_access.h"

namespace kiln {

namespace {

std::vector<TensorSpec> specs(const graph::Graph& g, const std::vector<graph::ValueId>& ids) {
  std::vector<TensorSpec> result;
  result.reserve(ids.size());
  for (graph::ValueId id : ids) {
    const graph::Value& v = g.value(id);
    result.push_back({v.name, v.type.dtype, v.type.shape});
  }
  return result;
}

}  // namespace

Model::Model(std::shared_ptr<const graph::Graph> graph, std::string name)
    : graph_(std::move(graph)), name_(std::move(name)) {
  KILN_CHECK(graph_ != nullptr, ErrorKind::InvalidArgument, "model '" + name_ + "' has no graph");
  try {
    graph_->verify();
  } catch (const Error& e) {
    throw Error(e.kind(), "model '" + name_ + "': " + e.what());
  }
}

std::vector<TensorSpec> Model::inputs() const {
  std::vector<TensorSpec> result = specs(*graph_, graph_->inputs());
  if (shapes_ != nullptr) {
    const auto& symbolic = shapes_->symbolic_dims();
    for (std::size_t i = 0; i < result.size() && i < symbolic.size(); ++i) result[i].symbolic_dims = symbolic[i];
  }
  return result;
}

std::vector<TensorSpec> Model::outputs() const {
  internal::ModelAccess::check_imported(*this);
  return specs(*graph_, graph_->outputs());
}

Model Model::with_task(std::string task) const {
  Model copy = *this;
  copy.task_ = std::move(task);
  return copy;
}

}  // namespace kiln

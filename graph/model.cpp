// kiln::Model (include/kiln/model.h): a verified, immutable graph with a name.
#include <kiln/error.h>
#include <kiln/model.h>

#include "graph/ir.h"
#include "graph/model_access.h"
#include "graph/passes/passes.h"
#include "src/base/check.h"

#include <utility>

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

// A model with symbolic dims made again for other shapes is converted again.
class FloatTypeShapeSource : public internal::ShapeSource {
 public:
  FloatTypeShapeSource(std::shared_ptr<const internal::ShapeSource> source, DType dtype)
      : source_(std::move(source)), dtype_(dtype) {}
  const std::vector<std::vector<std::string>>& symbolic_dims() const override { return source_->symbolic_dims(); }
  Model instantiate(const std::vector<Shape>& input_shapes) const override {
    return source_->instantiate(input_shapes).with_float_type(dtype_);
  }

 private:
  std::shared_ptr<const internal::ShapeSource> source_;
  DType dtype_;
};

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

Model Model::with_float_type(DType dtype) const {
  KILN_CHECK(dtype == DType::f16 || dtype == DType::bf16, ErrorKind::InvalidArgument,
             "model '" + name_ + "': with_float_type converts to f16 or bf16, not " + std::string(dtype_name(dtype)));
  std::shared_ptr<const internal::ShapeSource> shapes;
  if (shapes_) shapes = std::make_shared<const FloatTypeShapeSource>(shapes_, dtype);
  if (pending_) {
    // The graph holds the inputs alone until the first call imports the model (converted then).
    Model copy = internal::ModelAccess::pending(graph_, name_, shapes, *pending_);
    copy.task_ = task_;
    return copy;
  }
  graph::passes::PassResult converted = graph::passes::convert_float_type(*graph_, {.to = dtype});
  Model copy(std::make_shared<const graph::Graph>(std::move(converted.graph)), name_);
  copy.task_ = task_;
  copy.shapes_ = std::move(shapes);
  return copy;
}

}  // namespace kiln

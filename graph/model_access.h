// kiln's own way into kiln::Model (include/kiln/model.h), whose public API
// names no internal type: the graph it holds, and a model made from a graph.
// For the builder, ONNX import, the compiler, kiln's tools and tests; never
// installed.
#pragma once

#include <kiln/error.h>
#include <kiln/model.h>

#include "graph/ir.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kiln::internal {

// How a model whose inputs have symbolic dims is made again for other input
// shapes (for ONNX: the import re-run with those shapes, as torch.compile
// re-traces). Shared by every model made from one source.
class ShapeSource {
 public:
  virtual ~ShapeSource() = default;
  // Per input (in the model's order), per dim: "" for a fixed extent, else
  // the symbolic name ("?" when unnamed).
  virtual const std::vector<std::vector<std::string>>& symbolic_dims() const = 0;
  // The model for these input shapes. Throws ShapeMismatch naming the input
  // and dim when a shape breaks what the file fixes: the rank, a fixed
  // extent, or two dims of one name that differ.
  virtual Model instantiate(const std::vector<Shape>& input_shapes) const = 0;
};

// Model's friend: the only code that reads or sets its private members.
struct ModelAccess {
  static const std::shared_ptr<const graph::Graph>& graph_ptr(const Model& model) { return model.graph_; }
  static Model make(std::shared_ptr<const graph::Graph> graph, std::string name) {
    return Model(std::move(graph), std::move(name));
  }
  static const std::shared_ptr<const ShapeSource>& shape_source(const Model& model) { return model.shapes_; }
  static Model with_shape_source(Model model, std::shared_ptr<const ShapeSource> source) {
    model.shapes_ = std::move(source);
    return model;
  }
  // A model whose import waits for real shapes: `inputs` holds its graph
  // inputs alone, `why` is the error importing at placeholders gave.
  static Model pending(std::shared_ptr<const graph::Graph> inputs, std::string name,
                       std::shared_ptr<const ShapeSource> source, Error why) {
    Model model(std::move(inputs), std::move(name));
    model.shapes_ = std::move(source);
    model.pending_ = std::make_shared<const Error>(std::move(why));
    return model;
  }
  // Throws why a pending model's import waits; nothing for an imported one.
  static void check_imported(const Model& model) {
    if (model.pending_) throw Error(*model.pending_);
  }
};

// The model's graph; throws the placeholder error for a model whose import waits.
inline const graph::Graph& graph(const Model& model) {
  ModelAccess::check_imported(model);
  return *ModelAccess::graph_ptr(model);
}
inline std::shared_ptr<const graph::Graph> graph_ptr(const Model& model) {
  ModelAccess::check_imported(model);
  return ModelAccess::graph_ptr(model);
}

// Verifies the graph; throws kiln::Error naming the model and the first problem.
inline Model make_model(std::shared_ptr<const graph::Graph> graph, std::string name = "model") {
  return ModelAccess::make(std::move(graph), std::move(name));
}

}  // namespace kiln::internal

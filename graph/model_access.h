// kiln's own way into kiln::Model (include/kiln/model.h), whose public API
// names no internal type: the graph it holds, and a model made from a graph.
// For the builder, ONNX import, the compiler, kiln's tools and tests; never
// installed.
#pragma once

#include <kiln/model.h>

#include "graph/ir.h"

#include <memory>
#include <string>
#include <utility>

namespace kiln::internal {

// Model's friend: the only code that reads or sets its private members.
struct ModelAccess {
  static const std::shared_ptr<const graph::Graph>& graph_ptr(const Model& model) { return model.graph_; }
  static Model make(std::shared_ptr<const graph::Graph> graph, std::string name) {
    return Model(std::move(graph), std::move(name));
  }
};

inline const graph::Graph& graph(const Model& model) { return *ModelAccess::graph_ptr(model); }
inline std::shared_ptr<const graph::Graph> graph_ptr(const Model& model) { return ModelAccess::graph_ptr(model); }

// Verifies the graph; throws kiln::Error naming the model and the first problem.
inline Model make_model(std::shared_ptr<const graph::Graph> graph, std::string name = "model") {
  return ModelAccess::make(std::move(graph), std::move(name));
}

}  // namespace kiln::internal

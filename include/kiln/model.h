// kiln::Model: an immutable graph ready to run eagerly or to compile.
#pragma once

#include <kiln/dtype.h>

#include <memory>
#include <string>
#include <vector>

namespace kiln {

namespace graph { class Graph; }

struct TensorSpec {
  std::string name;
  DType dtype;
  Shape shape;
};

class Model {
 public:
  // Verifies the graph; throws kiln::Error naming the first problem.
  explicit Model(std::shared_ptr<const graph::Graph> graph, std::string name = "model");
  const graph::Graph& graph() const { return *graph_; }
  std::shared_ptr<const graph::Graph> graph_ptr() const { return graph_; }
  const std::string& name() const { return name_; }
  std::vector<TensorSpec> inputs() const;
  std::vector<TensorSpec> outputs() const;

 private:
  std::shared_ptr<const graph::Graph> graph_;
  std::string name_;
};

}  // namespace kiln

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

  // What the outputs mean, so tools can present them: "classification"
  // (logits [N, classes]), "segmentation" (logits [N, classes, H, W]),
  // "detection" (model-specific boxes and scores, see the model's docs), or
  // "" (unknown, e.g. an ONNX file).
  const std::string& task() const { return task_; }
  Model with_task(std::string task) const;

 private:
  std::shared_ptr<const graph::Graph> graph_;
  std::string name_;
  std::string task_;
};

}  // namespace kiln

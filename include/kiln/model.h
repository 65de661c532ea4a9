// kiln::Model: an immutable graph ready to run eagerly or to compile.
#pragma once

#include <kiln/dtype.h>
#include <kiln/export.h>

#include <memory>
#include <string>
#include <vector>

namespace kiln {

// Private implementation details: the graph IR, and kiln's own tests' and
// tools' way in (graph/model_access.h).
namespace graph { class Graph; }
namespace internal { struct ModelAccess; class ShapeSource; }
class Error;

struct KILN_API TensorSpec {
  std::string name;
  DType dtype;
  Shape shape;  // as this model was made for (symbolic dims at the sizes chosen)
  // Per dim, for a model with symbolic input dims: "" where the extent is
  // fixed, else the dim's name in the file ("batch"; "?" when unnamed). Empty
  // for outputs and for models without symbolic dims.
  std::vector<std::string> symbolic_dims{};
};

// Made by kiln::Builder::build(), kiln::models and kiln::load_onnx().
class KILN_API Model {
 public:
  const std::string& name() const { return name_; }
  std::vector<TensorSpec> inputs() const;
  std::vector<TensorSpec> outputs() const;

  // What the outputs mean, so tools can present them: "classification"
  // (logits [N, classes]), "segmentation" (logits [N, classes, H, W]),
  // "detection" (model-specific boxes and scores, see the model's docs), or
  // "" (unknown, e.g. an ONNX file).
  const std::string& task() const { return task_; }
  Model with_task(std::string task) const;
  // This model with its f32 computation in `dtype` (f16 or bf16), as
  // PyTorch's model.half() or autocast runs it: weights converted once,
  // every f32 tensor between kernels stored in `dtype`, kernels computing in
  // f32 and rounding what they store; inputs and outputs keep their types (a
  // Cast after each f32 input and before each f32 output). eager() and
  // compile() run it as any model; compile's `dtype` setting converts a
  // model the same way inside the compiler. Throws InvalidArgument for
  // another dtype.
  Model with_float_type(DType dtype) const;

  // Whether some input dim is symbolic (an ONNX file exported with dynamic
  // axes): compile() and eager() then take calls of other input shapes, each
  // new shape set compiled once (CompileOptions::recompile_limit).
  bool has_symbolic_dims() const { return shapes_ != nullptr; }

  // Whether import waits for real input shapes: an ONNX model with symbolic
  // dims whose import at placeholder extents failed (kiln::load_onnx). Its
  // inputs() are known; its first call imports it at that call's shapes, and
  // until then outputs(), prepare(), explain() and compile_to_file() throw
  // the placeholder import's error, which names the placeholder dims and the
  // options that set them.
  bool import_pending() const { return pending_ != nullptr; }

 private:
  friend struct internal::ModelAccess;
  // Verifies the graph; throws kiln::Error naming the first problem.
  Model(std::shared_ptr<const graph::Graph> graph, std::string name);

  std::shared_ptr<const graph::Graph> graph_;
  std::string name_;
  std::string task_;
  std::shared_ptr<const internal::ShapeSource> shapes_;  // null: every input shape is fixed
  std::shared_ptr<const Error> pending_;  // why import waits (graph_ then holds the inputs only); null: imported
};

}  // namespace kiln

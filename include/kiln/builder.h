// kiln::Builder: write a model in C++, op by op, with shapes checked as you go.
//
//   kiln::Builder b("tiny");
//   auto x = b.input("x", kiln::DType::f32, {1, 3, 32, 32});
//   auto w = b.constant("conv.weight", weight_tensor);
//   auto y = b.relu(b.conv2d(x, w, std::nullopt, {.stride = {2, 2}, .padding = {1, 1, 1, 1}}));
//   kiln::Model m = b.build({y});
//
// Every op throws kiln::Error (ShapeMismatch/InvalidArgument) naming the node
// when its inputs do not fit. Node names come from the scope stack
// ("layer1.0.conv1") or are generated.
#pragma once

#include <kiln/attributes.h>
#include <kiln/export.h>
#include <kiln/model.h>
#include <kiln/tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kiln {

namespace graph { class Graph; }

struct KILN_API Conv2dOptions {
  std::vector<std::int64_t> stride = {1, 1};
  std::vector<std::int64_t> padding = {0, 0, 0, 0};  // top, left, bottom, right (ONNX order)
  std::vector<std::int64_t> dilation = {1, 1};
  std::int64_t groups = 1;
};

struct KILN_API Pool2dOptions {
  std::vector<std::int64_t> kernel = {2, 2};
  std::vector<std::int64_t> stride = {2, 2};
  std::vector<std::int64_t> padding = {0, 0, 0, 0};
  bool ceil_mode = false;
  bool count_include_pad = false;  // average pool only
};

struct KILN_API GemmOptions {
  bool trans_a = false;
  bool trans_b = false;
  float alpha = 1.0f;
  float beta = 1.0f;
};

class KILN_API Builder {
 public:
  // A handle on a value of the graph being built.
  struct Value {
    std::int32_t id = -1;
  };

  explicit Builder(std::string model_name = "model");
  ~Builder();
  Builder(Builder&&) noexcept;
  Builder& operator=(Builder&&) noexcept;

  // A graph input, named exactly `name` (scopes do not apply to inputs).
  Value input(const std::string& name, DType dtype, Shape shape);
  // A constant (a weight), named "<scope path>.<name>" ("layer1.0.conv1.weight").
  Value constant(const std::string& name, Tensor value);

  // Prefixes node and constant names made inside ("layer1" then "0" -> "layer1.0.conv1").
  void push_scope(const std::string& name);
  void pop_scope();

  Value conv2d(Value x, Value weight, std::optional<Value> bias, const Conv2dOptions& options = {});
  Value matmul(Value a, Value b);
  Value gemm(Value a, Value b, std::optional<Value> c, const GemmOptions& options = {});
  Value add(Value a, Value b);
  Value sub(Value a, Value b);
  Value mul(Value a, Value b);
  Value div(Value a, Value b);
  Value relu(Value x);
  Value sigmoid(Value x);
  Value tanh(Value x);
  Value gelu(Value x, bool tanh_approximation = false);
  Value clip(Value x, float min, float max);
  Value softmax(Value x, std::int64_t axis = -1);
  Value layer_norm(Value x, Value scale, Value bias, std::int64_t axis = -1, float epsilon = 1e-5f);
  Value batch_norm(Value x, Value scale, Value bias, Value mean, Value var, float epsilon = 1e-5f);
  Value max_pool2d(Value x, const Pool2dOptions& options);
  Value avg_pool2d(Value x, const Pool2dOptions& options);
  Value global_avg_pool(Value x);
  Value reshape(Value x, std::vector<std::int64_t> shape);  // 0 copies a dim, one -1 is inferred
  Value flatten(Value x, std::int64_t axis = 1);
  Value transpose(Value x, std::vector<std::int64_t> perm);
  Value concat(const std::vector<Value>& xs, std::int64_t axis);
  // Any registered op, with ONNX-style attributes; returns all outputs.
  std::vector<Value> op(const std::string& op_name, const std::vector<std::optional<Value>>& inputs,
                        const Attributes& attrs);

  Shape shape(Value v) const;
  DType dtype(Value v) const;
  // Renames a value, e.g. a model output ("logits"); throws InvalidArgument if the name is taken.
  void set_name(Value v, const std::string& name);

  // Finishes the model (verifies it); the builder is empty afterwards.
  Model build(const std::vector<Value>& outputs);

 private:
  std::string next_name(const std::string& op_name);
  graph::Graph& live_graph() const;  // throws InvalidArgument once build() has run
  void check_value(Value v) const;
  std::string scope_path() const;
  Value single(const std::string& op_name, const std::vector<std::optional<Value>>& inputs,
               const Attributes& attrs);

  std::string model_name_;
  std::unique_ptr<graph::Graph> graph_;
  std::vector<std::string> scopes_;
  // Scope paths that hold a node: a node "a.b.c" occupies "a", "a.b" and "a.b.c".
  std::unordered_set<std::string> occupied_scopes_;
  // Per generated base name, the highest "_<n>" suffix known to be taken.
  // Names are only added (set_name clears this), so a search resumes there.
  std::unordered_map<std::string, int> last_suffix_;
};

}  // namespace kiln

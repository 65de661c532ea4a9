// kiln::Builder (include/kiln/builder.h): each method adds one registered op
// with ONNX attribute names; shape inference runs as each node is added.
#include <kiln/builder.h>

#include "graph/ir.h"
#include "graph/model_access.h"
#include "graph/op_registry.h"
#include "src/base/check.h"

#include <cctype>

namespace kiln {

namespace {

// "BatchNormalization" -> "batch_normalization": readable generated names.
std::string snake_case(const std::string& op_name) {
  std::string s;
  for (std::size_t i = 0; i < op_name.size(); ++i) {
    const auto c = static_cast<unsigned char>(op_name[i]);
    if (std::isupper(c) && i > 0 && std::islower(static_cast<unsigned char>(op_name[i - 1]))) s += '_';
    s += static_cast<char>(std::tolower(c));
  }
  return s;
}

}  // namespace

Builder::Builder(std::string model_name)
    : model_name_(std::move(model_name)), graph_(std::make_unique<graph::Graph>()) {}
Builder::~Builder() = default;
Builder::Builder(Builder&&) noexcept = default;
Builder& Builder::operator=(Builder&&) noexcept = default;

graph::Graph& Builder::live_graph() const {
  KILN_CHECK(graph_ != nullptr, ErrorKind::InvalidArgument,
             "Builder '" + model_name_ + "' has already built its model; create a new Builder");
  return *graph_;
}

void Builder::check_value(Value v) const {
  const graph::Graph& g = live_graph();
  KILN_CHECK(v.id >= 0 && v.id < static_cast<std::int32_t>(g.values().size()), ErrorKind::InvalidArgument,
             "Builder '" + model_name_ + "': value handle " + std::to_string(v.id) + " does not belong to this builder");
}

std::string Builder::scope_path() const {
  std::string path;
  for (const std::string& s : scopes_) path += (path.empty() ? "" : ".") + s;
  return path;
}

Builder::Value Builder::input(const std::string& name, DType dtype, Shape shape) {
  graph::Graph& g = live_graph();
  KILN_CHECK(!g.name_taken(name), ErrorKind::InvalidArgument,
             "Builder '" + model_name_ + "': input name '" + name + "' is already used");
  // Zero is an extent like any other (an empty batch, an empty key/value cache).
  for (std::int64_t d : shape)
    KILN_CHECK(d >= 0, ErrorKind::ShapeMismatch,
               "Builder '" + model_name_ + "': input '" + name + "' has a negative dimension in " + shape_str(shape));
  return {g.add_input(name, graph::TensorType{dtype, std::move(shape)})};
}

Builder::Value Builder::constant(const std::string& name, Tensor value) {
  graph::Graph& g = live_graph();
  const std::string path = scope_path();
  const std::string full = path.empty() ? name : path + "." + name;
  KILN_CHECK(!g.name_taken(full), ErrorKind::InvalidArgument,
             "Builder '" + model_name_ + "': constant name '" + full + "' is already used");
  return {g.add_constant(full, std::move(value))};
}

void Builder::push_scope(const std::string& name) {
  live_graph();
  KILN_CHECK(!name.empty() && name.find('.') == std::string::npos, ErrorKind::InvalidArgument,
             "Builder '" + model_name_ + "': scope name '" + name + "' must be non-empty and contain no '.'");
  scopes_.push_back(name);
}

void Builder::pop_scope() {
  KILN_CHECK(!scopes_.empty(), ErrorKind::InvalidArgument,
             "Builder '" + model_name_ + "': pop_scope() without a matching push_scope()");
  scopes_.pop_back();
}

void Builder::set_name(Value v, const std::string& name) {
  check_value(v);
  graph::Graph& g = live_graph();
  graph::Value& value = g.value(v.id);
  if (value.name == name) return;
  KILN_CHECK(!name.empty() && !g.name_taken(name), ErrorKind::InvalidArgument,
             "Builder '" + model_name_ + "': cannot rename '" + value.name + "' to '" + name +
                 "': the name is empty or already used");
  g.rename_value(v.id, name);
  last_suffix_.clear();  // the old name is free again
}

// A node made in a scope that holds no node yet takes the scope's path as its
// name (the scope is a module: "layer1.0.conv1"); other nodes are named
// "<path>.<op>" ("layer1.0.add") or "<op>" outside any scope, with "_1",
// "_2", ... appended when taken.
std::string Builder::next_name(const std::string& op_name) {
  graph::Graph& g = live_graph();
  const std::string path = scope_path();
  if (!path.empty() && !occupied_scopes_.contains(path) && !g.name_taken(path)) return path;
  const std::string base = path.empty() ? snake_case(op_name) : path + "." + snake_case(op_name);
  if (!g.name_taken(base)) return base;
  int& taken = last_suffix_[base];  // base_1 ... base_<taken> are taken
  for (;; ++taken) {
    std::string candidate = base + "_" + std::to_string(taken + 1);
    if (!g.name_taken(candidate)) return candidate;
  }
}

std::vector<Builder::Value> Builder::op(const std::string& op_name, const std::vector<std::optional<Value>>& inputs,
                                        const graph::Attributes& attrs) {
  graph::Graph& g = live_graph();
  std::vector<graph::ValueId> ids;
  ids.reserve(inputs.size());
  for (const std::optional<Value>& in : inputs) {
    if (in) check_value(*in);
    ids.push_back(in ? in->id : -1);
  }
  const std::string name = next_name(op_name);
  std::vector<graph::ValueId> outputs = g.add_node(op_name, std::move(ids), attrs, name);
  for (std::size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1))
    occupied_scopes_.insert(name.substr(0, dot));
  occupied_scopes_.insert(name);
  std::vector<Value> values;
  values.reserve(outputs.size());
  for (graph::ValueId id : outputs) values.push_back({id});
  return values;
}

Builder::Value Builder::single(const std::string& op_name, const std::vector<std::optional<Value>>& inputs,
                               const graph::Attributes& attrs) {
  std::vector<Value> outputs = op(op_name, inputs, attrs);
  KILN_ASSERT(outputs.size() == 1);
  return outputs[0];
}

Builder::Value Builder::conv2d(Value x, Value weight, std::optional<Value> bias, const Conv2dOptions& options) {
  graph::Attributes attrs;
  attrs.set("strides", options.stride);
  attrs.set("pads", options.padding);
  attrs.set("dilations", options.dilation);
  attrs.set("group", options.groups);
  return single("Conv", {x, weight, bias}, attrs);
}

Builder::Value Builder::matmul(Value a, Value b) { return single("MatMul", {a, b}, {}); }

Builder::Value Builder::gemm(Value a, Value b, std::optional<Value> c, const GemmOptions& options) {
  graph::Attributes attrs;
  attrs.set("transA", std::int64_t{options.trans_a});
  attrs.set("transB", std::int64_t{options.trans_b});
  attrs.set("alpha", static_cast<double>(options.alpha));
  attrs.set("beta", static_cast<double>(options.beta));
  return single("Gemm", {a, b, c}, attrs);
}

Builder::Value Builder::add(Value a, Value b) { return single("Add", {a, b}, {}); }
Builder::Value Builder::sub(Value a, Value b) { return single("Sub", {a, b}, {}); }
Builder::Value Builder::mul(Value a, Value b) { return single("Mul", {a, b}, {}); }
Builder::Value Builder::div(Value a, Value b) { return single("Div", {a, b}, {}); }
Builder::Value Builder::relu(Value x) { return single("Relu", {x}, {}); }
Builder::Value Builder::sigmoid(Value x) { return single("Sigmoid", {x}, {}); }
Builder::Value Builder::tanh(Value x) { return single("Tanh", {x}, {}); }

Builder::Value Builder::gelu(Value x, bool tanh_approximation) {
  graph::Attributes attrs;
  attrs.set("approximate", std::string(tanh_approximation ? "tanh" : "none"));
  return single("Gelu", {x}, attrs);
}

Builder::Value Builder::clip(Value x, float min, float max) {
  graph::Attributes attrs;
  attrs.set("min", static_cast<double>(min));
  attrs.set("max", static_cast<double>(max));
  return single("Clip", {x}, attrs);
}

Builder::Value Builder::softmax(Value x, std::int64_t axis) {
  graph::Attributes attrs;
  attrs.set("axis", axis);
  return single("Softmax", {x}, attrs);
}

Builder::Value Builder::layer_norm(Value x, Value scale, Value bias, std::int64_t axis, float epsilon) {
  graph::Attributes attrs;
  attrs.set("axis", axis);
  attrs.set("epsilon", static_cast<double>(epsilon));
  return single("LayerNormalization", {x, scale, bias}, attrs);
}

Builder::Value Builder::batch_norm(Value x, Value scale, Value bias, Value mean, Value var, float epsilon) {
  graph::Attributes attrs;
  attrs.set("epsilon", static_cast<double>(epsilon));
  return single("BatchNormalization", {x, scale, bias, mean, var}, attrs);
}

namespace {

graph::Attributes pool_attributes(const Pool2dOptions& options) {
  graph::Attributes attrs;
  attrs.set("kernel_shape", options.kernel);
  attrs.set("strides", options.stride);
  attrs.set("pads", options.padding);
  attrs.set("ceil_mode", std::int64_t{options.ceil_mode});
  return attrs;
}

}  // namespace

Builder::Value Builder::max_pool2d(Value x, const Pool2dOptions& options) {
  return single("MaxPool", {x}, pool_attributes(options));
}

Builder::Value Builder::avg_pool2d(Value x, const Pool2dOptions& options) {
  graph::Attributes attrs = pool_attributes(options);
  attrs.set("count_include_pad", std::int64_t{options.count_include_pad});
  return single("AveragePool", {x}, attrs);
}

Builder::Value Builder::global_avg_pool(Value x) { return single("GlobalAveragePool", {x}, {}); }

Builder::Value Builder::reshape(Value x, std::vector<std::int64_t> shape) {
  graph::Attributes attrs;
  attrs.set("shape", std::move(shape));
  return single("Reshape", {x}, attrs);
}

Builder::Value Builder::flatten(Value x, std::int64_t axis) {
  graph::Attributes attrs;
  attrs.set("axis", axis);
  return single("Flatten", {x}, attrs);
}

Builder::Value Builder::transpose(Value x, std::vector<std::int64_t> perm) {
  graph::Attributes attrs;
  attrs.set("perm", std::move(perm));
  return single("Transpose", {x}, attrs);
}

Builder::Value Builder::concat(const std::vector<Value>& xs, std::int64_t axis) {
  graph::Attributes attrs;
  attrs.set("axis", axis);
  return single("Concat", std::vector<std::optional<Value>>(xs.begin(), xs.end()), attrs);
}

Shape Builder::shape(Value v) const {
  check_value(v);
  return graph_->value(v.id).type.shape;
}

DType Builder::dtype(Value v) const {
  check_value(v);
  return graph_->value(v.id).type.dtype;
}

Model Builder::build(const std::vector<Value>& outputs) {
  graph::Graph& g = live_graph();
  KILN_CHECK(!outputs.empty(), ErrorKind::InvalidArgument, "Builder '" + model_name_ + "': build() needs at least one output");
  std::vector<graph::ValueId> ids;
  for (Value v : outputs) {
    check_value(v);
    ids.push_back(v.id);
  }
  g.set_outputs(std::move(ids));
  // Empty the builder first: it is spent whether or not verification passes.
  std::shared_ptr<const graph::Graph> finished(std::move(graph_));
  scopes_.clear();
  return internal::make_model(std::move(finished), model_name_);
}

}  // namespace kiln

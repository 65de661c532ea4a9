// The Tensor functions of include/kiln/trace.h: each builds the ONNX-style op
// and hands it to the trace context, or runs it eagerly when there is none.
#include <kiln/trace.h>

#include <kiln/float16.h>

#include "src/base/check.h"
#include "src/trace/context.h"

namespace kiln {

namespace {

graph::Attributes attrs_of(std::initializer_list<std::pair<std::string, graph::Attribute>> list) {
  graph::Attributes attrs;
  for (const auto& [name, value] : list) attrs.set(name, value);
  return attrs;
}

Tensor single(const std::string& name, const std::vector<Tensor>& inputs, const graph::Attributes& attrs = {}) {
  std::vector<Tensor> outputs = op(name, inputs, attrs);
  KILN_CHECK(outputs.size() == 1, ErrorKind::InvalidArgument,
             "op '" + name + "' has " + std::to_string(outputs.size()) + " outputs; use kiln::op() for it");
  return outputs[0];
}

}  // namespace

std::vector<Tensor> op(const std::string& name, const std::vector<Tensor>& inputs, const graph::Attributes& attrs) {
  if (trace::Context* context = trace::current_context()) return context->run_op(name, inputs, attrs);
  return trace::run_eager(name, inputs, attrs);
}

Tensor relu(const Tensor& x) { return single("Relu", {x}); }
Tensor sigmoid(const Tensor& x) { return single("Sigmoid", {x}); }
Tensor tanh(const Tensor& x) { return single("Tanh", {x}); }
Tensor gelu(const Tensor& x, bool tanh_approximation) {
  return single("Gelu", {x}, attrs_of({{"approximate", std::string(tanh_approximation ? "tanh" : "none")}}));
}
Tensor add(const Tensor& a, const Tensor& b) { return single("Add", {a, b}); }
Tensor sub(const Tensor& a, const Tensor& b) { return single("Sub", {a, b}); }
Tensor mul(const Tensor& a, const Tensor& b) { return single("Mul", {a, b}); }
Tensor div(const Tensor& a, const Tensor& b) { return single("Div", {a, b}); }
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor matmul(const Tensor& a, const Tensor& b) { return single("MatMul", {a, b}); }

Tensor conv2d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
              const Conv2dOptions& options) {
  std::vector<Tensor> inputs = {x, weight};
  if (bias) inputs.push_back(*bias);
  return single("Conv", inputs,
                attrs_of({{"strides", options.stride},
                          {"pads", options.padding},
                          {"dilations", options.dilation},
                          {"group", options.groups}}));
}

Tensor softmax(const Tensor& x, std::int64_t axis) { return single("Softmax", {x}, attrs_of({{"axis", axis}})); }

Tensor layer_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, std::int64_t axis, float epsilon) {
  return single("LayerNormalization", {x, scale, bias},
                attrs_of({{"axis", axis}, {"epsilon", static_cast<double>(epsilon)}}));
}

Tensor reshape(const Tensor& x, std::vector<std::int64_t> shape) {
  return single("Reshape", {x}, attrs_of({{"shape", std::move(shape)}}));
}

Tensor transpose(const Tensor& x, std::vector<std::int64_t> perm) {
  return single("Transpose", {x}, attrs_of({{"perm", std::move(perm)}}));
}

Tensor concat(const std::vector<Tensor>& xs, std::int64_t axis) {
  return single("Concat", xs, attrs_of({{"axis", axis}}));
}

double item(const Tensor& x, SourceLocation where) {
  KILN_CHECK(x.numel() == 1, ErrorKind::ShapeMismatch,
             "item() needs a tensor with one element, got " + std::string(dtype_name(x.dtype())) +
                 shape_str(x.shape()));
  if (trace::Context* context = trace::current_context()) context->host_read(x, where, "item()");
  switch (x.dtype()) {
    case DType::f32: return x.values<float>()[0];
    case DType::i32: return x.values<std::int32_t>()[0];
    case DType::i64: return static_cast<double>(x.values<std::int64_t>()[0]);
    case DType::u8:
    case DType::boolean: return x.values<std::uint8_t>()[0];
    case DType::f16: return f16_value(x.values<std::uint16_t>()[0]);
    case DType::bf16: return bf16_value(x.values<std::uint16_t>()[0]);
  }
  KILN_ASSERT(false);
}

Tensor to_host(const Tensor& x, SourceLocation where) {
  if (trace::Context* context = trace::current_context()) context->host_read(x, where, "to_host()");
  return x.clone();
}

std::string trace_break_str(const TraceBreak& b) {
  return "graph break: " + b.what + " at " + b.file + ":" + std::to_string(b.line) + " (in " + b.function +
         "): reads a tensor's value on the host";
}

}  // namespace kiln

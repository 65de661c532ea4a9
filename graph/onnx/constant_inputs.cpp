#include "graph/onnx/constant_inputs.h"

#include "src/base/check.h"

namespace kiln::onnx_import {

// The constant at input `index`; `role` names it in the error ("the shape input").
const Tensor& require_constant(const OnnxNode& n, ImportContext& ctx, std::size_t index, const std::string& role) {
  KILN_CHECK(present(n, index), ErrorKind::Corrupt, n.where + role + " is missing");
  const Tensor* value = ctx.constant(n.inputs[index]);
  KILN_CHECK(value != nullptr, ErrorKind::Unsupported,
             n.where + role + " must be a constant for static compilation (it is computed from the model's inputs)");
  return *value;
}

std::vector<std::int64_t> to_ints(const OnnxNode& n, const Tensor& t, const std::string& role) {
  if (t.dtype() == DType::i64) {
    auto v = t.values<std::int64_t>();
    return {v.begin(), v.end()};
  }
  if (t.dtype() == DType::i32) {
    auto v = t.values<std::int32_t>();
    return {v.begin(), v.end()};
  }
  throw_error(ErrorKind::Corrupt, n.where + role + " must be int64 or int32, got " + std::string(dtype_name(t.dtype())));
}

std::vector<double> to_floats(const OnnxNode& n, const Tensor& t, const std::string& role) {
  if (t.dtype() == DType::f32) {
    auto v = t.values<float>();
    return {v.begin(), v.end()};
  }
  if (t.dtype() == DType::i64 || t.dtype() == DType::i32) {
    std::vector<double> out;
    for (std::int64_t x : to_ints(n, t, role)) out.push_back(static_cast<double>(x));
    return out;
  }
  throw_error(ErrorKind::Unsupported, n.where + role + " of dtype " + std::string(dtype_name(t.dtype())) +
                                          " is not supported (f32, i64 or i32)");
}

std::int64_t to_scalar_int(const OnnxNode& n, const Tensor& t, const std::string& role) {
  const auto values = to_ints(n, t, role);
  KILN_CHECK(values.size() == 1, ErrorKind::Corrupt,
             n.where + role + " must hold one value, it has shape " + shape_str(t.shape()));
  return values[0];
}

}  // namespace kiln::onnx_import

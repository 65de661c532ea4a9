// Conversion rules' reading of inputs that must be constants at import
// (shapes, axes, sizes): the constant behind an input, and its values.
#pragma once

#include "graph/onnx/convert_ops.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::onnx_import {

// The constant at input `index`; `role` names it in the error ("the shape
// input"): Corrupt when absent, Unsupported when computed from the model's inputs.
const Tensor& require_constant(const OnnxNode& n, ImportContext& ctx, std::size_t index, const std::string& role);
// The values of an int64 or int32 tensor (Corrupt otherwise).
std::vector<std::int64_t> to_ints(const OnnxNode& n, const Tensor& t, const std::string& role);
// The values of an f32, int64 or int32 tensor (Unsupported otherwise).
std::vector<double> to_floats(const OnnxNode& n, const Tensor& t, const std::string& role);
// The single value of an int tensor of one element (Corrupt otherwise).
std::int64_t to_scalar_int(const OnnxNode& n, const Tensor& t, const std::string& role);

}  // namespace kiln::onnx_import

// ONNX Einsum, written as ReduceSum, Transpose, Reshape and batched MatMul.
#pragma once

#include "graph/onnx/convert_ops.h"

namespace kiln::onnx_import {

std::vector<graph::ValueId> convert_einsum(const OnnxNode& n, ImportContext& ctx);

}  // namespace kiln::onnx_import

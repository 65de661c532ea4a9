// onnx.AttributeProto -> kiln graph::Attribute.
#pragma once

#include "graph/ir.h"

#include <onnx/onnx_pb.h>  // ONNX_ML=1: the onnx-ml.pb.h classes

#include <string>

namespace kiln::onnx_import {

// The node's INT, FLOAT, STRING, INTS and FLOATS attributes as kiln
// attributes. TENSOR attributes are left out (Constant and ConstantOfShape
// read theirs directly); other kinds (graphs, sparse tensors) throw
// Unsupported naming the attribute. `what` names the file and node.
graph::Attributes convert_attributes(const onnx::NodeProto& node, const std::string& what);

// The node's TENSOR attribute `name`, or nullptr.
const onnx::TensorProto* tensor_attribute(const onnx::NodeProto& node, const std::string& name);

}  // namespace kiln::onnx_import

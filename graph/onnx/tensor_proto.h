// onnx.TensorProto <-> kiln::Tensor: initializers, Constant values and ONNX's
// test data, inline (raw_data or typed fields) or in external-data files.
#pragma once

#include <kiln/tensor.h>

#include <onnx/onnx_pb.h>  // ONNX_ML=1: the onnx-ml.pb.h classes

#include <optional>
#include <string>

namespace kiln::onnx_import {

// kiln's dtype for an ONNX TensorProto.DataType, or nullopt if kiln has none.
std::optional<DType> dtype_from_onnx(int onnx_type);
// The TensorProto.DataType number of a kiln dtype.
int onnx_from_dtype(DType dtype);
// "FLOAT", "INT64", ... for messages ("type 13" for unknown numbers).
std::string onnx_type_name(int onnx_type);

// Converts a TensorProto, checking every size against the data it carries.
// External data is read from `base_dir` ("" refuses it); a location that is
// absolute or leaves base_dir is rejected. `what` prefixes error messages
// (it already names the file and the tensor).
Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir, const std::string& what);

}  // namespace kiln::onnx_import

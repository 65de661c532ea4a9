// onnx.TensorProto <-> kiln::Tensor: initializers, Constant values and ONNX's
// test data, inline (raw_data or typed fields) or in external-data files.
#pragma once

#include <kiln/tensor.h>

#include <onnx/onnx_pb.h>  // ONNX_ML=1: the onnx-ml.pb.h classes

#include <optional>
#include <string>
#include <vector>

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

// A DOUBLE tensor: kiln has no f64, but exporters emit DOUBLE constants that a
// Cast turns into another type at once (torch.onnx writes Python floats so).
struct F64Constant {
  Shape shape;
  std::vector<double> values;
};
// Whether the proto holds DOUBLE data.
bool is_f64(const onnx::TensorProto& proto);
// The values of a DOUBLE TensorProto (raw_data or double_data; external
// data is refused), sizes checked as tensor_from_proto checks them.
F64Constant f64_from_proto(const onnx::TensorProto& proto, const std::string& what);
// Cast of f64 values to `to` (not f16: cast to f32, then Cast that), from the
// doubles themselves, as kiln's Cast converts floats: f32 rounds to nearest,
// integers truncate toward zero and saturate, bool is value != 0.
Tensor cast_f64(const F64Constant& constant, DType to);

}  // namespace kiln::onnx_import

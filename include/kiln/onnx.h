// Importing ONNX models (opsets 11 to 18) into kiln's graph IR.
//
//   kiln::Model m = kiln::load_onnx("resnet50.onnx");
//
// Symbolic input dims are read as ONNX Runtime reads them: a dim_param
// ("batch") is one extent wherever that name appears; a dim with no value, a
// dim_param of "?" and a negative dim_value (-1, as paddle2onnx and the
// TensorFlow converters write) are each independent. Import fixes every
// extent: symbolic dims take OnnxOptions::input_shapes, else placeholders
// (image_size, default_dim); the model keeps its file and is imported again
// for calls of other shapes (kiln::compile, kiln::eager). If importing at
// placeholders fails, load_onnx still returns the model, whose import waits
// for its first call's shapes (Model::import_pending). Shape arithmetic
// (Shape/Gather/Concat/Unsqueeze chains, Constant, ConstantOfShape, Resize
// sizes), Identity and Dropout are folded away at import. Errors name the file
// and the node; unsupported ops are listed all at once.
#pragma once

#include <kiln/export.h>
#include <kiln/model.h>
#include <kiln/tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

struct KILN_API OnnxOptions {
  // Full shapes for inputs, by input name: each must have the file's rank and
  // fixed extents, and dims of one name must agree (ShapeMismatch otherwise); a
  // name that is not a graph input is an InvalidArgument error listing them.
  // A named dim given here sets that name in every input.
  std::map<std::string, Shape> input_shapes{};
  // The size of any remaining symbolic or unknown dimension (usually batch).
  std::int64_t default_dim = 1;
  // The size of symbolic or unknown height and width (the last two dims of a
  // rank-4 input, as image models are exported with dynamic axes); 0: default_dim.
  std::int64_t image_size = 0;
  // The most bytes of constants import may create by folding, in total: every
  // evaluated all-constant node (shape arithmetic, Expand/Tile/Transpose of
  // weights, ...), ConstantOfShape, Range and Dropout masks. A file of a few
  // hundred bytes can ask for gigabytes this way; past the budget, import
  // throws InvalidArgument naming the node, the bytes it would add, the total
  // so far and the budget. 0: the environment variable KILN_MAX_FOLDED_BYTES
  // (a byte count) if set, else a quarter of physical memory, at least 1 GiB
  // and at most 4 GiB.
  std::int64_t max_folded_bytes = 0;
};

// Reads an ONNX model file (weights inline or in ONNX external-data files
// beside it). Throws Error(Io) if it cannot be read, Error(Corrupt) if it is
// malformed (naming the file and, where there is one, the node; every size
// read from the file is checked against kiln's limits before use),
// Error(InvalidArgument) when folding would pass max_folded_bytes, and
// Error(Unsupported) listing every unsupported op with its node name.
KILN_API Model load_onnx(const std::string& path, const OnnxOptions& options = {});

// The same from bytes in memory; `base_dir` is where external data files are
// looked up ("" refuses external data), `name` names the model in messages.
KILN_API Model load_onnx_bytes(std::string_view bytes, const std::string& name, const std::string& base_dir = "",
                      const OnnxOptions& options = {});

// Reads one serialized onnx.TensorProto (.pb), as ONNX's test data stores
// inputs and expected outputs.
KILN_API Tensor load_onnx_tensor(const std::string& path);

// ONNX op types load_onnx can import (some may still be graph breaks on a
// given backend).
KILN_API std::vector<std::string> onnx_supported_ops();

}  // namespace kiln

// NumPy .npy files (format 1.0, 2.0 and 3.0; little-endian, C order) as kiln
// tensors, so that inputs and outputs can be compared with PyTorch or ONNX
// Runtime. Debian has no maintained C++ .npy library that fits (xtensor's
// reader needs all of xtensor), so this is a small, strict one.
#pragma once

#include <kiln/tensor.h>

#include <string>
#include <string_view>

namespace kiln::tools {

// Reads a .npy file: dtypes float32, float16, int32, int64, uint8 and bool.
// Throws Error(Io) if it cannot be read and Error(Corrupt) or
// Error(Unsupported) naming the file and the problem (big-endian, Fortran
// order, float64, a size that does not match the data, ...).
Tensor read_npy(const std::string& path);
// The same from bytes; `name` names the data in messages.
Tensor parse_npy(std::string_view bytes, const std::string& name);

// Writes a tensor as a format 1.0 .npy file, atomically (a temporary file in
// the same folder, then a rename). Throws Error(Io) naming the path.
void write_npy(const std::string& path, const Tensor& tensor);
// The .npy file's bytes.
std::string format_npy(const Tensor& tensor);

}  // namespace kiln::tools

// NumPy .npy files as kiln tensors, so that inputs and outputs go to and
// from PyTorch, ONNX Runtime and NumPy unchanged:
//
//   kiln::Tensor x = kiln::load_npy("input.npy");      // np.save("input.npy", array)
//   kiln::save_npy("logits.npy", compiled({x})[0]);    // np.load("logits.npy")
//
// Formats 1.0, 2.0 and 3.0, little-endian, C order; dtypes float32, float16,
// bfloat16 (descr '<V2': what NumPy writes for an ml_dtypes.bfloat16 array),
// int32, int64, uint8 and bool; zero-size arrays and scalars (shape ()).
#pragma once

#include <kiln/export.h>
#include <kiln/tensor.h>

#include <string>
#include <string_view>

namespace kiln {

// Reads a .npy file. Throws Error(Io) if it cannot be read, Error(Corrupt)
// or Error(Unsupported) naming the file and the problem (a size that does
// not match the data, big-endian, Fortran order, float64, ...).
KILN_API Tensor load_npy(const std::string& path);
// The same from the file's bytes; `name` names them in messages.
KILN_API Tensor parse_npy(std::string_view bytes, const std::string& name = "the .npy data");

// Writes a tensor as a format 1.0 .npy file atomically (a temporary file in
// the same folder, then a rename: a reader never sees half of it). Throws
// Error(Io) naming the path.
KILN_API void save_npy(const std::string& path, const Tensor& tensor);
// The bytes of that file.
KILN_API std::string format_npy(const Tensor& tensor);

}  // namespace kiln

// Hugging Face's .safetensors files as kiln tensors:
//
//   std::map<std::string, kiln::Tensor> weights = kiln::load_safetensors("model.safetensors");
//
// The file is mapped, not read: each tensor points into the mapping (copied
// only where its offset is not aligned to its element size), and the mapping
// lives as long as any of its tensors. dtypes F32, F16, BF16, I64, I32, U8
// and BOOL; F64 and the 8-bit float and integer types are refused.
#pragma once

#include <kiln/export.h>
#include <kiln/tensor.h>

#include <map>
#include <string>
#include <vector>

namespace kiln {

// Reads every tensor of a .safetensors file. The header is checked before any
// tensor is made: its length inside the file, JSON with one entry per tensor,
// a known dtype, a shape of non-negative dims, data offsets inside the data
// section whose size is the shape's bytes, and no two tensors overlapping.
// Throws Error(Io) if the file cannot be read, Error(Corrupt) naming the file
// and the tensor for a malformed header, Error(Unsupported) for a dtype kiln
// lacks.
KILN_API std::map<std::string, Tensor> load_safetensors(const std::string& path);

// The tensors of a Hugging Face checkpoint folder: `model.safetensors`, or
// the shards a `model.safetensors.index.json` names (each shard's tensors
// must be the ones the index assigns to it). Throws Error(NotFound) if the
// folder has neither, and the errors of load_safetensors.
KILN_API std::map<std::string, Tensor> load_safetensors_checkpoint(const std::string& folder);

// Writes `tensors` as a .safetensors file atomically (a temporary file in
// the same folder, then a rename), larger elements first so that every
// tensor's data is aligned to its element size, as the safetensors library
// writes them. Throws Error(Io) naming the path.
KILN_API void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors);

}  // namespace kiln

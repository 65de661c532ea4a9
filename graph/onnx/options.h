// The import settings as the importer uses them: OnnxOptions with its
// defaults and environment overrides resolved, here and only here (passes
// and conversion rules receive values; they never read the environment).
#pragma once

#include <kiln/onnx.h>

#include <cstdint>

namespace kiln::onnx_import {

// The environment variable that sets the fold budget when the option is 0.
inline constexpr const char* kMaxFoldedBytesVariable = "KILN_MAX_FOLDED_BYTES";
// The default fold budget is a quarter of physical memory, within these bounds.
inline constexpr std::int64_t kMinDefaultFoldedBytes = std::int64_t{1} << 30;  // 1 GiB
inline constexpr std::int64_t kMaxDefaultFoldedBytes = std::int64_t{4} << 30;  // 4 GiB

// The default fold budget on this machine (sysconf's physical memory / 4,
// clamped to [kMinDefaultFoldedBytes, kMaxDefaultFoldedBytes]).
std::int64_t default_max_folded_bytes();

// OnnxOptions::max_folded_bytes if it is set (> 0), else KILN_MAX_FOLDED_BYTES
// if that is set, else the default. Throws InvalidArgument for a negative
// option or a variable that is not a positive decimal byte count.
std::int64_t resolve_max_folded_bytes(const OnnxOptions& options);

}  // namespace kiln::onnx_import

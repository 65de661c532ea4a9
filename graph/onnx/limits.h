// Hard limits that keep a malformed or hostile ONNX file from crashing kiln,
// hanging it or making it allocate without bound. Every size read from a file
// is checked against them before anything is allocated.
#pragma once

#include <kiln/dtype.h>

#include "graph/passes/passes.h"

#include <cstdint>
#include <string>

namespace kiln::onnx_import {

// protobuf itself cannot parse messages of 2 GiB or more.
inline constexpr std::int64_t kMaxModelBytes = (std::int64_t{1} << 31) - 1;
// One external-data file (weights beside the model).
inline constexpr std::int64_t kMaxExternalBytes = std::int64_t{1} << 36;
// Elements of any one tensor (a weight, an input, a node output): 2^32.
inline constexpr std::int64_t kMaxTensorElements = std::int64_t{1} << 32;
// Elements a single import-time fold may create: the compiler's own bound.
inline constexpr std::int64_t kMaxFoldElements = graph::passes::kMaxFoldElements;
inline constexpr std::int64_t kMaxRank = 16;
// Names, attribute strings and external-data paths.
inline constexpr std::size_t kMaxStringBytes = 4096;
inline constexpr int kMaxNodes = 1 << 20;

// "<file>: " or "<file>: node '<name>' (<op>): ", the prefix of every message.
std::string where(const std::string& file, const std::string& node = "", const std::string& op = "");

// Checks dims from a file (each >= 0, rank <= kMaxRank, product <=
// kMaxTensorElements) and returns them as a Shape; throws Corrupt naming
// `what` (which already says where).
Shape checked_shape(const std::int64_t* dims, int count, const std::string& what);
Shape checked_shape(const Shape& dims, const std::string& what);

// Throws Corrupt naming `what` if the string is longer than kMaxStringBytes.
void check_string(const std::string& text, const std::string& what);

}  // namespace kiln::onnx_import

// A bounded walk over CBOR bytes before they are decoded: nlohmann's CBOR
// reader recurses once per nesting level (two million nested arrays
// overflow the stack) and throws out_of_range for an array that claims more
// elements than memory could hold. This walk keeps its own stack, so that a
// file of any shape costs at most its size in steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace kiln::artifact {

// Containers (arrays, maps, tags, indefinite strings) nested deeper than
// this are refused; kiln's own metadata nests a few levels.
inline constexpr std::size_t kMaxCborDepth = 64;

// Why `bytes` is not one well-formed CBOR item kiln may decode (nested too
// deeply, a count larger than the bytes left could hold, a truncated or
// reserved encoding, bytes after the item), or nullopt.
std::optional<std::string> cbor_shape_problem(std::span<const std::uint8_t> bytes,
                                              std::size_t max_depth = kMaxCborDepth);

}  // namespace kiln::artifact

#include "src/artifact/cbor_shape.h"

#include <vector>

namespace kiln::artifact {
namespace {

constexpr std::uint64_t kIndefinite = UINT64_MAX;

// An open container: how many items it still takes (kIndefinite: until a
// break), and for an indefinite string the major type its chunks must have.
struct Frame {
  std::uint64_t items_left = 0;
  int string_major = -1;
};

}  // namespace

std::optional<std::string> cbor_shape_problem(std::span<const std::uint8_t> bytes, std::size_t max_depth) {
  std::size_t at = 0;
  std::vector<Frame> open;
  const auto remaining = [&] { return static_cast<std::uint64_t>(bytes.size() - at); };
  // Reads the argument that follows an initial byte's additional info.
  const auto argument = [&](std::uint8_t info, std::uint64_t& value) -> bool {
    if (info < 24) {
      value = info;
      return true;
    }
    if (info > 27) return false;
    const std::size_t width = std::size_t{1} << (info - 24);
    if (remaining() < width) return false;
    value = 0;
    for (std::size_t i = 0; i < width; ++i) value = value << 8 | bytes[at++];
    return true;
  };
  bool first = true;
  while (first || !open.empty()) {
    first = false;
    if (at >= bytes.size()) return "CBOR ends inside an item";
    const std::uint8_t initial = bytes[at++];
    const int major = initial >> 5;
    const std::uint8_t info = initial & 0x1f;
    if (initial == 0xff) {  // break: ends the innermost indefinite container
      if (open.empty() || open.back().items_left != kIndefinite) return "CBOR has a break outside an indefinite item";
      open.pop_back();
    } else {
      if (!open.empty() && open.back().string_major >= 0 && (major != open.back().string_major || info == 31))
        return "CBOR indefinite string has a chunk of another type";
      std::uint64_t value = 0;
      const bool indefinite = info == 31 && (major == 2 || major == 3 || major == 4 || major == 5);
      if (!indefinite && !argument(info, value)) return "CBOR has a truncated or reserved encoding";
      switch (major) {
        case 2:
        case 3:
          if (indefinite) {
            if (open.size() >= max_depth) return "CBOR nests deeper than " + std::to_string(max_depth) + " levels";
            open.push_back({kIndefinite, major});
            continue;  // its chunks follow; it counts as an item when its break comes
          }
          if (value > remaining()) return "CBOR string is longer than the bytes left";
          at += static_cast<std::size_t>(value);
          break;
        case 4:
        case 5: {
          // Every item takes at least one byte.
          const std::uint64_t items = indefinite ? kIndefinite : major == 5 ? value * 2 : value;
          if (!indefinite && (value > remaining() || items > remaining()))
            return "CBOR " + std::string(major == 4 ? "array" : "map") + " claims " + std::to_string(value) +
                   " entries, more than the bytes left";
          if (indefinite || items != 0) {
            if (open.size() >= max_depth) return "CBOR nests deeper than " + std::to_string(max_depth) + " levels";
            open.push_back({items, -1});
            continue;  // counted as an item of its parent when it closes
          }
          break;
        }
        case 6:  // a tag: the item it tags follows
          if (open.size() >= max_depth) return "CBOR nests deeper than " + std::to_string(max_depth) + " levels";
          open.push_back({1, -1});
          continue;
        default:
          break;  // integers, simple values and floats: the argument was the whole item
      }
    }
    // One item completed: count it against its containers, closing those it fills.
    while (!open.empty() && open.back().items_left != kIndefinite) {
      if (--open.back().items_left != 0) break;
      open.pop_back();
    }
  }
  if (at != bytes.size()) return "CBOR has " + std::to_string(bytes.size() - at) + " bytes after its item";
  return std::nullopt;
}

}  // namespace kiln::artifact

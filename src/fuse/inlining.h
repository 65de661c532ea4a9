// What the epilogue and prologue rewrites (epilogue.cpp, prologue.cpp) share:
// a kernel with the graph values its buffers bind, fresh names for each
// inlined copy of one kernel's body inside another's, and the fused kernel's
// buffer for each buffer the inlined kernel reads.
#pragma once

#include "graph/ir.h"
#include "src/fuse/ir_walk.h"
#include "src/kernel/ir.h"

#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace kiln::fuse {

// A kernel with the graph value bound to each of its buffers (values[i] is
// bound to kernel.buffers[i]); two buffers may bind one value.
struct BoundKernel {
  kir::Kernel kernel;
  std::vector<graph::ValueId> values;
};

// Prefixes for inlined copies: `<letter><n>_` for n = 0, 1, ..., the first
// under which none of a copy's names (the prefix before each suffix) is
// taken; those names are then taken.
class FreshPrefixes {
 public:
  FreshPrefixes(std::string letter, std::unordered_set<std::string> taken)
      : letter_(std::move(letter)), taken_(std::move(taken)) {}

  std::string next(const std::vector<std::string>& suffixes) {
    for (;;) {
      const std::string prefix = letter_ + std::to_string(next_++) + "_";
      std::vector<std::string> names;
      for (const std::string& suffix : suffixes) names.push_back(prefix + suffix);
      if (std::any_of(names.begin(), names.end(), [&](const std::string& n) { return taken_.count(n) > 0; })) continue;
      taken_.insert(names.begin(), names.end());
      return prefix;
    }
  }

 private:
  std::string letter_;
  std::unordered_set<std::string> taken_;
  int next_ = 0;
};

// The index in `fused` of the buffer for `guest`'s read buffer `slot`: a
// buffer `fused` already reads that binds the same value with the same
// element type, else a new read buffer named `name` (made unique).
inline int bind_read(BoundKernel& fused, const BoundKernel& guest, std::size_t slot, const std::string& name) {
  const kir::BufferParam& in = guest.kernel.buffers[slot];
  for (std::size_t i = 0; i < fused.values.size(); ++i)
    if (fused.values[i] == guest.values[slot] && fused.kernel.buffers[i].access == kir::Access::read &&
        fused.kernel.buffers[i].type == in.type)
      return static_cast<int>(i);
  fused.kernel.buffers.push_back({unique_buffer_name(fused.kernel.buffers, name), in.type, kir::Access::read});
  fused.values.push_back(guest.values[slot]);
  return static_cast<int>(fused.kernel.buffers.size() - 1);
}

}  // namespace kiln::fuse

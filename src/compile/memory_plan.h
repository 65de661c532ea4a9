// The static memory plan: every intermediate tensor gets an offset in one
// arena, and tensors whose lifetimes do not overlap share memory.
//
// Lifetimes are closed step intervals [first, last]: a tensor is live from the
// step that writes it to the last step that reads it. Two tensors may overlap
// in memory only if their intervals are disjoint.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::compiler {

struct Lifetime {
  std::uint64_t bytes = 0;
  int first = 0;  // step that produces it
  int last = 0;   // last step that reads it (>= first)
};

struct MemoryPlan {
  std::vector<int> arena;              // one per Lifetime: which arena holds it
  std::vector<std::uint64_t> offsets;  // one per Lifetime: aligned offset in its arena
  std::vector<std::uint64_t> arena_sizes;
  std::uint64_t arena_bytes = 0;       // all arenas together: the peak
  std::uint64_t unshared_bytes = 0;    // what one buffer per tensor would need
};

// `value` rounded up to a multiple of `alignment` (> 0).
std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment);

// Greedy best fit, largest tensors first: deterministic, and close to optimal
// for the chain-with-skips shape of inference graphs. No arena grows past
// `max_arena_bytes` (a device's largest buffer): tensors that would end past
// it are planned again into a further arena. Throws Error(OutOfMemory) if one
// tensor alone is larger.
MemoryPlan plan_memory(const std::vector<Lifetime>& tensors, std::uint64_t alignment,
                       std::uint64_t max_arena_bytes = UINT64_MAX);

// Throws Error(Internal) if two tensors with overlapping lifetimes overlap in
// the same arena or an offset is misaligned (used by tests and debug builds).
void check_memory_plan(const std::vector<Lifetime>& tensors, const MemoryPlan& plan, std::uint64_t alignment);

}  // namespace kiln::compiler

#include "src/runtime/memory_plan.h"

#include <kiln/error.h>

#include <algorithm>
#include <numeric>

namespace kiln::runtime {
namespace {

std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

bool lifetimes_overlap(const Lifetime& a, const Lifetime& b) { return a.first <= b.last && b.first <= a.last; }

}  // namespace

namespace {

// Places `members` (indices into `tensors`) in one arena; returns its size.
std::uint64_t place_in_arena(const std::vector<Lifetime>& tensors, const std::vector<std::size_t>& members,
                             std::uint64_t alignment, std::vector<std::uint64_t>& offsets) {
  std::vector<std::size_t> order = members;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (tensors[a].bytes != tensors[b].bytes) return tensors[a].bytes > tensors[b].bytes;
    return tensors[a].first < tensors[b].first;
  });

  struct Placed {
    std::uint64_t offset, end;
    std::size_t index;
  };
  std::vector<Placed> placed;  // sorted by offset
  std::uint64_t arena_end = 0;
  for (std::size_t t : order) {
    const std::uint64_t size = align_up(std::max<std::uint64_t>(tensors[t].bytes, 1), alignment);
    // The smallest gap, between tensors live at the same time as t, that fits it.
    std::uint64_t best_offset = 0, best_gap = UINT64_MAX, cursor = 0;
    bool found = false;
    for (const Placed& p : placed) {
      if (!lifetimes_overlap(tensors[p.index], tensors[t])) continue;
      if (p.offset >= cursor + size && p.offset - cursor < best_gap) {
        best_gap = p.offset - cursor;
        best_offset = cursor;
        found = true;
      }
      cursor = std::max(cursor, p.end);
    }
    if (!found) best_offset = cursor;  // after the last conflicting tensor
    offsets[t] = best_offset;
    Placed entry{best_offset, best_offset + size, t};
    placed.insert(std::upper_bound(placed.begin(), placed.end(), entry,
                                   [](const Placed& a, const Placed& b) { return a.offset < b.offset; }),
                  entry);
    arena_end = std::max(arena_end, entry.end);
  }
  return arena_end;
}

}  // namespace

MemoryPlan plan_memory(const std::vector<Lifetime>& tensors, std::uint64_t alignment, std::uint64_t max_arena_bytes) {
  KILN_ASSERT(alignment > 0);
  MemoryPlan plan;
  plan.offsets.assign(tensors.size(), 0);
  plan.arena.assign(tensors.size(), 0);
  std::vector<std::size_t> pending;
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    KILN_ASSERT(tensors[t].first <= tensors[t].last);
    const std::uint64_t size = align_up(std::max<std::uint64_t>(tensors[t].bytes, 1), alignment);
    KILN_CHECK(size <= max_arena_bytes, ErrorKind::OutOfMemory,
               "a tensor of " + std::to_string(tensors[t].bytes) + " bytes is larger than the device's largest buffer (" +
                   std::to_string(max_arena_bytes) + " bytes)");
    plan.unshared_bytes += size;
    pending.push_back(t);
  }
  // Tensors placed within the limit keep their places when others move out:
  // removing tensors from an arena never creates an overlap.
  while (!pending.empty()) {
    const int arena = static_cast<int>(plan.arena_sizes.size());
    place_in_arena(tensors, pending, alignment, plan.offsets);
    std::vector<std::size_t> overflow;
    std::uint64_t size = 0;
    for (std::size_t t : pending) {
      const std::uint64_t end = plan.offsets[t] + align_up(std::max<std::uint64_t>(tensors[t].bytes, 1), alignment);
      if (end > max_arena_bytes) {
        overflow.push_back(t);
      } else {
        plan.arena[t] = arena;
        size = std::max(size, end);
      }
    }
    KILN_ASSERT(overflow.size() < pending.size());  // the largest tensor always fits at offset 0
    plan.arena_sizes.push_back(size);
    plan.arena_bytes += size;
    pending = std::move(overflow);
  }
  return plan;
}

void check_memory_plan(const std::vector<Lifetime>& tensors, const MemoryPlan& plan, std::uint64_t alignment) {
  KILN_CHECK(plan.offsets.size() == tensors.size() && plan.arena.size() == tensors.size(), ErrorKind::Internal,
             "memory plan: wrong number of offsets");
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    KILN_CHECK(plan.offsets[i] % alignment == 0, ErrorKind::Internal,
               "memory plan: tensor " + std::to_string(i) + " is misaligned");
    KILN_CHECK(plan.arena[i] >= 0 && static_cast<std::size_t>(plan.arena[i]) < plan.arena_sizes.size() &&
                   plan.offsets[i] + tensors[i].bytes <= plan.arena_sizes[plan.arena[i]],
               ErrorKind::Internal, "memory plan: tensor " + std::to_string(i) + " ends past its arena");
    for (std::size_t j = i + 1; j < tensors.size(); ++j) {
      if (plan.arena[i] != plan.arena[j] || !lifetimes_overlap(tensors[i], tensors[j])) continue;
      const bool disjoint = plan.offsets[i] + tensors[i].bytes <= plan.offsets[j] ||
                            plan.offsets[j] + tensors[j].bytes <= plan.offsets[i];
      KILN_CHECK(disjoint, ErrorKind::Internal,
                 "memory plan: live tensors " + std::to_string(i) + " and " + std::to_string(j) + " share memory");
    }
  }
}

}  // namespace kiln::runtime

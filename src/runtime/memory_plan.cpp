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

MemoryPlan plan_memory(const std::vector<Lifetime>& tensors, std::uint64_t alignment) {
  KILN_ASSERT(alignment > 0);
  MemoryPlan plan;
  plan.offsets.assign(tensors.size(), 0);

  std::vector<std::size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (tensors[a].bytes != tensors[b].bytes) return tensors[a].bytes > tensors[b].bytes;
    return tensors[a].first < tensors[b].first;
  });

  struct Placed {
    std::uint64_t offset, end;
    std::size_t index;
  };
  std::vector<Placed> placed;  // sorted by offset
  for (std::size_t t : order) {
    KILN_ASSERT(tensors[t].first <= tensors[t].last);
    const std::uint64_t size = align_up(std::max<std::uint64_t>(tensors[t].bytes, 1), alignment);
    plan.unshared_bytes += size;
    // Gaps between the placed tensors that are live at the same time as t.
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
    plan.offsets[t] = best_offset;
    Placed entry{best_offset, best_offset + size, t};
    placed.insert(std::upper_bound(placed.begin(), placed.end(), entry,
                                   [](const Placed& a, const Placed& b) { return a.offset < b.offset; }),
                  entry);
    plan.arena_bytes = std::max(plan.arena_bytes, entry.end);
  }
  return plan;
}

void check_memory_plan(const std::vector<Lifetime>& tensors, const MemoryPlan& plan, std::uint64_t alignment) {
  KILN_CHECK(plan.offsets.size() == tensors.size(), ErrorKind::Internal, "memory plan: wrong number of offsets");
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    KILN_CHECK(plan.offsets[i] % alignment == 0, ErrorKind::Internal,
               "memory plan: tensor " + std::to_string(i) + " is misaligned");
    KILN_CHECK(plan.offsets[i] + tensors[i].bytes <= plan.arena_bytes, ErrorKind::Internal,
               "memory plan: tensor " + std::to_string(i) + " ends past the arena");
    for (std::size_t j = i + 1; j < tensors.size(); ++j) {
      if (!lifetimes_overlap(tensors[i], tensors[j])) continue;
      const bool disjoint = plan.offsets[i] + tensors[i].bytes <= plan.offsets[j] ||
                            plan.offsets[j] + tensors[j].bytes <= plan.offsets[i];
      KILN_CHECK(disjoint, ErrorKind::Internal,
                 "memory plan: live tensors " + std::to_string(i) + " and " + std::to_string(j) + " share memory");
    }
  }
}

}  // namespace kiln::runtime

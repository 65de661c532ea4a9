#include "src/compile/memory_plan.h"

#include "src/base/check.h"

#include <kiln/error.h>

#include <algorithm>
#include <numeric>

namespace kiln::compiler {

std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

namespace {

bool lifetimes_overlap(const Lifetime& a, const Lifetime& b) { return a.first <= b.last && b.first <= a.last; }

std::uint64_t padded_size(const Lifetime& t, std::uint64_t alignment) {
  return align_up(std::max<std::uint64_t>(t.bytes, 1), alignment);
}

// Tensors filed under every block of kStepsPerBlock steps their lifetimes
// touch, so that finding those live at the same time as another costs about
// as much as there are of them, not as much as there are tensors: inference
// graphs keep few tensors live at once however long they are.
class LiveIndex {
 public:
  LiveIndex(const std::vector<Lifetime>& tensors, const std::vector<std::size_t>& members) : tensors_(tensors) {
    int last = 0;
    for (std::size_t t : members) last = std::max(last, tensors[t].last);
    blocks_.resize(static_cast<std::size_t>(last / kStepsPerBlock) + 1);
  }

  void add(std::size_t t) {
    for (int b = tensors_[t].first / kStepsPerBlock; b <= tensors_[t].last / kStepsPerBlock; ++b)
      blocks_[static_cast<std::size_t>(b)].push_back(t);
  }

  // Calls fn(p) once for every added tensor p whose lifetime overlaps `life`.
  template <class Fn> void for_each_overlapping(const Lifetime& life, Fn&& fn) const {
    for (int b = life.first / kStepsPerBlock; b <= life.last / kStepsPerBlock; ++b)
      for (std::size_t p : blocks_[static_cast<std::size_t>(b)]) {
        const Lifetime& other = tensors_[p];
        // Filed in several blocks: report it in the first block both touch.
        if (lifetimes_overlap(other, life) && std::max(other.first, life.first) / kStepsPerBlock == b) fn(p);
      }
  }

 private:
  static constexpr int kStepsPerBlock = 16;
  const std::vector<Lifetime>& tensors_;
  std::vector<std::vector<std::size_t>> blocks_;
};

// Places `members` (indices into `tensors`) in one arena; returns its size.
std::uint64_t place_in_arena(const std::vector<Lifetime>& tensors, const std::vector<std::size_t>& members,
                             std::uint64_t alignment, std::vector<std::uint64_t>& offsets) {
  std::vector<std::size_t> order = members;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (tensors[a].bytes != tensors[b].bytes) return tensors[a].bytes > tensors[b].bytes;
    return tensors[a].first < tensors[b].first;
  });

  LiveIndex placed(tensors, members);
  std::vector<std::size_t> live;  // placed tensors live at the same time as the one being placed
  std::uint64_t arena_end = 0;
  for (std::size_t t : order) {
    const std::uint64_t size = padded_size(tensors[t], alignment);
    live.clear();
    placed.for_each_overlapping(tensors[t], [&](std::size_t p) { live.push_back(p); });
    std::sort(live.begin(), live.end(), [&](std::size_t a, std::size_t b) { return offsets[a] < offsets[b]; });
    // The smallest gap between them that fits t.
    std::uint64_t best_offset = 0, best_gap = UINT64_MAX, cursor = 0;
    bool found = false;
    for (std::size_t p : live) {
      if (offsets[p] >= cursor + size && offsets[p] - cursor < best_gap) {
        best_gap = offsets[p] - cursor;
        best_offset = cursor;
        found = true;
      }
      cursor = std::max(cursor, offsets[p] + padded_size(tensors[p], alignment));
    }
    if (!found) best_offset = cursor;  // after the last of them
    offsets[t] = best_offset;
    placed.add(t);
    arena_end = std::max(arena_end, best_offset + size);
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
    KILN_ASSERT(0 <= tensors[t].first && tensors[t].first <= tensors[t].last);
    const std::uint64_t size = padded_size(tensors[t], alignment);
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
      const std::uint64_t end = plan.offsets[t] + padded_size(tensors[t], alignment);
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
  std::vector<std::size_t> all(tensors.size());
  std::iota(all.begin(), all.end(), std::size_t{0});
  LiveIndex checked(tensors, all);
  for (std::size_t j = 0; j < tensors.size(); ++j) {
    KILN_CHECK(0 <= tensors[j].first && tensors[j].first <= tensors[j].last, ErrorKind::Internal,
               "memory plan: tensor " + std::to_string(j) + " has an empty lifetime");
    KILN_CHECK(plan.offsets[j] % alignment == 0, ErrorKind::Internal,
               "memory plan: tensor " + std::to_string(j) + " is misaligned");
    KILN_CHECK(plan.arena[j] >= 0 && static_cast<std::size_t>(plan.arena[j]) < plan.arena_sizes.size() &&
                   plan.offsets[j] + tensors[j].bytes <= plan.arena_sizes[plan.arena[j]],
               ErrorKind::Internal, "memory plan: tensor " + std::to_string(j) + " ends past its arena");
    checked.for_each_overlapping(tensors[j], [&](std::size_t i) {
      if (plan.arena[i] != plan.arena[j]) return;
      const bool disjoint = plan.offsets[i] + tensors[i].bytes <= plan.offsets[j] ||
                            plan.offsets[j] + tensors[j].bytes <= plan.offsets[i];
      KILN_CHECK(disjoint, ErrorKind::Internal,
                 "memory plan: live tensors " + std::to_string(i) + " and " + std::to_string(j) + " share memory");
    });
    checked.add(j);
  }
}

}  // namespace kiln::compiler

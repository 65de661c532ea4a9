// How the cpu backend runs a dispatch: workgroups spread over a pool of host
// threads (the caller among them), one workgroup at a time per thread. A
// kernel without barriers runs a workgroup's invocations one after another
// in a loop; one with barriers runs them as fibres (ucontext) on the thread:
// each runs until its next barrier, which switches to the next invocation,
// so every invocation reaches a barrier before any passes it. Barriers are
// in uniform control flow (kir::verify), so the invocations of a group meet
// the same barriers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace kiln::backend::cpu {

// The C entry points of a loaded kernel (compiler.h).
struct uvec3 {
  std::uint32_t x, y, z;
};
using RunGroupsFn = void (*)(void* const*, const std::int32_t*, std::uint32_t, std::uint32_t, uvec3);
using InvokeFn = void (*)(void* const*, const std::int32_t*, uvec3, uvec3);
using SetBarrierFn = void (*)(void (*)(void*), void*);

struct KernelEntry {
  RunGroupsFn run_groups = nullptr;
  InvokeFn invoke = nullptr;
  SetBarrierFn set_barrier = nullptr;
  std::uint32_t workgroup_size = 1;
  bool barriers = false;
};

class Workers {
 public:
  // `threads` host threads in all (the caller counts as one).
  explicit Workers(unsigned threads);
  ~Workers();
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;

  unsigned threads() const { return threads_; }
  // Runs every workgroup of the grid (`groups`: x, y, z = 1) and returns
  // when all are done. One dispatch at a time per Workers.
  void dispatch(const KernelEntry& kernel, uvec3 groups, const std::vector<void*>& buffers,
                const std::vector<std::int32_t>& params);

 private:
  struct Pool;
  unsigned threads_;
  std::unique_ptr<Pool> pool_;
  std::mutex dispatch_mutex_;
};

}  // namespace kiln::backend::cpu

#include "backends/cpu/workers.h"

#include "src/base/check.h"

#include <kiln/error.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <string>
#include <thread>

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define KILN_CPU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_CPU_ASAN 1
#endif
#endif
#ifdef KILN_CPU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace kiln::backend::cpu {
namespace {

// AddressSanitizer must be told when a thread changes stacks.
void start_switch([[maybe_unused]] void** fake_stack, [[maybe_unused]] const void* bottom,
                  [[maybe_unused]] std::size_t size) {
#ifdef KILN_CPU_ASAN
  __sanitizer_start_switch_fiber(fake_stack, bottom, size);
#endif
}

void finish_switch([[maybe_unused]] void* fake_stack, [[maybe_unused]] const void** bottom,
                   [[maybe_unused]] std::size_t* size) {
#ifdef KILN_CPU_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, bottom, size);
#endif
}

// One workgroup's invocations as fibres on this thread, for kernels with
// barriers. The stacks are kept for the thread's next groups.
class Fibres {
 public:
  ~Fibres() {
    if (stacks_ != nullptr) munmap(stacks_, capacity_ * slot_bytes());
  }

  void run(const KernelEntry& kernel, std::uint32_t group, uvec3 groups, void* const* buffers,
           const std::int32_t* params) {
    const std::uint32_t size = kernel.workgroup_size;
    reserve(size);
    kernel_ = &kernel;
    group_ = group;
    groups_ = groups;
    buffers_ = buffers;
    params_ = params;
    contexts_.resize(size);
    fake_stacks_.assign(size, nullptr);
    done_.assign(size, 0);
    kernel.set_barrier(&Fibres::barrier, this);
    for (std::uint32_t lid = 0; lid < size; ++lid) {
      ucontext_t& c = contexts_[lid];
      KILN_CHECK(getcontext(&c) == 0, ErrorKind::Internal, "the cpu backend: getcontext failed");
      c.uc_stack.ss_sp = stack(lid);
      c.uc_stack.ss_size = kStackBytes;
      c.uc_link = &scheduler_;
      makecontext(&c, &Fibres::entry, 0);
    }
    current_thread_fibres() = this;
    std::uint32_t left = size;
    while (left > 0) {
      for (std::uint32_t lid = 0; lid < size; ++lid) {
        if (done_[lid]) continue;
        current_ = lid;
        void* fake = nullptr;
        start_switch(&fake, stack(lid), kStackBytes);
        swapcontext(&scheduler_, &contexts_[lid]);
        finish_switch(fake, nullptr, nullptr);
        if (done_[lid]) --left;
      }
    }
  }

 private:
  static constexpr std::size_t kStackBytes = 128 * 1024;

  static Fibres*& current_thread_fibres() {
    thread_local Fibres* fibres = nullptr;
    return fibres;
  }

  std::size_t slot_bytes() const { return kStackBytes + static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }
  // The usable stack of fibre `lid` (above its guard page).
  char* stack(std::uint32_t lid) const {
    return static_cast<char*>(stacks_) + lid * slot_bytes() + static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  }

  void reserve(std::uint32_t size) {
    if (size <= capacity_) return;
    if (stacks_ != nullptr) munmap(stacks_, capacity_ * slot_bytes());
    stacks_ = nullptr;
    capacity_ = 0;
    void* p = mmap(nullptr, size * slot_bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED)
      throw_error(ErrorKind::OutOfMemory, "the cpu backend cannot map stacks for " + std::to_string(size) +
                                              " invocations of a workgroup: " + std::strerror(errno));
    stacks_ = p;
    capacity_ = size;
    for (std::uint32_t lid = 0; lid < size; ++lid)  // a guard page below each stack
      mprotect(static_cast<char*>(stacks_) + lid * slot_bytes(), static_cast<std::size_t>(sysconf(_SC_PAGESIZE)),
               PROT_NONE);
  }

  static void entry() {
    Fibres& f = *current_thread_fibres();
    finish_switch(nullptr, &f.scheduler_bottom_, &f.scheduler_size_);
    const std::uint32_t lid = f.current_;
    const std::uint32_t size = f.kernel_->workgroup_size;
    const uvec3 id{(f.group_ % f.groups_.x) * size + lid, f.group_ / f.groups_.x, 0};
    f.kernel_->invoke(f.buffers_, f.params_, id, f.groups_);
    f.done_[lid] = 1;
    start_switch(nullptr, f.scheduler_bottom_, f.scheduler_size_);  // this fibre ends
  }

  static void barrier(void* context) {
    Fibres& f = *static_cast<Fibres*>(context);
    const std::uint32_t lid = f.current_;
    start_switch(&f.fake_stacks_[lid], f.scheduler_bottom_, f.scheduler_size_);
    swapcontext(&f.contexts_[lid], &f.scheduler_);
    finish_switch(f.fake_stacks_[lid], &f.scheduler_bottom_, &f.scheduler_size_);
  }

  void* stacks_ = nullptr;
  std::uint32_t capacity_ = 0;
  std::vector<ucontext_t> contexts_;
  std::vector<void*> fake_stacks_;
  std::vector<char> done_;
  ucontext_t scheduler_{};
  const void* scheduler_bottom_ = nullptr;
  std::size_t scheduler_size_ = 0;
  std::uint32_t current_ = 0;
  const KernelEntry* kernel_ = nullptr;
  std::uint32_t group_ = 0;
  uvec3 groups_{};
  void* const* buffers_ = nullptr;
  const std::int32_t* params_ = nullptr;
};

Fibres& thread_fibres() {
  thread_local Fibres fibres;
  return fibres;
}

}  // namespace

// Threads that wait for a dispatch, then take workgroups from a shared
// counter until none is left.
struct Workers::Pool {
  std::mutex mutex;
  std::condition_variable wake, finished;
  std::vector<std::thread> threads;
  bool stop = false;
  std::uint64_t generation = 0;
  const std::function<void(std::uint32_t)>* job = nullptr;
  std::atomic<std::uint32_t> next{0};
  std::uint32_t count = 0;
  std::size_t busy = 0;
  std::exception_ptr error;

  void work() {
    for (std::uint32_t g = next.fetch_add(1); g < count; g = next.fetch_add(1)) {
      try {
        (*job)(g);
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!error) error = std::current_exception();
        next.store(count);
      }
    }
  }

  void loop() {
    std::uint64_t seen = 0;
    std::unique_lock lock(mutex);
    for (;;) {
      wake.wait(lock, [&] { return stop || generation != seen; });
      if (stop) return;
      seen = generation;
      lock.unlock();
      work();
      lock.lock();
      if (--busy == 0) finished.notify_all();
    }
  }

  void run(std::uint32_t n, const std::function<void(std::uint32_t)>& fn) {
    {
      std::lock_guard lock(mutex);
      job = &fn;
      count = n;
      next.store(0);
      busy = threads.size();
      error = nullptr;
      ++generation;
    }
    wake.notify_all();
    work();
    std::unique_lock lock(mutex);
    finished.wait(lock, [&] { return busy == 0; });
    job = nullptr;
    if (error) std::rethrow_exception(error);
  }
};

Workers::Workers(unsigned threads) : threads_(std::max(1u, threads)), pool_(std::make_unique<Pool>()) {
  for (unsigned i = 1; i < threads_; ++i) pool_->threads.emplace_back([this] { pool_->loop(); });
}

Workers::~Workers() {
  {
    std::lock_guard lock(pool_->mutex);
    pool_->stop = true;
  }
  pool_->wake.notify_all();
  for (std::thread& t : pool_->threads) t.join();
}

void Workers::dispatch(const KernelEntry& kernel, uvec3 groups, const std::vector<void*>& buffers,
                       const std::vector<std::int32_t>& params) {
  const std::uint64_t total = static_cast<std::uint64_t>(groups.x) * groups.y * groups.z;
  if (total == 0) return;
  KILN_CHECK(groups.z == 1, ErrorKind::InvalidArgument,
             "the cpu backend runs 2-D grids; got " + std::to_string(groups.z) + " workgroups in z");
  void* const* b = buffers.data();
  const std::int32_t* p = params.data();
  std::function<void(std::uint32_t)> one_group;
  if (kernel.barriers)
    one_group = [&](std::uint32_t g) { thread_fibres().run(kernel, g, groups, b, p); };
  else
    one_group = [&](std::uint32_t g) { kernel.run_groups(b, p, g, g + 1, groups); };
  std::lock_guard lock(dispatch_mutex_);
  pool_->run(static_cast<std::uint32_t>(total), one_group);
}

}  // namespace kiln::backend::cpu

#include "src/runtime/call_queue.h"

namespace kiln::runtime {

CallQueue::~CallQueue() {
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }
  ready_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void CallQueue::push(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    // A model that never submits never has a thread. Started before the
    // task is queued, so that a failure to start queues nothing.
    // A lambda, not &CallQueue::work: GCC gives std::thread's state for a
    // member-function pointer default visibility, so libkiln would export
    // its typeinfo and vtable naming kiln::runtime (the linkage suite).
    if (!thread_.joinable()) thread_ = std::thread([this] { work(); });
    tasks_.push_back(std::move(task));
  }
  ready_.notify_one();
}

void CallQueue::work() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [this] { return closing_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // closing, and nothing left to run
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace kiln::runtime

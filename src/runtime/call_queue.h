// The thread that runs a model's submitted calls, one at a time, in the
// order they were pushed (kiln::CompiledModel::submit).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace kiln::runtime {

class CallQueue {
 public:
  CallQueue() = default;
  // Runs every task still queued, then joins the thread.
  ~CallQueue();
  CallQueue(const CallQueue&) = delete;
  CallQueue& operator=(const CallQueue&) = delete;

  // Queues `task` (which must not throw) behind every task pushed before;
  // the thread starts with the first task.
  void push(std::function<void()> task);

 private:
  void work();

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  bool closing_ = false;
  std::thread thread_;
};

}  // namespace kiln::runtime

#include "src/runtime/background_tuning.h"

#include "src/base/log.h"

#include <deque>
#include <exception>
#include <thread>

namespace kiln::runtime {

// The process's one tuning thread and its queue. At exit every job still
// queued is dropped and the running one is cancelled before the join.
class BackgroundTuning {
 public:
  static BackgroundTuning& instance() {
    static BackgroundTuning queue;
    return queue;
  }
  ~BackgroundTuning() {
    std::shared_ptr<TuningJob> running;
    {
      std::lock_guard lock(mutex_);
      closing_ = true;
      for (const std::shared_ptr<TuningJob>& job : jobs_) finish(*job);
      jobs_.clear();
      running = running_;
    }
    if (running) running->cancelled_ = true;
    ready_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

  void push(std::shared_ptr<TuningJob> job);

  static void finish(TuningJob& job) {
    {
      std::lock_guard lock(job.mutex_);
      job.state_ = TuningJob::State::finished;
      job.work_ = nullptr;  // what the work holds (a device, a model) goes now
    }
    job.changed_.notify_all();
  }

 private:
  BackgroundTuning() = default;

  void work() {
    for (;;) {
      std::shared_ptr<TuningJob> job;
      {
        std::unique_lock lock(mutex_);
        ready_.wait(lock, [this] { return closing_ || !jobs_.empty(); });
        if (closing_) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
        running_ = job;
      }
      run(*job);
      std::lock_guard lock(mutex_);
      running_.reset();
    }
  }

  static void run(TuningJob& job) {
    bool start = false;
    {
      std::lock_guard lock(job.mutex_);
      start = !job.cancelled_;
      if (start) job.state_ = TuningJob::State::running;
    }
    if (start) {
      try {
        job.work_(job);
      } catch (const std::exception& e) {
        base::log(base::LogLevel::warning, "background " + job.what_ + " failed: " + e.what() + "; the model keeps its plan");
      }
    }
    finish(job);
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::shared_ptr<TuningJob>> jobs_;
  std::shared_ptr<TuningJob> running_;
  bool closing_ = false;
  std::thread thread_;
};

// Out of the class (not inline): the thread's state for a lambda of an
// inline function would be exported from libkiln (the linkage suite).
void BackgroundTuning::push(std::shared_ptr<TuningJob> job) {
  {
    std::lock_guard lock(mutex_);
    if (!thread_.joinable()) thread_ = std::thread([this] { work(); });
    jobs_.push_back(std::move(job));
  }
  ready_.notify_one();
}

void TuningJob::cancel() {
  cancelled_ = true;
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return state_ != State::running; });
}

void TuningJob::wait() const {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return state_ == State::finished; });
}

bool TuningJob::finished() const {
  std::lock_guard lock(mutex_);
  return state_ == State::finished;
}

std::shared_ptr<TuningJob> tune_in_background(std::string what, std::function<void(const TuningJob&)> work) {
  auto job = std::make_shared<TuningJob>();
  job->what_ = std::move(what);
  job->work_ = std::move(work);
  BackgroundTuning::instance().push(job);
  return job;
}

}  // namespace kiln::runtime

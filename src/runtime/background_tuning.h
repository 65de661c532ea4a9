// max-autotune's `tune=background`: a model runs at once on the tuning
// database's records (else the heuristic's knobs) while the sites without a
// record are tuned here, on one thread for the whole process, one job at a
// time (the tuning worker times candidates on the device: two jobs at once
// would time each other). A job (the Executor's) builds the tuned plan and
// loads its kernels; the model's next call switches to it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace kiln::runtime {

class TuningJob;
// Queues `work` behind every job queued before (the thread starts with the
// first job). An exception from `work` is logged as a warning naming `what`;
// the model keeps the plan it has.
std::shared_ptr<TuningJob> tune_in_background(std::string what, std::function<void(const TuningJob&)> work);

class TuningJob {
 public:
  // Whether cancel() was called: the work asks between tuning candidates.
  bool cancelled() const { return cancelled_.load(); }
  // A queued job never runs; a running one is asked to stop. Returns once
  // the job no longer runs (a running one finishes its current candidate).
  void cancel();
  // Returns once the job has run or was cancelled.
  void wait() const;
  bool finished() const;

 private:
  friend class BackgroundTuning;
  friend std::shared_ptr<TuningJob> tune_in_background(std::string, std::function<void(const TuningJob&)>);
  enum class State { queued, running, finished };
  std::function<void(const TuningJob&)> work_;
  std::string what_;  // for the log: "tuning 'resnet18'"
  std::atomic<bool> cancelled_ = false;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  State state_ = State::queued;
};


}  // namespace kiln::runtime

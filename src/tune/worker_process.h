// The tuner's side of the tuning worker (kiln-tune-worker): a child process
// that holds the device, fed one request line at a time over a socket pair
// (stdin and stdout of the child), and killed when a reply does not come
// within its time limit.
#pragma once

#include <string>
#include <sys/types.h>

namespace kiln::tune {

class WorkerProcess {
 public:
  enum class Outcome { replied, died, timed_out };

  // Starts `path` with `hello` as its first line and waits up to `limit_s`
  // for its first reply, returned in `reply`. Throws Error(NotFound) when
  // the executable cannot be started, Error(DeviceUnavailable) when it dies
  // or stays silent before replying.
  WorkerProcess(const std::string& path, const std::string& hello, double limit_s, std::string& reply);
  ~WorkerProcess();  // kills the worker if it still runs
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Sends one line and waits up to `limit_s` for one line back. On a
  // timeout the worker is killed; after died or timed_out it is gone.
  Outcome exchange(const std::string& request, std::string& reply, double limit_s);

  // How the worker ended ("killed by signal 6", "exited with status 1").
  const std::string& exit_description() const { return exit_; }

 private:
  void reap(bool kill_first);

  pid_t pid_ = -1;
  int fd_ = -1;
  std::string buffered_;  // bytes read past the last reply's newline
  std::string exit_;
};

}  // namespace kiln::tune

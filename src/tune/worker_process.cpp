#include "src/tune/worker_process.h"

#include "src/base/check.h"

#include <kiln/error.h>

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

extern char** environ;

namespace kiln::tune {

WorkerProcess::WorkerProcess(const std::string& path, const std::string& hello, double limit_s, std::string& reply) {
  KILN_CHECK(access(path.c_str(), X_OK) == 0, ErrorKind::NotFound,
             "tuning worker '" + path + "' is not an executable file (set KILN_TUNE_WORKER or TuneOptions::worker_path)");
  int fds[2];
  KILN_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0, ErrorKind::Io,
             std::string("socketpair for the tuning worker failed: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  char* argv[] = {const_cast<char*>(path.c_str()), nullptr};
  const int spawned = posix_spawn(&pid_, path.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  fd_ = fds[0];
  if (spawned != 0) {
    close(fd_);
    fd_ = -1;
    pid_ = -1;
    throw_error(ErrorKind::NotFound, "cannot start the tuning worker '" + path + "': " + std::strerror(spawned));
  }
  if (exchange(hello, reply, limit_s) != Outcome::replied)
    throw_error(ErrorKind::DeviceUnavailable, "the tuning worker '" + path + "' did not start: " +
                                                  (exit_.empty() ? "no reply" : exit_));
}

WorkerProcess::~WorkerProcess() { reap(true); }

void WorkerProcess::reap(bool kill_first) {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  if (pid_ < 0) return;
  if (kill_first) kill(pid_, SIGKILL);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status))
    exit_ = "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  else if (WIFEXITED(status))
    exit_ = "exited with status " + std::to_string(WEXITSTATUS(status));
  pid_ = -1;
}

WorkerProcess::Outcome WorkerProcess::exchange(const std::string& request, std::string& reply, double limit_s) {
  using Clock = std::chrono::steady_clock;
  if (fd_ < 0) return Outcome::died;
  const std::string line = request + "\n";
  for (std::size_t sent = 0; sent < line.size();) {
    const ssize_t n = send(fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      reap(false);
      return Outcome::died;
    }
    sent += static_cast<std::size_t>(n);
  }
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limit_s));
  for (;;) {
    const std::size_t newline = buffered_.find('\n');
    if (newline != std::string::npos) {
      reply = buffered_.substr(0, newline);
      buffered_.erase(0, newline + 1);
      return Outcome::replied;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      reap(true);
      return Outcome::timed_out;
    }
    pollfd p{fd_, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (ready < 0 && errno != EINTR) {
      reap(true);
      return Outcome::died;
    }
    if (ready <= 0) continue;
    char chunk[65536];
    const ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // The worker closed its end: it died (a clean exit before replying is a death too).
      reap(false);
      return Outcome::died;
    }
    buffered_.append(chunk, static_cast<std::size_t>(n));
  }
}

}  // namespace kiln::tune

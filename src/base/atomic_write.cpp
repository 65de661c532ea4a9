#include "src/base/atomic_write.h"

#include "src/base/file_type.h"

#include <kiln/error.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::base {
namespace {

std::string errno_text() { return std::strerror(errno); }

// Creates `temp` exclusively (O_EXCL | O_NOFOLLOW) and returns its descriptor,
// or -1 with errno set.
int create_exclusively(const std::filesystem::path& temp) {
  return ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
}

void remove_quietly(const std::filesystem::path& temp) {
  std::error_code ignored;
  std::filesystem::remove(temp, ignored);
}

// Every failure names the file being written first.
std::string cannot_write(const std::filesystem::path& path, const std::string& why) {
  return "cannot write '" + path.string() + "': " + why;
}

// "" or why `path` may not be replaced: it exists (through links) and is not
// a regular file.
std::string replace_refusal(const std::filesystem::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0 || S_ISREG(info.st_mode)) return "";
  return cannot_write(path, "it is " + file_type_name(info.st_mode) + ", which kiln does not replace; name a file");
}

// "" or why renaming `temp` over `path` failed (`temp` then removed).
std::string rename_into_place(const std::filesystem::path& temp, const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (!ec) return "";
  remove_quietly(temp);
  return cannot_write(path, "cannot rename its temporary file '" + temp.string() + "' into place: " + ec.message());
}

}  // namespace

std::filesystem::path temporary_path_beside(const std::filesystem::path& path) {
  static std::atomic<unsigned> counter = 0;
  std::filesystem::path temp = path;
  temp += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  return temp;
}

std::string try_write_file_atomically(const std::filesystem::path& path, std::string_view bytes) {
  if (std::string refusal = replace_refusal(path); !refusal.empty()) return refusal;
  const std::filesystem::path temp = temporary_path_beside(path);
  const int fd = create_exclusively(temp);
  if (fd < 0) return cannot_write(path, "cannot create its temporary file '" + temp.string() + "': " + errno_text());
  std::string failure;
  std::size_t done = 0;
  while (done < bytes.size() && failure.empty()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) failure = cannot_write(path, n < 0 ? errno_text() : "no progress");
    else done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0 && failure.empty()) failure = cannot_write(path, errno_text());
  if (!failure.empty()) {
    remove_quietly(temp);
    return failure;
  }
  return rename_into_place(temp, path);
}

void write_file_atomically(const std::filesystem::path& path, std::string_view bytes) {
  const std::string failure = try_write_file_atomically(path, bytes);
  if (!failure.empty()) throw_error(ErrorKind::Io, failure);
}

void write_file_atomically(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write) {
  if (std::string refusal = replace_refusal(path); !refusal.empty()) throw_error(ErrorKind::Io, refusal);
  const std::filesystem::path temp = temporary_path_beside(path);
  const int fd = create_exclusively(temp);
  if (fd < 0)
    throw_error(ErrorKind::Io,
                cannot_write(path, "cannot create its temporary file '" + temp.string() + "': " + errno_text()));
  ::close(fd);
  try {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out.good()) throw_error(ErrorKind::Io, cannot_write(path, "cannot open its temporary file '" + temp.string() + "'"));
    errno = 0;
    write(out);
    out.close();
    // The stream keeps no error code; the failed write() left its errno.
    if (!out) throw_error(ErrorKind::Io, cannot_write(path, errno != 0 ? errno_text() : "writing failed (disk full?)"));
  } catch (...) {
    remove_quietly(temp);
    throw;
  }
  const std::string failure = rename_into_place(temp, path);
  if (!failure.empty()) throw_error(ErrorKind::Io, failure);
}

void move_into_place(const std::filesystem::path& temp, const std::filesystem::path& path) {
  if (std::string refusal = replace_refusal(path); !refusal.empty()) {
    remove_quietly(temp);
    throw_error(ErrorKind::Io, refusal);
  }
  // Durable before it takes the name: a crash leaves the old file or the whole new one.
  const int fd = ::open(temp.c_str(), O_RDONLY | O_CLOEXEC);
  const bool synced = fd >= 0 && ::fsync(fd) == 0;
  if (fd >= 0) ::close(fd);
  if (!synced) {
    remove_quietly(temp);
    throw_error(ErrorKind::Io, cannot_write(path, "cannot sync '" + temp.string() + "' to disk"));
  }
  const std::string failure = rename_into_place(temp, path);
  if (!failure.empty()) throw_error(ErrorKind::Io, failure);
}

}  // namespace kiln::base

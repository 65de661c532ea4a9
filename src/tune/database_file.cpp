#include "src/tune/database_file.h"

#include "src/base/file_type.h"

#include <kiln/error.h>

#include <cerrno>
#include <ctime>
#include <filesystem>
#include <system_error>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::tune {
namespace {

constexpr const char* kCompanions[] = {"-wal", "-shm", "-journal"};

std::string errno_text(int error) { return std::error_code(error, std::generic_category()).message(); }

// Throws unless `path` is absent or a regular file (or a link to one).
std::optional<FileIdentity> check_one(const std::string& path, const std::string& database) {
  const std::string what = path == database ? "tuning database " + path : path + " (beside tuning database " + database + ")";
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return std::nullopt;
    throw_error(ErrorKind::Io, what + " cannot be examined: " + errno_text(errno));
  }
  if (S_ISLNK(info.st_mode)) {
    if (::stat(path.c_str(), &info) != 0)
      throw_error(ErrorKind::Io, what + " is a symbolic link to nothing usable: " + errno_text(errno));
    if (!S_ISREG(info.st_mode))
      throw_error(ErrorKind::Io, what + " is a symbolic link to " + base::file_type_name(info.st_mode) + ", not a regular file");
  } else if (!S_ISREG(info.st_mode)) {
    throw_error(ErrorKind::Io, what + " is " + base::file_type_name(info.st_mode) + ", not a regular file");
  }
  return FileIdentity{info.st_dev, info.st_ino};
}

std::string utc_stamp() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &utc);
  return buf;
}

bool exists_any(const std::string& path) {
  struct stat info {};
  return ::lstat(path.c_str(), &info) == 0;
}

}  // namespace

std::optional<FileIdentity> check_database_path(const std::string& path) {
  auto identity = check_one(path, path);
  for (const char* suffix : kCompanions) check_one(path + suffix, path);
  return identity;
}

std::optional<std::string> set_aside(const std::string& path, const FileIdentity& identity, const std::string& label) {
  // An advisory lock on the bad file itself (flock, which SQLite's POSIX
  // locks do not see) serialises the processes that found it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    throw_error(ErrorKind::Io, "cannot open tuning database " + path + " to set it aside: " + errno_text(errno));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }  // also releases the flock
  } closer{fd};
  if (::flock(fd, LOCK_EX) != 0)
    throw_error(ErrorKind::Io, "cannot lock tuning database " + path + " to set it aside: " + errno_text(errno));
  struct stat now {};
  if (::stat(path.c_str(), &now) != 0 || FileIdentity{now.st_dev, now.st_ino} != identity) return std::nullopt;

  const std::string base = path + "." + label + "-" + utc_stamp();
  std::string aside = base;
  for (int n = 2; exists_any(aside); ++n) aside = base + "-" + std::to_string(n);
  // The companions belong to the bad file (a fresh database must not replay
  // its log), and go first: while the bad file holds the path, no other
  // process has a fresh database there, whose companions these would be
  // once the bad file is gone.
  for (const char* suffix : kCompanions) {
    const std::string companion = path + suffix;
    if (exists_any(companion) && ::rename(companion.c_str(), (aside + suffix).c_str()) != 0)
      throw_error(ErrorKind::Io, "cannot set " + companion + " aside as " + aside + suffix + ": " + errno_text(errno));
  }
  if (::rename(path.c_str(), aside.c_str()) != 0)
    throw_error(ErrorKind::Io, "cannot set tuning database " + path + " aside as " + aside + ": " + errno_text(errno));
  return aside;
}

}  // namespace kiln::tune

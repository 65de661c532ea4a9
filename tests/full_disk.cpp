// Preloaded (LD_PRELOAD) into a `kiln` process by the cli suite to make one
// folder behave as a full disk: every write of one byte or more to a file
// under KILN_TEST_FULL_DISK (write, pwrite, writev, as the C++ library,
// SQLite and kiln's own writers call them) fails with ENOSPC; reads,
// creates, renames and removals work, as they do on a full filesystem.
// Never used outside tests.
// Both pwrite and pwrite64 are defined below under their own names (meson
// defines this, which would make pwrite's declaration name pwrite64).
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

bool on_full_disk(int fd) {
  const char* dir = std::getenv("KILN_TEST_FULL_DISK");
  if (dir == nullptr || *dir == '\0') return false;
  char link[64];
  char path[4096];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = ::readlink(link, path, sizeof path - 1);
  if (n < 0) return false;
  path[n] = '\0';
  const std::size_t length = std::strlen(dir);
  return std::strncmp(path, dir, length) == 0 && (path[length] == '/' || path[length] == '\0');
}

// Whether a write of `bytes` to `fd` must fail (errno set to ENOSPC).
bool refuse(int fd, std::size_t bytes) {
  if (bytes == 0 || !on_full_disk(fd)) return false;
  errno = ENOSPC;
  return true;
}

template <class F>
F next(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" ssize_t write(int fd, const void* data, std::size_t bytes) {
  static const auto real = next<ssize_t (*)(int, const void*, std::size_t)>("write");
  if (refuse(fd, bytes)) return -1;
  return real(fd, data, bytes);
}

extern "C" ssize_t pwrite(int fd, const void* data, std::size_t bytes, off_t offset) {
  static const auto real = next<ssize_t (*)(int, const void*, std::size_t, off_t)>("pwrite");
  if (refuse(fd, bytes)) return -1;
  return real(fd, data, bytes, offset);
}

extern "C" ssize_t pwrite64(int fd, const void* data, std::size_t bytes, off64_t offset) {
  static const auto real = next<ssize_t (*)(int, const void*, std::size_t, off64_t)>("pwrite64");
  if (refuse(fd, bytes)) return -1;
  return real(fd, data, bytes, offset);
}

extern "C" ssize_t writev(int fd, const struct iovec* parts, int count) {
  static const auto real = next<ssize_t (*)(int, const struct iovec*, int)>("writev");
  std::size_t bytes = 0;
  for (int i = 0; i < count; ++i) bytes += parts[i].iov_len;
  if (refuse(fd, bytes)) return -1;
  return real(fd, parts, count);
}

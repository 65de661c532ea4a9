#include "src/cache/cache_entry.h"

#include "src/base/atomic_write.h"
#include "src/base/file_type.h"

#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::cache {
namespace {

// Layout, integers little-endian:
//   magic[8] | u32 layout version | u32 kind length | kind | u64 key length | key
//   | u64 payload length | payload | u64 XXH3-64 of every byte before it
constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'C', 'A', 'C', 'H'};
// Bump when the layout above changes.
constexpr std::uint32_t kLayoutVersion = 1;

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}
void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

// Reads fields front to back; every take fails cleanly past the end.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  std::size_t position() const { return pos_; }
  bool at_end() const { return pos_ == bytes_.size(); }

  bool take(std::size_t n, std::string_view& out) {
    if (bytes_.size() - pos_ < n) return false;
    out = bytes_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool take_u32(std::uint32_t& out) {
    std::uint64_t v = 0;
    if (!take_le(4, v)) return false;
    out = static_cast<std::uint32_t>(v);
    return true;
  }
  bool take_u64(std::uint64_t& out) { return take_le(8, out); }

 private:
  bool take_le(int n, std::uint64_t& out) {
    std::string_view raw;
    if (!take(static_cast<std::size_t>(n), raw)) return false;
    out = 0;
    for (int i = 0; i < n; ++i) out |= std::uint64_t{static_cast<unsigned char>(raw[i])} << (8 * i);
    return true;
  }

  std::string_view bytes_;
  std::size_t pos_ = 0;
};

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string errno_text() { return std::error_code(errno, std::generic_category()).message(); }

// The entry's bytes, or a problem. O_NOFOLLOW refuses links; O_NONBLOCK makes
// opening a FIFO return at once instead of waiting for a writer; the type and
// size are checked on the open descriptor, so nothing can swap the file
// between the check and the read.
std::string read_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes, std::string& problem,
                              bool& absent) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      absent = true;
    } else if (errno == ELOOP) {
      problem = "a symbolic link, not a regular file";
    } else {
      problem = "cannot be opened: " + errno_text();
    }
    return {};
  }
  FileDescriptor file(fd);
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    problem = "cannot be examined: " + errno_text();
    return {};
  }
  if (!S_ISREG(info.st_mode)) {
    problem = base::file_type_name(info.st_mode) + ", not a regular file";
    return {};
  }
  const auto size = static_cast<std::uint64_t>(info.st_size);
  if (size > max_bytes) {
    problem = std::to_string(size) + " bytes, more than this cache's limit of " + std::to_string(max_bytes);
    return {};
  }
  std::string bytes(size, '\0');
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      problem = "cannot be read: " + errno_text();
      return {};
    }
    if (n == 0) {
      problem = "truncated while it was read";
      return {};
    }
    done += static_cast<std::size_t>(n);
  }
  return bytes;
}

}  // namespace

CacheEntryRead read_cache_entry(const std::filesystem::path& path, std::string_view kind, std::string_view key,
                                std::uint64_t max_bytes) {
  CacheEntryRead result;
  bool absent = false;
  const std::string bytes = read_regular_file(path, max_bytes, result.problem, absent);
  if (absent || !result.problem.empty()) return result;

  auto reject = [&](std::string why) {
    result.problem = std::move(why);
    return result;
  };
  Reader in(bytes);
  std::string_view magic, stored_kind, stored_key, payload;
  std::uint32_t version = 0, kind_size = 0;
  std::uint64_t key_size = 0, payload_size = 0, checksum = 0;
  if (!in.take(sizeof kMagic, magic) || magic != std::string_view(kMagic, sizeof kMagic))
    return reject("not a kiln cache entry (bad magic)");
  if (!in.take_u32(version)) return reject("truncated");
  if (version != kLayoutVersion)
    return reject("entry layout version " + std::to_string(version) + ", this kiln reads " +
                  std::to_string(kLayoutVersion));
  if (!in.take_u32(kind_size) || !in.take(kind_size, stored_kind) || !in.take_u64(key_size) ||
      !in.take(key_size, stored_key) || !in.take_u64(payload_size) || !in.take(payload_size, payload))
    return reject("truncated");
  const std::size_t covered = in.position();
  if (!in.take_u64(checksum)) return reject("truncated");
  if (!in.at_end()) return reject("trailing bytes after the checksum");
  if (checksum != XXH3_64bits(bytes.data(), covered)) return reject("checksum mismatch");
  if (stored_kind != kind)
    return reject("written for the '" + std::string(stored_kind.substr(0, 64)) + "' cache, not the '" +
                  std::string(kind) + "' cache");
  if (stored_key != key) return reject("written for another key");
  result.payload = std::string(payload);
  return result;
}

std::string write_cache_entry(const std::filesystem::path& path, std::string_view kind, std::string_view key,
                              std::string_view payload) {
  std::string blob(kMagic, sizeof kMagic);
  put_u32(blob, kLayoutVersion);
  put_u32(blob, static_cast<std::uint32_t>(kind.size()));
  blob += kind;
  put_u64(blob, key.size());
  blob += key;
  put_u64(blob, payload.size());
  blob += payload;
  put_u64(blob, XXH3_64bits(blob.data(), blob.size()));

  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return "cannot create directory " + path.parent_path().string() + ": " + ec.message();

  return base::try_write_file_atomically(path, blob);
}

std::string discard_cache_entry(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::remove(path, ec);
  return ec ? ec.message() : "";
}

}  // namespace kiln::cache

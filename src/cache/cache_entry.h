// One entry of an on-disk cache, the one format every kiln cache uses
// (compiled kernels today; pipeline caches, plans and tuning records as they
// come), so that none of them can hand back something written for another key.
//
// An entry is a file holding the full key it was written for beside its
// payload, with a checksum over both. Reading checks all of it: an entry is
// used only if it is a regular file (never a link, FIFO, device or directory,
// which are not followed, opened for blocking or read), no larger than the
// caller's limit, well formed, checksum-valid, and written for exactly the
// same cache kind and key text. The file's name is only an index (a digest of
// the key); a file in another entry's place is rejected, not trusted.
// Writes go to a temporary file in the same directory and are renamed into
// place, so readers see the old file or the whole new one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::cache {

// What reading one entry found.
struct CacheEntryRead {
  std::optional<std::string> payload;  // set when the entry is usable
  // Why a file at the path was not used ("not a regular file (a FIFO)",
  // "written for another key", "checksum mismatch", ...); empty when the
  // entry was usable or there was no file at all.
  std::string problem;
};

// Reads the entry at `path` for cache `kind` ("kernel") and `key` (the full
// key text, not its digest). Files larger than `max_bytes` are not read.
CacheEntryRead read_cache_entry(const std::filesystem::path& path, std::string_view kind, std::string_view key,
                                std::uint64_t max_bytes);

// Writes an entry atomically, creating its directory; returns "" or what
// went wrong (caches are best effort: callers log it and go on).
std::string write_cache_entry(const std::filesystem::path& path, std::string_view kind, std::string_view key,
                              std::string_view payload);

// Removes whatever is at `path` (a rejected entry, a link, a FIFO, an empty
// directory; never recursively); returns "" or why it could not.
std::string discard_cache_entry(const std::filesystem::path& path);

}  // namespace kiln::cache

// Every file kiln writes appears whole or not at all: it is written to a
// temporary file beside its path (created exclusively, named for this writer:
// never an existing file or link), then renamed over the path. On failure the
// temporary file is removed and the old file, if any, stays. A path that
// names something other than a regular file (a device such as /dev/null, a
// FIFO, a directory) is refused before anything is written: renaming over it
// would replace it.
#pragma once

#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

namespace kiln::base {

// Writes `bytes` to `path`. Returns "" or what went wrong (for callers whose
// failure is a warning, such as cache entries).
std::string try_write_file_atomically(const std::filesystem::path& path, std::string_view bytes);

// Writes `bytes` to `path`; throws Error(Io) naming the file on failure.
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes);

// Calls `write` with a stream on the temporary file (for files too large to
// hold in memory twice), then renames it; throws Error(Io) on failure, and
// passes on what `write` throws, having removed the temporary file.
void write_file_atomically(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write);

// A name beside `path` for a temporary file this writer alone uses (the
// process id and a per-process counter), for writers that produce the file
// themselves (SQLite's VACUUM INTO) before move_into_place.
std::filesystem::path temporary_path_beside(const std::filesystem::path& path);

// Makes the already-written `temp` durable (fsync), then renames it over
// `path`; throws Error(Io) naming both on failure, having removed `temp`.
void move_into_place(const std::filesystem::path& temp, const std::filesystem::path& path);

}  // namespace kiln::base

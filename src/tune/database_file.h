// The tuning database's file on disk, before and beside SQLite: refusing
// paths that are not regular files (SQLite would block on a FIFO or read a
// device), and setting aside a file that is not a usable database.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace kiln::tune {

// Which file a path named when it was examined (device and inode).
struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  friend bool operator==(const FileIdentity&, const FileIdentity&) = default;
};

// Throws Error(Io) naming the path when it, or SQLite's companion files
// beside it (-wal, -shm, -journal), exist but are not regular files (a
// directory, a FIFO, a socket, a device, a link to one, a dangling link).
// Returns the file's identity, or nothing when there is no file yet.
std::optional<FileIdentity> check_database_path(const std::string& path);

// Renames the file at `path` and its companion files to
// PATH.<label>-<UTC time> (a free name), if `path` still names the file
// `identity` was taken from: when several processes find the same bad file,
// one moves it and the rest find the fresh database another made. Returns
// the new name, or nothing when the file had already gone. Throws Error(Io)
// when it cannot rename.
std::optional<std::string> set_aside(const std::string& path, const FileIdentity& identity, const std::string& label);

}  // namespace kiln::tune

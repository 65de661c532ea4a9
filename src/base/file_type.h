// What a path that is not a regular file is, for error messages ("a FIFO"):
// the kernel cache and the tuning database refuse such paths by name.
#pragma once

#include <sys/stat.h>

#include <string>

namespace kiln::base {

inline std::string file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

}  // namespace kiln::base

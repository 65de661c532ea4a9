#include "output_files.h"

#include "src/base/check.h"

#include <kiln/error.h>

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

namespace kiln::tools {

std::string file_stem_for(const std::string& name) {
  std::string stem = name.substr(0, kMaxFileStemBytes);
  for (char& c : stem)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  if (stem.empty() || stem[0] == '.') stem = "_" + stem.substr(0, kMaxFileStemBytes - 1);
  return stem;
}

std::vector<std::string> distinct_file_names(const std::vector<std::string>& names, const std::string& extension) {
  std::set<std::string> taken;
  std::vector<std::string> files;
  for (const std::string& name : names) {
    const std::string stem = file_stem_for(name);
    std::string file = stem + extension;
    for (int k = 2; taken.count(file); ++k) file = stem + "_" + std::to_string(k) + extension;
    taken.insert(file);
    files.push_back(file);
  }
  return files;
}

void prepare_output_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  KILN_CHECK(!dir.empty(), ErrorKind::InvalidArgument, "the output folder is an empty path");
  std::error_code ec;
  const bool is_folder = fs::is_directory(dir, ec);
  if (!is_folder) {
    KILN_CHECK(!fs::exists(dir, ec), ErrorKind::Io,
               "cannot use '" + dir + "' as the output folder: something that is not a folder is in its place");
    fs::create_directories(dir, ec);
    KILN_CHECK(!ec, ErrorKind::Io, "cannot create the output folder '" + dir + "': " + ec.message());
  }
  // Permissions, read-only file systems and quotas show only when writing:
  // create (and remove) an empty file now, before any work is done.
  const fs::path probe = fs::path(dir) / (".kiln-write-test-" + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  KILN_CHECK(fd >= 0, ErrorKind::Io, "cannot write in the output folder '" + dir + "': " + std::strerror(errno));
  ::close(fd);
  fs::remove(probe, ec);
}

}  // namespace kiln::tools

#include "temp_dir.h"

#include "src/base/check.h"

#include <kiln/error.h>

#include <stdlib.h>  // mkdtemp (POSIX)

#include <cerrno>
#include <cstring>
#include <vector>

namespace kiln::tools::bench {

TempDir::TempDir(const std::string& prefix) {
  std::error_code ec;
  const std::filesystem::path base = std::filesystem::temp_directory_path(ec);
  KILN_CHECK(!ec, ErrorKind::Io, "no temporary folder: " + ec.message());
  const std::string pattern = (base / (prefix + "-XXXXXX")).string();
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  KILN_CHECK(mkdtemp(name.data()) != nullptr, ErrorKind::Io,
             "cannot create a temporary folder like '" + pattern + "': " + std::strerror(errno));
  path_ = name.data();
}

TempDir::~TempDir() {
  // Best effort: a destructor must not throw, and a leftover folder in /tmp is harmless.
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace kiln::tools::bench

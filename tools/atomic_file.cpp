#include "atomic_file.h"

#include <kiln/error.h>

#include <unistd.h>

#include <fstream>

namespace kiln::tools {

void write_file_atomically(const std::filesystem::path& path, std::string_view content) {
  // The process id keeps two concurrent runs from sharing a temporary name.
  std::filesystem::path temp = path;
  temp += ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    KILN_CHECK(out.good(), ErrorKind::Io, "cannot write '" + temp.string() + "'");
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.close();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(temp, ignored);
      throw_error(ErrorKind::Io, "cannot write '" + temp.string() + "' (disk full?)");
    }
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    throw_error(ErrorKind::Io, "cannot rename '" + temp.string() + "' to '" + path.string() + "': " + ec.message());
  }
}

}  // namespace kiln::tools

#include "graph/atomic_write.h"

#include <kiln/error.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace kiln::graph {

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
  const std::string temp = path + ".tmp-" + std::to_string(::getpid());
  const auto fail = [&](const std::string& message) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    throw_error(ErrorKind::Io, message);
  };
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    KILN_CHECK(out.good(), ErrorKind::Io, "cannot write '" + temp + "'");
    write(out);
    out.close();
    if (!out) fail("cannot write '" + temp + "' (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) fail("cannot rename '" + temp + "' to '" + path + "': " + ec.message());
}

}  // namespace kiln::graph

// A fresh, empty temporary folder, removed with everything in it when the
// object goes away.
#pragma once

#include <filesystem>
#include <string>

namespace kiln::tools::bench {

class TempDir {
 public:
  // Creates <system temp>/<prefix>-XXXXXX. Throws Error(Io) on failure.
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace kiln::tools::bench

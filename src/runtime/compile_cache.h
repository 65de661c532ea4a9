// The on-disk cache of compiled kernels, so a second process starts warm.
//
// Entries are content-addressed: the key hashes the kernel source, its
// language, the target fingerprint, the compiler version and the cache schema
// version. Files are written to a temporary name and renamed, so a crash never
// leaves a half-written entry; a corrupt entry (bad magic, size or checksum) is
// reported, removed and treated as a miss.
#pragma once

#include "backends/backend.h"

#include <filesystem>
#include <optional>
#include <string>

namespace kiln::runtime {

class CompileCache {
 public:
  // `dir` "" resolves $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else
  // $HOME/.cache/kiln; "off" disables the cache.
  explicit CompileCache(const std::string& dir);

  bool enabled() const { return !dir_.empty(); }
  const std::filesystem::path& directory() const { return dir_; }

  static std::string key(const backend::KernelSource& source, const backend::TargetDesc& target,
                         const std::string& compiler_version);

  std::optional<backend::KernelBinary> load(const std::string& key) const;
  // Best effort: a full disk or read-only cache directory is logged, not fatal.
  void store(const std::string& key, const backend::KernelBinary& binary) const;

 private:
  std::filesystem::path path_for(const std::string& key) const;
  std::filesystem::path dir_;
};

// Resolves the cache directory as CompileCache does (for `kiln devices`, docs).
std::string default_cache_dir();

}  // namespace kiln::runtime

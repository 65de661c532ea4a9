// The on-disk cache of compiled kernels, so a second process starts warm.
//
// Entries are content-addressed: the key is the full text of everything the
// binary depends on (the cache schema version, the kernel's language, name and
// source, the target fingerprint, the compiler version); a file is named by
// its digest and stores the whole key (src/cache/cache_entry.h), so an
// entry is used only for the key it was written for. Anything unusable at an
// entry's path (corrupt, another key's entry, not a regular file, too large)
// is reported, removed where possible and treated as a miss.
#pragma once

#include "backends/backend.h"

#include <filesystem>
#include <optional>
#include <string>

namespace kiln::cache {

struct CacheKey {
  std::string text;    // everything the entry depends on, stored in the entry
  std::string digest;  // XXH3-128 of `text` in hex: the file name
};

class CompileCache {
 public:
  // `dir` "" resolves $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else
  // $HOME/.cache/kiln; "off" disables the cache.
  explicit CompileCache(const std::string& dir);

  bool enabled() const { return !dir_.empty(); }
  const std::filesystem::path& directory() const { return dir_; }

  static CacheKey key(const backend::KernelSource& source, const backend::TargetDesc& target,
                      const std::string& compiler_version);
  // Where the entry for `key` lives (for messages and tests).
  std::filesystem::path path_for(const CacheKey& key) const;

  std::optional<backend::KernelBinary> load(const CacheKey& key) const;
  // Best effort: a full disk or read-only cache directory is logged, not fatal.
  void store(const CacheKey& key, const backend::KernelBinary& binary) const;
  // Removes the entry for `key` (one the device could not load).
  void discard(const CacheKey& key) const;

 private:
  std::filesystem::path dir_;
};

// Resolves the cache directory as CompileCache does (for `kiln devices`, docs).
std::string default_cache_dir();

}  // namespace kiln::cache

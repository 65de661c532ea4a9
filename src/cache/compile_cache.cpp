#include "src/cache/compile_cache.h"

#include "src/base/check.h"
#include "src/cache/cache_maintenance.h"

#include "src/base/cache_key.h"
#include "src/base/log.h"
#include "src/cache/cache_entry.h"

#include <kiln/error.h>

#include <xxhash.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace kiln::cache {
namespace {

// Bump when anything that changes generated code without changing its source
// text changes.
constexpr std::uint32_t kSchemaVersion = 2;
constexpr char kEntryKind[] = "kernel";
// No compiled kernel comes near this; a larger file is not a kernel.
constexpr std::uint64_t kMaxEntryBytes = 256ull << 20;
constexpr std::size_t kMaxFormatBytes = 64;



// Payload: format length (one byte) | format | binary.
std::string encode(const backend::KernelBinary& binary) {
  std::string payload(1, static_cast<char>(binary.format.size()));
  payload += binary.format;
  payload.append(reinterpret_cast<const char*>(binary.data.data()), binary.data.size());
  return payload;
}

std::optional<backend::KernelBinary> decode(const std::string& payload) {
  if (payload.empty()) return std::nullopt;
  const std::size_t format_size = static_cast<unsigned char>(payload[0]);
  if (format_size > kMaxFormatBytes || payload.size() < 1 + format_size) return std::nullopt;
  backend::KernelBinary binary;
  binary.format = payload.substr(1, format_size);
  binary.data.resize(payload.size() - 1 - format_size);
  std::memcpy(binary.data.data(), payload.data() + 1 + format_size, binary.data.size());
  return binary;
}

}  // namespace

std::string default_cache_dir() {
  if (const char* env = std::getenv("KILN_CACHE_DIR"); env && *env) return env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/kiln";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/kiln";
  return "off";
}

CompileCache::CompileCache(const std::string& dir) {
  std::string resolved = dir.empty() ? default_cache_dir() : dir;
  if (resolved == "off") return;
  dir_ = std::filesystem::path(resolved) / "kernels";
}

CacheKey CompileCache::key(const backend::KernelSource& source, const backend::TargetDesc& target,
                           const std::string& compiler_version) {
  CacheKey key;
  base::append_key_field(key.text, std::to_string(kSchemaVersion));
  base::append_key_field(key.text, source.language);
  base::append_key_field(key.text, source.name);
  base::append_key_field(key.text, target.fingerprint());
  base::append_key_field(key.text, compiler_version);
  base::append_key_field(key.text, source.text);
  key.digest = base::hex_digest(XXH3_128bits(key.text.data(), key.text.size()));
  return key;
}

std::filesystem::path CompileCache::path_for(const CacheKey& key) const {
  return dir_ / key.digest.substr(0, 2) / (key.digest + ".bin");
}

std::optional<backend::KernelBinary> CompileCache::load(const CacheKey& key) const {
  if (!enabled()) return std::nullopt;
  const auto path = path_for(key);
  CacheEntryRead entry = read_cache_entry(path, kEntryKind, key.text, kMaxEntryBytes);
  std::optional<backend::KernelBinary> binary;
  if (entry.payload) {
    binary = decode(*entry.payload);
    if (!binary) entry.problem = "its kernel binary is malformed";
  }
  if (!entry.problem.empty()) {
    std::string message = "kernel cache entry " + path.string() + " is unusable (" + entry.problem + ")";
    if (std::string why = discard_cache_entry(path); !why.empty())
      message += "; it cannot be removed (" + why + "), so the kernel is compiled without the cache";
    else
      message += "; removed it, compiling again";
    base::log(base::LogLevel::warning, message);
  }
  if (binary) mark_used(path);  // least recently used entries are evicted first
  return binary;
}

void CompileCache::store(const CacheKey& key, const backend::KernelBinary& binary) const {
  if (!enabled()) return;
  KILN_ASSERT(binary.format.size() <= kMaxFormatBytes);
  if (std::string why = write_cache_entry(path_for(key), kEntryKind, key.text, encode(binary)); !why.empty())
    base::log_once(base::LogLevel::warning, "kernel cache store " + dir_.string(),
                   "cannot store a kernel in the cache: " + why + " (kiln runs on without storing; later failures here are logged at debug level)");
  after_store(dir_.parent_path());
}

void CompileCache::discard(const CacheKey& key) const {
  if (!enabled()) return;
  if (std::string why = discard_cache_entry(path_for(key)); !why.empty())
    base::log(base::LogLevel::warning, "cannot remove kernel cache entry " + path_for(key).string() + ": " + why);
}

}  // namespace kiln::cache

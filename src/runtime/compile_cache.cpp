#include "src/runtime/compile_cache.h"

#include "src/runtime/log.h"

#include <xxhash.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <system_error>
#include <vector>

namespace kiln::runtime {
namespace {

// Bump when the entry layout or anything that changes generated code without
// changing its source text changes.
constexpr std::uint32_t kSchemaVersion = 1;
constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'B', 'I', 'N', '1'};
// No compiled kernel comes near this; a larger size field means corruption.
constexpr std::uint64_t kMaxEntryBytes = 256ull << 20;

std::string hex128(XXH128_hash_t h) {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return buf;
}

void append_field(std::string& out, const std::string& field) {
  // Length-prefixed so that no two different field lists hash the same text.
  out += std::to_string(field.size());
  out += ':';
  out += field;
}

template <class T> void put(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
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

std::string CompileCache::key(const backend::KernelSource& source, const backend::TargetDesc& target,
                              const std::string& compiler_version) {
  std::string text;
  append_field(text, std::to_string(kSchemaVersion));
  append_field(text, source.language);
  append_field(text, source.name);
  append_field(text, target.fingerprint());
  append_field(text, compiler_version);
  append_field(text, source.text);
  return hex128(XXH3_128bits(text.data(), text.size()));
}

std::filesystem::path CompileCache::path_for(const std::string& key) const {
  return dir_ / key.substr(0, 2) / (key + ".bin");
}

std::optional<backend::KernelBinary> CompileCache::load(const std::string& key) const {
  if (!enabled()) return std::nullopt;
  const auto path = path_for(key);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string blob = ss.str();

  auto corrupt = [&](const std::string& why) -> std::optional<backend::KernelBinary> {
    log(LogLevel::warning, "kernel cache entry " + path.string() + " is corrupt (" + why +
                               "); removing it and compiling again");
    std::error_code ec;
    std::filesystem::remove(path, ec);
    return std::nullopt;
  };

  // Layout: magic | u32 schema | u32 format length | format | u64 data length | data | u64 xxh64(all before)
  std::size_t pos = 0;
  auto take = [&](void* dst, std::size_t n) {
    if (blob.size() - pos < n) return false;
    std::memcpy(dst, blob.data() + pos, n);
    pos += n;
    return true;
  };
  char magic[8];
  std::uint32_t schema = 0, format_len = 0;
  if (!take(magic, sizeof magic) || std::memcmp(magic, kMagic, sizeof magic) != 0) return corrupt("bad magic");
  if (!take(&schema, sizeof schema) || schema != kSchemaVersion) return corrupt("schema version mismatch");
  if (!take(&format_len, sizeof format_len) || format_len > 64) return corrupt("bad format field");
  std::string format(format_len, '\0');
  if (!take(format.data(), format_len)) return corrupt("truncated");
  std::uint64_t data_len = 0;
  if (!take(&data_len, sizeof data_len) || data_len > kMaxEntryBytes) return corrupt("bad size field");
  if (blob.size() - pos < data_len + sizeof(std::uint64_t)) return corrupt("truncated");
  backend::KernelBinary binary;
  binary.format = format;
  binary.data.resize(data_len);
  take(binary.data.data(), data_len);
  std::uint64_t checksum = 0;
  const std::uint64_t expected = XXH64(blob.data(), pos, 0);
  take(&checksum, sizeof checksum);
  if (checksum != expected) return corrupt("checksum mismatch");
  if (pos != blob.size()) return corrupt("trailing bytes");
  return binary;
}

void CompileCache::store(const std::string& key, const backend::KernelBinary& binary) const {
  if (!enabled()) return;
  std::string blob(kMagic, sizeof kMagic);
  put(blob, kSchemaVersion);
  put(blob, static_cast<std::uint32_t>(binary.format.size()));
  blob += binary.format;
  put(blob, static_cast<std::uint64_t>(binary.data.size()));
  blob.append(reinterpret_cast<const char*>(binary.data.data()), binary.data.size());
  put(blob, static_cast<std::uint64_t>(XXH64(blob.data(), blob.size(), 0)));

  const auto path = path_for(key);
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) {
    log(LogLevel::warning, "cannot create kernel cache directory " + path.parent_path().string() + ": " + ec.message());
    return;
  }
  // A unique temporary name per writer, renamed into place: readers see the
  // old state or the whole new entry, never a partial one.
  std::random_device rd;
  const auto tmp = path.parent_path() / (key + ".tmp." + std::to_string(rd()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(blob.data(), static_cast<std::streamsize>(blob.size()));
    out.flush();
    if (!out) {
      log(LogLevel::warning, "cannot write kernel cache entry " + tmp.string());
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    log(LogLevel::warning, "cannot rename kernel cache entry into " + path.string() + ": " + ec.message());
    std::filesystem::remove(tmp, ec);
  }
}

}  // namespace kiln::runtime

#include "src/cache/cache_maintenance.h"

#include "src/base/check.h"
#include "src/base/log.h"

#include <kiln/error.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <vector>

namespace kiln::cache {

namespace fs = std::filesystem;

namespace {

enum class EntryKind { kernel, plan, weights, temporary };

struct Entry {
  fs::path path;
  std::uint64_t bytes = 0;
  fs::file_time_type used;
  EntryKind kind;
};

// Writers name their temporary files "<target>.tmp-<pid>..." (cache_entry,
// container): one left behind is a crashed writer's.
bool is_temporary(const fs::path& path) { return path.filename().string().find(".tmp") != std::string::npos; }

void collect(const fs::path& dir, EntryKind kind, const std::string& extension, bool recursive,
             std::vector<Entry>& out) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  auto add = [&](const fs::directory_entry& e) {
    std::error_code ignored;
    if (!e.is_regular_file(ignored)) return;
    const bool temporary = is_temporary(e.path());
    if (!temporary && e.path().extension() != extension) return;
    const auto bytes = e.file_size(ignored);
    const auto used = e.last_write_time(ignored);
    out.push_back({e.path(), static_cast<std::uint64_t>(bytes), used, temporary ? EntryKind::temporary : kind});
  };
  if (recursive) {
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) add(*it);
  } else {
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) add(*it);
  }
}

std::vector<Entry> entries_of(const fs::path& root) {
  std::vector<Entry> entries;
  collect(root / "kernels", EntryKind::kernel, ".bin", true, entries);
  collect(root / "plans", EntryKind::plan, ".plan", false, entries);
  collect(root / "plans" / "weights", EntryKind::weights, ".weights", false, entries);
  return entries;
}

}  // namespace

std::uint64_t parse_size(const std::string& text, const std::string& what) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  const std::string unit = text.substr(digits);
  const std::uint64_t scale = unit.empty() || unit == "B" ? 1
                              : unit == "K" || unit == "KB" ? std::uint64_t{1} << 10
                              : unit == "M" || unit == "MB" ? std::uint64_t{1} << 20
                              : unit == "G" || unit == "GB" ? std::uint64_t{1} << 30
                                                            : 0;
  KILN_CHECK(digits > 0 && digits <= 12 && scale != 0, ErrorKind::InvalidArgument,
             what + " '" + text + "' is not a size (bytes, or a number with K, M or G)");
  return std::stoull(text.substr(0, digits)) * scale;
}

std::uint64_t cache_limit() {
  const char* text = std::getenv(kCacheLimitVariable);
  if (text == nullptr || *text == '\0') return kDefaultCacheLimit;
  return parse_size(text, kCacheLimitVariable);
}

CacheSurvey survey_cache(const fs::path& root) {
  CacheSurvey s;
  for (const Entry& e : entries_of(root)) {
    switch (e.kind) {
      case EntryKind::kernel: s.kernel_bytes += e.bytes, ++s.kernels; break;
      case EntryKind::plan: s.plan_bytes += e.bytes, ++s.plans; break;
      case EntryKind::weights: s.weight_bytes += e.bytes, ++s.weights; break;
      case EntryKind::temporary: s.other_bytes += e.bytes; break;
    }
  }
  std::error_code ec;
  for (const char* other : {"pipelines", "tuning.db"}) {
    const fs::path path = root / other;
    if (fs::is_regular_file(path, ec)) s.other_bytes += fs::file_size(path, ec);
    else if (fs::is_directory(path, ec))
      for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec))
        if (it->is_regular_file(ec)) s.other_bytes += it->file_size(ec);
  }
  return s;
}

std::uint64_t prune_cache(const fs::path& root, std::uint64_t limit) {
  std::vector<Entry> entries = entries_of(root);
  const auto stale = fs::file_time_type::clock::now() - std::chrono::minutes(1);
  std::uint64_t total = 0, removed = 0;
  std::error_code ec;
  for (const Entry& e : entries) {
    if (e.kind == EntryKind::temporary && e.used < stale && fs::remove(e.path, ec)) removed += e.bytes;
    else if (e.kind != EntryKind::temporary) total += e.bytes;
  }
  if (total <= limit) return removed;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.used < b.used; });
  for (const Entry& e : entries) {
    if (total <= limit) break;
    if (e.kind == EntryKind::temporary) continue;
    if (fs::remove(e.path, ec)) {
      total -= e.bytes;
      removed += e.bytes;
    }
  }
  return removed;
}

void clear_cache(const fs::path& root) {
  std::error_code ec;
  for (const char* dir : {"kernels", "plans", "pipelines"}) {
    fs::remove_all(root / dir, ec);
    KILN_CHECK(!ec, ErrorKind::Io, "cannot remove '" + (root / dir).string() + "': " + ec.message());
  }
}

void mark_used(const fs::path& entry) {
  std::error_code ignored;  // a read-only cache still works, unordered
  fs::last_write_time(entry, fs::file_time_type::clock::now(), ignored);
}

void after_store(const fs::path& root) {
  static std::atomic<std::uint64_t> stores{0};
  if (stores.fetch_add(1) % 64 != 0) return;
  try {
    const std::uint64_t limit = cache_limit();
    if (const std::uint64_t removed = prune_cache(root, limit); removed > 0)
      base::log(base::LogLevel::info, "cache: removed " + std::to_string(removed >> 20) + " MiB of least recently used entries from '" +
                              root.string() + "' (limit " + std::to_string(limit >> 20) + " MiB, " +
                              kCacheLimitVariable + ")");
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Internal) throw;
    base::log(base::LogLevel::warning, std::string("cache: not pruned: ") + e.what());
  }
}

}  // namespace kiln::cache

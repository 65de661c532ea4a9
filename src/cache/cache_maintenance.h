// Keeping the cache folder bounded: what it holds, and least-recently-used
// eviction of compiled kernels (kernels/), cached plans (plans/*.plan) and
// their shared weights (plans/weights/*.weights) past a size limit. An
// entry's modification time is its last use: readers mark what they use.
// The drivers' pipeline caches (pipelines/) and the tuning database
// (tuning.db) are never evicted; clear_cache removes every cache but the
// tuning database, which holds measurements rather than derived files.
//
// Evicting is safe while other processes use the folder: every entry is
// replaced only by rename and read whole or mapped, and a reader that finds
// an entry gone (or a plan whose weights are gone) builds it again.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace kiln::cache {

struct CacheSurvey {
  std::uint64_t kernel_bytes = 0, plan_bytes = 0, weight_bytes = 0, other_bytes = 0;
  std::int64_t kernels = 0, plans = 0, weights = 0;
};

// The environment variable with the folder's limit ("2G", "500M", "64K" or
// bytes); unset: kDefaultCacheLimit.
inline constexpr const char* kCacheLimitVariable = "KILN_CACHE_LIMIT";
inline constexpr std::uint64_t kDefaultCacheLimit = std::uint64_t{2} << 30;  // 2 GiB

// KILN_CACHE_LIMIT, else the default. Throws InvalidArgument for a value
// that is not a size.
std::uint64_t cache_limit();
// "2G" -> 2 GiB; throws InvalidArgument naming `what` for anything else.
std::uint64_t parse_size(const std::string& text, const std::string& what);

CacheSurvey survey_cache(const std::filesystem::path& root);
// Removes the least recently used kernels, plans and weights until they
// hold at most `limit` bytes together, and temporary files writers left
// behind over a minute ago; returns the bytes removed.
std::uint64_t prune_cache(const std::filesystem::path& root, std::uint64_t limit);
// Removes kernels/, plans/ and pipelines/ (not tuning.db).
void clear_cache(const std::filesystem::path& root);
// Marks an entry used now (its modification time), for eviction's order.
void mark_used(const std::filesystem::path& entry);
// After a cache store: prunes `root` to cache_limit() on this process's
// first store and every 64th after it, so a store costs no directory scan.
void after_store(const std::filesystem::path& root);

}  // namespace kiln::cache

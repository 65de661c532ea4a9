// kiln::cache_info, prune_cache and clear_cache (include/kiln/kiln.h): the
// public face of src/cache/cache_maintenance.h.
#include <kiln/kiln.h>

#include "src/cache/cache_maintenance.h"
#include "src/cache/compile_cache.h"

namespace kiln {

namespace {

// The folder `cache_dir` names, or "" when the cache is off.
std::string resolved(const std::string& cache_dir) {
  const std::string dir = cache_dir.empty() ? cache::default_cache_dir() : cache_dir;
  return dir == "off" ? std::string() : dir;
}

}  // namespace

CacheInfo cache_info(const std::string& cache_dir) {
  CacheInfo info;
  info.path = resolved(cache_dir);
  info.limit_bytes = cache::cache_limit();
  if (info.path.empty()) return info;
  const cache::CacheSurvey s = cache::survey_cache(info.path);
  info.kernel_bytes = s.kernel_bytes;
  info.plan_bytes = s.plan_bytes;
  info.weight_bytes = s.weight_bytes;
  info.other_bytes = s.other_bytes;
  info.kernels = s.kernels;
  info.plans = s.plans;
  info.weight_files = s.weights;
  return info;
}

std::uint64_t prune_cache(const std::string& cache_dir, std::optional<std::uint64_t> limit_bytes) {
  const std::string dir = resolved(cache_dir);
  if (dir.empty()) return 0;
  return cache::prune_cache(dir, limit_bytes ? *limit_bytes : cache::cache_limit());
}

void clear_cache(const std::string& cache_dir) {
  const std::string dir = resolved(cache_dir);
  if (!dir.empty()) cache::clear_cache(dir);
}

}  // namespace kiln

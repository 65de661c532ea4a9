// `kiln cache show|prune|clear`: the cache folder's compiled kernels, cached
// plans and their shared weights, kept within a size limit.
#include "commands.h"
#include "src/base/check.h"

#include <kiln/kiln.h>

#include <cctype>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

namespace kiln::tools {

namespace {

double mib(std::uint64_t bytes) { return static_cast<double>(bytes) / 1048576.0; }

// "2G", "500M", "64K" or bytes.
std::uint64_t parse_limit(const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  const std::string unit = text.substr(digits);
  const std::uint64_t scale = unit.empty() ? 1 : unit == "K" ? 1ull << 10 : unit == "M" ? 1ull << 20 : unit == "G" ? 1ull << 30 : 0;
  KILN_CHECK(digits > 0 && digits <= 12 && scale != 0, ErrorKind::InvalidArgument,
             "--limit '" + text + "' is not a size (bytes, or a number with K, M or G)");
  return std::stoull(text.substr(0, digits)) * scale;
}

void show(const std::string& dir) {
  const CacheInfo info = cache_info(dir);
  if (info.path.empty()) {
    std::printf("the cache is off\n");
    return;
  }
  std::printf("cache folder: %s\n", info.path.c_str());
  std::printf("  kernels   %8lld  %9.1f MiB\n", static_cast<long long>(info.kernels), mib(info.kernel_bytes));
  std::printf("  plans     %8lld  %9.1f MiB\n", static_cast<long long>(info.plans), mib(info.plan_bytes));
  std::printf("  weights   %8lld  %9.1f MiB (a file per weight, shared by the plans that hold it)\n", static_cast<long long>(info.weight_files),
              mib(info.weight_bytes));
  std::printf("  other               %9.1f MiB (pipeline caches, tuning database)\n", mib(info.other_bytes));
  std::printf("limit: %.1f MiB for kernels, plans and weights together (KILN_CACHE_LIMIT); the least recently used go "
              "first\n",
              mib(info.limit_bytes));
}

}  // namespace

void add_cache_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("cache", "the cache folder: compiled kernels, cached plans and their weights");
  cmd->require_subcommand(1);
  auto dir = std::make_shared<std::string>();
  auto limit = std::make_shared<std::string>();
  const char* dir_help = "the cache folder (default $KILN_CACHE_DIR, else ~/.cache/kiln)";

  auto* show_cmd = cmd->add_subcommand("show", "what the cache folder holds, by kind, and its limit");
  show_cmd->add_option("--cache-dir", *dir, dir_help);
  show_cmd->callback([dir] { show(*dir); });

  auto* prune_cmd = cmd->add_subcommand("prune", "remove the least recently used kernels, plans and weights until they "
                                                 "fit the limit");
  prune_cmd->add_option("--cache-dir", *dir, dir_help);
  prune_cmd->add_option("--limit", *limit, "the size to keep (2G, 500M, ...; default $KILN_CACHE_LIMIT, else 2G)");
  prune_cmd->callback([dir, limit] {
    const std::uint64_t removed =
        prune_cache(*dir, limit->empty() ? std::nullopt : std::optional<std::uint64_t>(parse_limit(*limit)));
    std::printf("kiln cache prune: removed %.1f MiB\n", mib(removed));
    show(*dir);
  });

  auto* clear_cmd = cmd->add_subcommand("clear", "remove every cached kernel, plan and pipeline cache (the tuning "
                                                 "database stays)");
  clear_cmd->add_option("--cache-dir", *dir, dir_help);
  clear_cmd->callback([dir] {
    clear_cache(*dir);
    std::printf("kiln cache clear: done\n");
    show(*dir);
  });
}

}  // namespace kiln::tools

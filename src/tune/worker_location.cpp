#include "src/tune/worker_location.h"

#include "src/base/log.h"
#include "src/tune/tune_build_config.h"

#include <dlfcn.h>

#include <filesystem>
#include <optional>
#include <string_view>

namespace kiln::tune {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kWorkerName = "kiln-tune-worker";

std::optional<fs::path> running_executable() {
  std::error_code error;
  fs::path self = fs::read_symlink("/proc/self/exe", error);
  if (error) return std::nullopt;
  return self;
}

// The file this code was loaded from: libkiln.so for a shared kiln; for a
// static one the program itself, which (3) covers.
std::optional<fs::path> kiln_object() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&worker_search_path), &info) == 0 || info.dli_fname == nullptr)
    return std::nullopt;
  const fs::path object(info.dli_fname);
  if (!object.is_absolute()) return std::nullopt;  // the main program, named as it was started
  std::error_code error;
  const std::optional<fs::path> self = running_executable();
  if (self && fs::equivalent(object, *self, error)) return std::nullopt;
  return object;
}

}  // namespace

std::vector<std::string> helper_search_path(const std::string& file_name) {
  std::vector<std::string> paths;
  const std::optional<fs::path> self = running_executable();
  if (self) paths.push_back((self->parent_path() / file_name).string());
  const std::string_view from_libdir = KILN_TUNE_WORKER_FROM_LIBDIR;
  if (const std::optional<fs::path> object = kiln_object(); object && !from_libdir.empty())
    paths.push_back((object->parent_path() / from_libdir / file_name).lexically_normal().string());
  const std::string_view from_bindir = KILN_TUNE_WORKER_FROM_BINDIR;
  if (self && !from_bindir.empty())
    paths.push_back((self->parent_path() / from_bindir / file_name).lexically_normal().string());
  paths.push_back((fs::path(KILN_TUNE_WORKER_BUILD).parent_path() / file_name).string());
  paths.push_back((fs::path(KILN_TUNE_WORKER_INSTALLED).parent_path() / file_name).string());
  return paths;
}

std::vector<std::string> worker_search_path() { return helper_search_path(std::string(kWorkerName)); }

std::string find_helper(const std::string& file_name) {
  for (const std::string& path : helper_search_path(file_name)) {
    std::error_code error;
    if (fs::is_regular_file(path, error)) return path;
  }
  return "";
}

std::string find_worker() {
  for (const std::string& path : worker_search_path()) {
    std::error_code error;
    if (fs::is_regular_file(path, error)) {
      base::log(base::LogLevel::debug, "tuning worker: " + path);
      return path;
    }
  }
  base::log(base::LogLevel::debug, std::string("tuning worker: none found; trying ") + KILN_TUNE_WORKER_BUILD);
  return KILN_TUNE_WORKER_BUILD;
}

}  // namespace kiln::tune

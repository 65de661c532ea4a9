// kiln on a full disk (issue 39): the built `kiln` run with a folder that
// fails every write with ENOSPC (full_disk.cpp, preloaded). Caches there:
// kiln reports it once and runs on without them. Outputs there (a .kiln
// file, .npy outputs, a tuning export): a clear error naming the file. Either
// way nothing damaged or half-written is left behind.
#define BOOST_TEST_MODULE full_disk
#include <boost/test/unit_test.hpp>

#include "cli_runner.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using cli_test::has;

namespace {

struct FullDisk {
  fs::path dir = fs::temp_directory_path() / ("kiln_full_disk_" + std::to_string(::getpid()));
  FullDisk() {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~FullDisk() { fs::remove_all(dir); }

  // `kiln <args>` with `dir` full and the cache in `cache` (default: there too).
  cli_test::Result kiln(const std::string& args, const fs::path& cache = {}) const {
    const char* lib = std::getenv("KILN_TEST_FULL_DISK_LIB");
    BOOST_REQUIRE_MESSAGE(lib != nullptr, "KILN_TEST_FULL_DISK_LIB is not set (run through meson test)");
    const fs::path cache_dir = cache.empty() ? dir / "cache" : cache;
    return cli_test::run_kiln(args, "",
                              "LD_PRELOAD='" + std::string(lib) + "' KILN_TEST_FULL_DISK='" + dir.string() +
                                  "' KILN_CACHE_DIR='" + cache_dir.string() + "'");
  }

  // Files under `dir` with any content, and any temporary file.
  std::vector<std::string> leftovers() const {
    std::vector<std::string> found;
    for (const auto& e : fs::recursive_directory_iterator(dir))
      if (e.is_regular_file() && (e.file_size() > 0 || e.path().filename().string().find(".tmp") != std::string::npos))
        found.push_back(e.path().string());
    return found;
  }
};

std::string listing(const std::vector<std::string>& files) {
  std::string text;
  for (const std::string& f : files) text += (text.empty() ? "" : ", ") + f;
  return text;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_full_cache_folder_is_reported_once_and_kiln_runs_on_without_it) {
  FullDisk disk;
  const auto r = disk.kiln("run --model resnet18 --image-size 32 --iters 1");
  BOOST_TEST(r.exit_code == 0, r.output);
  BOOST_TEST(count(r.output, "cannot store a kernel in the cache") == 1u, r.output);
  BOOST_TEST(has(r, "No space left on device"));
  BOOST_TEST(count(r.output, "plan cache: not stored") <= 1u);
  BOOST_TEST(disk.leftovers().empty(), "left: " << listing(disk.leftovers()));
}

BOOST_AUTO_TEST_CASE(outputs_on_a_full_disk_are_clear_errors_that_leave_no_file) {
  FullDisk disk;
  const fs::path cache = disk.dir.parent_path() / ("kiln_full_disk_cache_" + std::to_string(::getpid()));
  const auto compiled = disk.kiln("compile --model resnet18 --image-size 32 -o '" + (disk.dir / "model.kiln").string() + "'", cache);
  BOOST_TEST(compiled.exit_code == 2, compiled.output);
  BOOST_TEST(has(compiled, (disk.dir / "model.kiln").string()));
  BOOST_TEST(has(compiled, "No space left on device"));

  const auto outputs = disk.kiln("run --model resnet18 --image-size 32 --iters 0 --output-dir '" + (disk.dir / "out").string() + "'", cache);
  BOOST_TEST(outputs.exit_code == 2, outputs.output);
  BOOST_TEST(has(outputs, "No space left on device"));

  const auto tuned = disk.kiln("tune --model resnet18 --image-size 32 --budget 2s --db '" + (disk.dir / "tuning.db").string() + "'", cache);
  BOOST_TEST(tuned.exit_code == 2, tuned.output);
  BOOST_TEST(has(tuned, (disk.dir / "tuning.db").string()));
  BOOST_TEST(!has(tuned, "internal error"));

  BOOST_TEST(disk.leftovers().empty(), "left: " << listing(disk.leftovers()));
  fs::remove_all(cache);
}

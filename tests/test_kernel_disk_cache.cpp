#define BOOST_TEST_MODULE kernel_disk_cache
#include <boost/test/unit_test.hpp>

// On-disk cache entries (src/cache/cache_entry.h) and the kernel cache on
// top of them, against what a damaged or hostile cache directory holds: an
// entry in another entry's place, a forged entry the driver refuses, a FIFO,
// a link to a device file, a directory, an oversized file, corrupt bytes.
// Each must cost at most a recompile and a warning, never a wrong kernel, a
// hang or an unbounded read. Kernels run on Vulkan (validation fatal).

#include "backends/vulkan/vulkan_backend.h"
#include "src/base/log.h"
#include "src/cache/cache_entry.h"
#include "src/cache/compile_cache.h"
#include "src/kernel/ir.h"
#include "src/render/cstyle.h"
#include "src/runtime/kernel_cache.h"

#include <kiln/error.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <sys/stat.h>

namespace fs = std::filesystem;
namespace kb = kiln::backend;
namespace kir = kiln::kir;
namespace rt = kiln::runtime;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("kiln-test-" + name + "-" + std::to_string(std::random_device{}()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Collects the warnings logged while it lives.
class WarningLog {
 public:
  WarningLog() {
    previous_ = kiln::base::set_log_sink([this](kiln::base::LogLevel level, const std::string& message) {
      if (level == kiln::base::LogLevel::warning) messages_.push_back(message);
    });
  }
  ~WarningLog() { kiln::base::set_log_sink(previous_); }
  const std::vector<std::string>& messages() const { return messages_; }
  int count_containing(const std::string& part) const {
    int n = 0;
    for (const std::string& m : messages_) n += contains(m, part) ? 1 : 0;
    return n;
  }

 private:
  kiln::base::LogSink previous_;
  std::vector<std::string> messages_;
};

constexpr std::uint64_t kLimit = 1 << 20;

}  // namespace

// ---- entries ------------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(entries)

BOOST_AUTO_TEST_CASE(an_entry_is_read_back_only_for_its_own_kind_and_key) {
  const fs::path dir = fresh_dir("entry");
  const fs::path path = dir / "ab" / "entry.bin";
  BOOST_TEST(kiln::cache::write_cache_entry(path, "kernel", "key one", "payload bytes") == "");

  const kiln::cache::CacheEntryRead hit = kiln::cache::read_cache_entry(path, "kernel", "key one", kLimit);
  BOOST_TEST(hit.problem == "");
  BOOST_TEST(hit.payload.value_or("") == "payload bytes");

  const kiln::cache::CacheEntryRead other_key = kiln::cache::read_cache_entry(path, "kernel", "key two", kLimit);
  BOOST_TEST(!other_key.payload.has_value());
  BOOST_TEST(contains(other_key.problem, "written for another key"), other_key.problem);

  const kiln::cache::CacheEntryRead other_kind = kiln::cache::read_cache_entry(path, "plan", "key one", kLimit);
  BOOST_TEST(!other_kind.payload.has_value());
  BOOST_TEST(contains(other_kind.problem, "'kernel' cache"), other_kind.problem);

  // Nothing at a path is a quiet miss; no temporary file is left behind.
  const kiln::cache::CacheEntryRead absent = kiln::cache::read_cache_entry(dir / "cd" / "none.bin", "kernel", "key one", kLimit);
  BOOST_TEST(!absent.payload.has_value());
  BOOST_TEST(absent.problem == "");
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) files += entry.is_regular_file() ? 1 : 0;
  BOOST_TEST(files == 1);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(every_flipped_byte_and_every_truncation_is_rejected) {
  const fs::path dir = fresh_dir("entry-bytes");
  const fs::path path = dir / "entry.bin";
  BOOST_TEST_REQUIRE(kiln::cache::write_cache_entry(path, "kernel", "the key", "the payload") == "");
  const std::string good = read_bytes(path);
  for (std::size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x41);
    write_bytes(path, bad);
    const kiln::cache::CacheEntryRead read = kiln::cache::read_cache_entry(path, "kernel", "the key", kLimit);
    BOOST_TEST(!read.payload.has_value(), "byte " << i << " flipped was accepted");
    BOOST_TEST(!read.problem.empty());
  }
  for (std::size_t size = 0; size < good.size(); ++size) {
    write_bytes(path, good.substr(0, size));
    BOOST_TEST(!kiln::cache::read_cache_entry(path, "kernel", "the key", kLimit).payload.has_value(), "size " << size);
  }
  write_bytes(path, good + "x");
  BOOST_TEST(contains(kiln::cache::read_cache_entry(path, "kernel", "the key", kLimit).problem, "trailing"));
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(only_regular_files_within_the_limit_are_read) {
  const fs::path dir = fresh_dir("entry-types");
  auto problem_at = [&](const fs::path& path) { return kiln::cache::read_cache_entry(path, "kernel", "k", kLimit).problem; };

  // A FIFO: opening it must not wait for a writer.
  const fs::path fifo = dir / "fifo.bin";
  BOOST_TEST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  BOOST_TEST(contains(problem_at(fifo), "FIFO"), problem_at(fifo));
  BOOST_TEST(kiln::cache::discard_cache_entry(fifo) == "");
  BOOST_TEST(!fs::exists(fs::symlink_status(fifo)));

  // A link to a device file that never ends, and a link to a valid entry: links are not followed.
  const fs::path zero = dir / "zero.bin";
  fs::create_symlink("/dev/zero", zero);
  BOOST_TEST(contains(problem_at(zero), "symbolic link"), problem_at(zero));
  const fs::path real = dir / "real.bin";
  BOOST_TEST_REQUIRE(kiln::cache::write_cache_entry(real, "kernel", "k", "p") == "");
  const fs::path link = dir / "link.bin";
  fs::create_symlink(real, link);
  BOOST_TEST(contains(problem_at(link), "symbolic link"));
  BOOST_TEST(kiln::cache::discard_cache_entry(zero) == "");
  BOOST_TEST(!fs::exists(fs::symlink_status(zero)));
  BOOST_TEST(fs::exists("/dev/zero"));

  // A directory in an entry's place: reported, never removed with its contents,
  // and a write there fails with a message instead of an exception.
  const fs::path directory = dir / "directory.bin";
  fs::create_directories(directory / "inside");
  BOOST_TEST(contains(problem_at(directory), "directory"), problem_at(directory));
  BOOST_TEST(kiln::cache::write_cache_entry(directory, "kernel", "k", "p") != "");
  BOOST_TEST(kiln::cache::discard_cache_entry(directory) != "");
  BOOST_TEST(fs::exists(directory / "inside"));

  // A file past the limit is not read at all (sparse: no disk is used).
  const fs::path huge = dir / "huge.bin";
  write_bytes(huge, "KILNCACH");
  fs::resize_file(huge, kLimit + 1);
  BOOST_TEST(contains(problem_at(huge), "more than this cache's limit"), problem_at(huge));
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()

// ---- the kernel cache on a Vulkan device -------------------------------------

namespace {

const kb::Backend& vulkan_backend() {
  static const std::unique_ptr<kb::Backend> backend = kb::create_vulkan_backend();
  return *backend;
}

std::shared_ptr<kb::Device> device() {
  static const std::shared_ptr<kb::Device> shared = [] {
    const auto reason = vulkan_backend().unavailable_reason();
    BOOST_TEST_REQUIRE(!reason.has_value(), "Vulkan is unavailable: " << reason.value_or(""));
    return vulkan_backend().create_device(0);
  }();
  return shared;
}

constexpr std::int64_t kCount = 256;

// y = x * factor.
kir::Kernel scale_kernel(double factor) {
  kir::Kernel kernel("scale");
  const kir::Buf x = kernel.add_buffer("x", kir::ScalarType::f32, kir::Access::read);
  const kir::Buf y = kernel.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
  kernel.global_size = kCount;
  kernel.workgroup_size = 64;
  const kir::Expr i = kir::global_index();
  kernel.body.push_back(kir::store(y, i, kir::load(x, i, kir::ScalarType::f32) * kir::f32(factor)));
  return kernel;
}

// Runs `kernel` from `cache` on 1, 2, 3, ... and returns y.
std::vector<float> run(rt::KernelCache& cache, const kir::Kernel& kernel) {
  kb::Device& dev = *device();
  const auto loaded = cache.get(kernel);
  std::vector<float> x(kCount);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i + 1);
  auto input = dev.allocate(kCount * sizeof(float));
  auto output = dev.allocate(kCount * sizeof(float));
  dev.upload(*input, 0, std::as_bytes(std::span(x)));
  auto list = dev.create_command_list();
  const kb::BufferBinding bindings[] = {{input.get(), 0, input->size()}, {output.get(), 0, output->size()}};
  list->dispatch(*loaded, kir::dispatch_grid(kernel, dev.target().max_workgroup_count[0]), bindings);
  list->finish();
  list->submit();
  std::vector<float> y(kCount);
  dev.download(*output, 0, std::as_writable_bytes(std::span(y)));
  return y;
}

std::vector<float> expected(double factor) {
  std::vector<float> y(kCount);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>((i + 1) * factor);
  return y;
}

// A kernel cache over `dir` as a new process would have it (nothing in memory).
rt::KernelCache fresh_cache(const fs::path& dir) { return rt::KernelCache(vulkan_backend(), device(), kiln::cache::CompileCache(dir)); }

kiln::cache::CacheKey key_of(const kir::Kernel& kernel) {
  const kb::KernelSource source = kiln::render::make_kernel_source(kernel, vulkan_backend().language());
  return kiln::cache::CompileCache::key(source, device()->target(), vulkan_backend().compiler().version());
}

fs::path entry_path(const fs::path& dir, const kir::Kernel& kernel) {
  return kiln::cache::CompileCache(dir.string()).path_for(key_of(kernel));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(kernels)

BOOST_AUTO_TEST_CASE(entries_in_each_others_place_are_rejected_and_rebuilt) {
  const fs::path dir = fresh_dir("swap");
  const kir::Kernel twice = scale_kernel(2.0), thrice = scale_kernel(3.0);
  {
    rt::KernelCache cache = fresh_cache(dir);
    BOOST_TEST(run(cache, twice) == expected(2.0), boost::test_tools::per_element());
    BOOST_TEST(run(cache, thrice) == expected(3.0), boost::test_tools::per_element());
    BOOST_TEST(cache.compiled() == 2);
  }
  // Swap the two valid, checksum-correct entries.
  const fs::path a = entry_path(dir, twice), b = entry_path(dir, thrice);
  BOOST_TEST_REQUIRE(fs::is_regular_file(a));
  BOOST_TEST_REQUIRE(fs::is_regular_file(b));
  const std::string bytes_a = read_bytes(a);
  write_bytes(a, read_bytes(b));
  write_bytes(b, bytes_a);
  {
    WarningLog warnings;
    rt::KernelCache cache = fresh_cache(dir);
    BOOST_TEST(run(cache, twice) == expected(2.0), boost::test_tools::per_element());
    BOOST_TEST(run(cache, thrice) == expected(3.0), boost::test_tools::per_element());
    BOOST_TEST(cache.disk_hits() == 0);
    BOOST_TEST(cache.compiled() == 2);
    BOOST_TEST(warnings.count_containing("written for another key") == 2);
  }
  {
    // Rebuilt in place: the next process starts warm again.
    rt::KernelCache cache = fresh_cache(dir);
    BOOST_TEST(run(cache, thrice) == expected(3.0), boost::test_tools::per_element());
    BOOST_TEST(cache.disk_hits() == 1);
    BOOST_TEST(cache.compiled() == 0);
  }
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_forged_entry_the_driver_refuses_is_removed_and_rebuilt_once) {
  const fs::path dir = fresh_dir("forged");
  const kir::Kernel kernel = scale_kernel(5.0);
  const kiln::cache::CompileCache disk(dir.string());
  // Valid layout, checksum and key; what it holds is not a binary this device loads.
  const std::vector<kb::KernelBinary> forgeries = {
      {"spirv", std::vector<std::byte>(64, std::byte{0x5a}), ""},
      {"ptx", std::vector<std::byte>(16, std::byte{0x2e}), ""},
  };
  for (const kb::KernelBinary& forged : forgeries) {
    disk.store(key_of(kernel), forged);
    WarningLog warnings;
    rt::KernelCache cache = fresh_cache(dir);
    BOOST_TEST(run(cache, kernel) == expected(5.0), boost::test_tools::per_element());
    BOOST_TEST(cache.compiled() == 1);
    BOOST_TEST(cache.disk_hits() == 0);
    BOOST_TEST(warnings.count_containing("failed to load") == 1);
    // The rebuilt entry is the real kernel.
    const std::optional<kb::KernelBinary> rebuilt = disk.load(key_of(kernel));
    BOOST_TEST_REQUIRE(rebuilt.has_value());
    BOOST_TEST(rebuilt->format == "spirv");
    BOOST_TEST(rebuilt->data != forged.data);
  }
  rt::KernelCache warm = fresh_cache(dir);
  BOOST_TEST(run(warm, kernel) == expected(5.0), boost::test_tools::per_element());
  BOOST_TEST(warm.disk_hits() == 1);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_fifo_a_device_link_or_a_directory_in_an_entrys_place_costs_a_compile) {
  const fs::path dir = fresh_dir("types");
  const kir::Kernel kernel = scale_kernel(7.0);
  const fs::path path = entry_path(dir, kernel);
  fs::create_directories(path.parent_path());

  struct Case {
    std::string what;
    std::function<void()> make;
    bool replaced;  // the entry is a regular file again afterwards
  };
  const std::vector<Case> cases = {
      {"FIFO", [&] { BOOST_TEST_REQUIRE(::mkfifo(path.c_str(), 0600) == 0); }, true},
      {"symbolic link", [&] { fs::create_symlink("/dev/zero", path); }, true},
      {"directory", [&] { fs::create_directories(path / "not-ours"); }, false},
  };
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.what) {
      fs::remove(path);
      c.make();
      WarningLog warnings;
      rt::KernelCache cache = fresh_cache(dir);
      BOOST_TEST(run(cache, kernel) == expected(7.0), boost::test_tools::per_element());
      BOOST_TEST(cache.compiled() == 1);
      BOOST_TEST(warnings.count_containing(c.what) >= 1);
      const fs::file_status status = fs::symlink_status(path);
      BOOST_TEST(fs::is_regular_file(status) == c.replaced);
      if (!c.replaced) BOOST_TEST(fs::exists(path / "not-ours"));  // never removed recursively
    }
  }
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()

// The throwaway backend (tests/registered_backend.cpp), which no file of
// kiln names, through the paths that are not suites of their own: the
// registry, the public backend list, compiled modes, compiled-model files
// (written for it, loaded on it, refused elsewhere), kernel sources and the
// tuning key. The op conformance cases, the device kit and the zoo cross it
// in the *_registered tests (tests/meson.build).
#define BOOST_TEST_MODULE registered_backend
#include <boost/test/unit_test.hpp>

#include <kiln/kiln.h>
#include <kiln/sources.h>

#include "backends/registry.h"
#include "graph/op_registry.h"
#include "src/runtime/internal_access.h"
#include "small_models.h"
#include "tests/registered_backend.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <unistd.h>

namespace {

using kiln::testing::kRegisteredBackend;

// The backend this process computes on: the throwaway's, when it has a device here.
bool throwaway_runs() {
  for (const kiln::BackendDescription& b : kiln::list_backends())
    if (b.name == kRegisteredBackend) return b.available && !b.devices.empty();
  return false;
}

struct TempDir {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("kiln_registered_" + std::to_string(::getpid()));
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() { std::filesystem::remove_all(path); }
};

}  // namespace

BOOST_AUTO_TEST_CASE(listed_after_the_built_in_backends_and_before_null) {
  std::vector<std::string> names;
  for (const kiln::BackendDescription& b : kiln::list_backends()) names.push_back(b.name);
  BOOST_TEST_INFO("backends: " << names.size());
  BOOST_REQUIRE(names.size() >= 3u);
  BOOST_TEST(names.back() == "null");
  BOOST_TEST(names[names.size() - 2] == kRegisteredBackend);
  BOOST_TEST(&kiln::backend::get_backend(kRegisteredBackend) == kiln::backend::all_backends()[names.size() - 2]);
}

BOOST_AUTO_TEST_CASE(registering_after_first_use_or_a_taken_name_is_refused) {
  (void)kiln::backend::all_backends();  // the list is fixed from here on
  struct Late : kiln::backend::Backend {
    std::string name() const override { return "late"; }
    std::optional<std::string> unavailable_reason() const override { return "never"; }
    std::vector<kiln::backend::DeviceInfo> enumerate_devices() const override { return {}; }
    std::shared_ptr<kiln::backend::Device> create_device(int) const override { return nullptr; }
    const kiln::backend::LanguageTable& language() const override { return kiln::backend::get_backend("null").language(); }
    const kiln::backend::KernelCompiler& compiler() const override { return kiln::backend::get_backend("null").compiler(); }
    std::vector<kiln::backend::TargetDesc> offline_targets() const override { return {}; }
  };
  try {
    kiln::backend::register_backend(std::make_unique<Late>());
    BOOST_FAIL("registering after the list was fixed did not throw");
  } catch (const kiln::Error& e) {
    BOOST_TEST((e.kind() == kiln::ErrorKind::InvalidArgument));
    BOOST_TEST(std::string(e.what()).find("backend 'late' registered after kiln first listed its backends") !=
               std::string::npos, e.what());
  }
  BOOST_CHECK_THROW(kiln::backend::get_backend("late"), kiln::Error);
}

BOOST_AUTO_TEST_CASE(eager_and_every_mode_match_the_reference) {
  if (!throwaway_runs()) {
    BOOST_TEST_MESSAGE("skipped: no built-in backend has a device here for the throwaway to compute on");
    return;
  }
  const kiln::Model model = small_models::trunk();
  const std::vector<kiln::Tensor> inputs = {small_models::random_tensor({1, 3, 16, 16}, 7)};
  const std::vector<kiln::Tensor> want = kiln::graph::run_reference(kiln::internal::graph(model), inputs);
  TempDir cache;
  kiln::EagerModel eager = kiln::eager(model, {.backend = kRegisteredBackend});
  BOOST_TEST(small_models::max_difference(eager(inputs), want) < 1e-4f);
  for (kiln::Mode mode : kiln::all_modes()) {
    BOOST_TEST_CONTEXT("mode " << kiln::mode_name(mode)) {
      kiln::CompiledModel compiled = kiln::compile(
          model, {.backend = kRegisteredBackend, .mode = mode, .cache_dir = cache.path.string(),
                  .settings = {{"tune", "records"}}});
      BOOST_TEST(small_models::max_difference(compiled(inputs), want) < 1e-4f);
      BOOST_TEST(compiled.explain().find(kRegisteredBackend) != std::string::npos);
    }
  }
  // The kernel cache keeps the throwaway's binaries under its own targets:
  // a second compile reads them all back.
  kiln::CompiledModel again = kiln::compile(model, {.backend = kRegisteredBackend, .cache_dir = cache.path.string()});
  again.prepare();
  BOOST_TEST(again.stats().kernel_cache_misses == 0);
  BOOST_TEST(again.stats().kernel_cache_hits > 0);
}

BOOST_AUTO_TEST_CASE(compiled_model_files_are_written_for_it_and_loaded_on_it) {
  if (!throwaway_runs()) {
    BOOST_TEST_MESSAGE("skipped: no built-in backend has a device here for the throwaway to compute on");
    return;
  }
  const kiln::Model model = small_models::mlp();
  const std::vector<kiln::Tensor> inputs = {small_models::random_tensor({4, 32}, 3)};
  const std::vector<kiln::Tensor> want = kiln::graph::run_reference(kiln::internal::graph(model), inputs);
  TempDir dir;
  const std::string file = (dir.path / "mlp.kiln").string();
  kiln::compile_to_file(model, file, {.targets = {kRegisteredBackend}, .cache_dir = "off"});
  kiln::CompiledModel loaded = kiln::load(file, {.backend = kRegisteredBackend, .cache_dir = "off"});
  BOOST_TEST(small_models::max_difference(loaded(inputs), want) < 1e-4f);
  BOOST_TEST(loaded.stats().kernel_cache_misses == 0);  // loading compiles nothing
  // With no backend named, the file's own plan is found.
  BOOST_TEST(small_models::max_difference(kiln::load(file, {.cache_dir = "off"})(inputs), want) < 1e-4f);
  // A backend it holds no plan for refuses it, naming what it holds.
  try {
    kiln::load(file, {.backend = "null", .cache_dir = "off"});
    BOOST_FAIL("a file for the throwaway backend loaded on null");
  } catch (const kiln::Error& e) {
    BOOST_TEST(std::string(e.what()).find(kRegisteredBackend) != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_CASE(its_kernel_sources_are_a_dump_target) {
  const std::vector<std::string> targets = kiln::source_targets();
  BOOST_REQUIRE(std::find(targets.begin(), targets.end(), kRegisteredBackend) != targets.end());
  if (!throwaway_runs()) {
    BOOST_TEST_MESSAGE("sources skipped: the throwaway's language is its computing backend's, and none has a device here");
    return;
  }
  const kiln::KernelSources sources = kiln::kernel_sources(small_models::trunk(), kRegisteredBackend);
  BOOST_TEST(sources.backend == kRegisteredBackend);
  BOOST_REQUIRE(!sources.kernels.empty());
  for (const kiln::KernelSourceFile& k : sources.kernels) BOOST_TEST(!k.source.empty(), k.file_name);
}

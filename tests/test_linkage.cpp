#define BOOST_TEST_MODULE linkage
#include <boost/test/unit_test.hpp>

// Vendor libraries are opened at run time, never linked: the built binaries
// need none of them (readelf), `kiln` runs where they are missing and names
// what it tried, and a compile without its library is a clear error.
//
// Arguments after `--` (tests/meson.build): the hide_vendor_libraries module
// to preload, then every binary whose dynamic dependencies are checked.

#include "cli_runner.h"

#include <kiln/error.h>

#if KILN_HAVE_CUDA
#include "backends/cuda/compiler.h"
#include "backends/cuda/nvrtc_library.h"
#endif
#if KILN_HAVE_HIP
#include "backends/hip/compiler.h"
#include "backends/hip/hip_runtime_library.h"
#include "backends/hip/hiprtc_library.h"
#endif

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

using kiln::Error;
using kiln::ErrorKind;

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

template <typename Call>
std::optional<Error> thrown_error(Call&& call) {
  try {
    call();
  } catch (const Error& error) {
    return error;
  }
  return std::nullopt;
}

// The arguments after `--`.
std::vector<std::string> custom_arguments() {
  const auto& suite = boost::unit_test::framework::master_test_suite();
  std::vector<std::string> arguments(suite.argv + 1, suite.argv + suite.argc);
  if (!arguments.empty() && arguments.front() == "--") arguments.erase(arguments.begin());
  // Absolute: kiln runs from the source root.
  for (std::string& argument : arguments) argument = std::filesystem::absolute(argument).string();
  return arguments;
}

std::string hide_module() {
  const auto arguments = custom_arguments();
  BOOST_REQUIRE_MESSAGE(!arguments.empty(), "no hide_vendor_libraries module given (run through meson test)");
  return arguments.front();
}

// `readelf -d` of `path`: the NEEDED entries, in order.
std::vector<std::string> needed_libraries(const std::string& path) {
  FILE* pipe = popen(("readelf -d --wide '" + path + "' 2>&1").c_str(), "r");
  BOOST_REQUIRE(pipe != nullptr);
  std::string output;
  std::array<char, 4096> buffer{};
  while (std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe)) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  BOOST_REQUIRE_MESSAGE(WIFEXITED(status) && WEXITSTATUS(status) == 0, "readelf -d " << path << " failed:\n" << output);
  // " 0x0000000000000001 (NEEDED)             Shared library: [libc.so.6]"
  std::vector<std::string> needed;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (!contains(line, "(NEEDED)")) continue;
    const std::size_t open = line.find('['), close = line.rfind(']');
    BOOST_REQUIRE_MESSAGE(open != std::string::npos && close > open, "unexpected readelf line: " << line);
    needed.push_back(line.substr(open + 1, close - open - 1));
  }
  return needed;
}

// The line of `kiln devices` that starts with "<backend>: ", and the
// "compiler:" line under it.
struct BackendLines {
  std::string status;
  std::string compiler;
};

std::optional<BackendLines> backend_lines(const std::string& output, const std::string& backend) {
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with(backend + ": ")) continue;
    BackendLines found{line, {}};
    if (std::getline(lines, line) && contains(line, "compiler: ")) found.compiler = line;
    return found;
  }
  return std::nullopt;
}

// `kiln devices` with every CUDA and ROCm library hidden (see
// hide_vendor_libraries.cpp), keeping whatever LD_PRELOAD the test runs with.
cli_test::Result devices_without_vendor_libraries() {
  std::string preload = hide_module();
  if (const char* existing = std::getenv("LD_PRELOAD"); existing != nullptr && *existing != '\0')
    preload = std::string(existing) + ":" + preload;
  return cli_test::run_kiln("devices", "", "LD_PRELOAD='" + preload + "'");
}

}  // namespace

BOOST_AUTO_TEST_CASE(no_binary_needs_a_vendor_library) {
  std::vector<std::string> binaries(custom_arguments());
  BOOST_REQUIRE(!binaries.empty());
  binaries.erase(binaries.begin());  // the preload module
  binaries.push_back(std::filesystem::read_symlink("/proc/self/exe").string());
  // kiln, kiln-tune-worker, this suite at least.
  BOOST_TEST(binaries.size() >= 3u);
  // Name prefixes: NVRTC, the CUDA runtime and driver, hiprtc, the HIP
  // runtime, comgr, the Vulkan loader.
  const std::array<std::string_view, 7> vendor{"libnvrtc",    "libcudart",    "libcuda.",  "libhiprtc",
                                               "libamdhip64", "libamd_comgr", "libvulkan"};
  for (const std::string& binary : binaries) {
    const std::vector<std::string> needed = needed_libraries(binary);
    std::string listing;
    for (const auto& library : needed) listing += " " + library;
    BOOST_TEST_MESSAGE(binary << " needs:" << listing);
    // Proves the listing was read: every binary here needs the C library.
    BOOST_TEST(contains(listing, " libc.so.6"), binary << " needs:" << listing);
    for (const std::string& library : needed)
      for (std::string_view prefix : vendor)
        BOOST_TEST(!library.starts_with(prefix), binary << " needs the vendor library " << library);
  }
}

// The shared libkiln exports its public API (KILN_API, include/kiln/export.h)
// and nothing of its insides: no internal namespace, no code it compiles in
// from other libraries. libstdc++'s template instantiations over public types
// are exported by the compiler's rules and allowed.
BOOST_AUTO_TEST_CASE(the_shared_library_exports_only_the_public_api) {
  std::optional<std::string> library;
  for (const std::string& binary : custom_arguments())
    if (std::filesystem::path(binary).filename().string().starts_with("libkiln.so")) library = binary;
  if (!library) {
    BOOST_TEST_MESSAGE("libkiln is static in this build (-Ddefault_library=static): nothing to check");
    return;
  }
  FILE* pipe = popen(("nm -D --defined-only -C '" + *library + "' 2>&1").c_str(), "r");
  BOOST_REQUIRE(pipe != nullptr);
  std::string output;
  std::array<char, 4096> chunk{};
  while (std::fgets(chunk.data(), chunk.size(), pipe) != nullptr) output += chunk.data();
  const int status = pclose(pipe);
  BOOST_REQUIRE_MESSAGE(WIFEXITED(status) && WEXITSTATUS(status) == 0, "nm -D " << *library << " failed:\n" << output);

  const std::array<std::string_view, 15> internal{
      "kiln::graph::",  "kiln::backend::", "kiln::runtime::", "kiln::tune::",   "kiln::lower::",
      "kiln::fuse::",   "kiln::kir::",     "kiln::render::",  "kiln::shaders::", "kiln::artifact::",
      "kiln::compiler::", "kiln::trace::", "kiln::internal::", "kiln::onnx_import::", "kiln::models::init::"};
  // What a symbol may be: kiln's (public), the standard library's, or the
  // ELF housekeeping every shared library defines.
  const std::array<std::string_view, 8> allowed_prefixes{"kiln::",     "std::",          "__gnu_cxx::", "typeinfo for ",
                                                         "vtable for ", "typeinfo name for ", "guard variable for ",
                                                         "VTT for "};
  const std::array<std::string_view, 5> housekeeping{"_init", "_fini", "__bss_start", "_edata", "_end"};
  int kiln_symbols = 0;
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    // "<address> <type> <name>"
    const std::size_t second_space = line.find(' ', line.find(' ') + 1);
    if (second_space == std::string::npos) continue;
    std::string_view name = std::string_view(line).substr(second_space + 1);
    if (std::find(housekeeping.begin(), housekeeping.end(), name) != housekeeping.end()) continue;
    std::string_view subject = name;  // what a typeinfo, vtable, ... is for
    for (std::string_view prefix : {"typeinfo name for ", "typeinfo for ", "vtable for ", "guard variable for ", "VTT for "})
      if (subject.starts_with(prefix)) subject.remove_prefix(prefix.size());
    bool allowed = false;
    for (std::string_view prefix : allowed_prefixes) allowed = allowed || name.starts_with(prefix);
    BOOST_TEST(allowed, "libkiln exports a symbol that is neither kiln's nor the standard library's: " << name);
    for (std::string_view prefix : internal)
      BOOST_TEST(!subject.starts_with(prefix), "libkiln exports an internal symbol: " << name);
    if (subject.starts_with("kiln::")) ++kiln_symbols;
  }
  // Proves the listing was read: the API is there.
  BOOST_TEST(kiln_symbols > 50, kiln_symbols << " kiln symbols exported");
  BOOST_TEST(contains(output, "kiln::compile(kiln::Model const&, kiln::CompileOptions const&)"), output.substr(0, 2000));
  BOOST_TEST(contains(output, "typeinfo for kiln::Error"));
}

BOOST_AUTO_TEST_CASE(devices_runs_without_vendor_libraries_and_names_what_it_tried) {
  const cli_test::Result plain = cli_test::run_kiln("devices");
  const cli_test::Result hidden = devices_without_vendor_libraries();
  BOOST_TEST(plain.exit_code == 0);
  BOOST_TEST(hidden.exit_code == 0);
  // Vulkan is unaffected.
  const auto plain_vulkan = backend_lines(plain.output, "vulkan");
  const auto hidden_vulkan = backend_lines(hidden.output, "vulkan");
  BOOST_TEST_REQUIRE(plain_vulkan.has_value());
  BOOST_TEST_REQUIRE(hidden_vulkan.has_value());
  BOOST_TEST(hidden_vulkan->status == plain_vulkan->status);
  BOOST_TEST(hidden_vulkan->compiler == plain_vulkan->compiler);

#if KILN_HAVE_CUDA
  {
    const auto cuda = backend_lines(hidden.output, "cuda");
    BOOST_TEST_REQUIRE(cuda.has_value());
    BOOST_TEST(cuda->status.starts_with("cuda: unavailable: cannot load NVRTC: "), cuda->status);
    for (std::string_view soname : kiln::backend::cuda::kNvrtcSonames)
      BOOST_TEST(contains(cuda->status, std::string(soname) + ": cannot open shared object file"),
                 soname << " not named in: " << cuda->status);
    BOOST_TEST(contains(cuda->status, "no NVIDIA driver: "), cuda->status);
    BOOST_TEST(contains(cuda->status, "libcuda.so.1"), cuda->status);
    BOOST_TEST(contains(cuda->compiler, "compiler: NVRTC (not loaded)"), cuda->compiler);
  }
#endif
#if KILN_HAVE_HIP
  {
    const auto hip = backend_lines(hidden.output, "hip");
    BOOST_TEST_REQUIRE(hip.has_value());
    BOOST_TEST(hip->status.starts_with("hip: unavailable: cannot load hiprtc: "), hip->status);
    for (std::string_view soname : kiln::backend::hip::kHiprtcSonames)
      BOOST_TEST(contains(hip->status, std::string(soname) + ": cannot open shared object file"),
                 soname << " not named in: " << hip->status);
    BOOST_TEST(contains(hip->status, "no HIP runtime: "), hip->status);
    BOOST_TEST(contains(hip->compiler, "compiler: hiprtc (not loaded)"), hip->compiler);
  }
#endif
}

#if KILN_HAVE_CUDA
namespace cuda = kiln::backend::cuda;

BOOST_AUTO_TEST_CASE(nvrtc_missing_is_a_reason_and_compiling_throws_unsupported) {
  const std::array<std::string_view, 1> missing{"libkiln-test-missing-nvrtc.so.0"};
  const cuda::NvrtcLibrary nvrtc = cuda::open_nvrtc(missing);
  BOOST_TEST(!nvrtc.loaded());
  BOOST_TEST(nvrtc.failure.starts_with("cannot load NVRTC: "), nvrtc.failure);
  BOOST_TEST(contains(nvrtc.failure, "libkiln-test-missing-nvrtc.so.0: cannot open shared object file"), nvrtc.failure);

  const cuda::NvrtcCompiler compiler(nvrtc);
  BOOST_TEST(compiler.version() == "NVRTC (not loaded)");
  BOOST_TEST(compiler.unavailable_reason().value_or("") == nvrtc.failure);
  const kiln::backend::KernelSource source{.name = "empty", .language = "cuda", .text = "__global__ void empty() {}"};
  for (const kiln::backend::TargetDesc& target : cuda::offline_targets()) {
    const auto error = thrown_error([&] { compiler.compile(source, target); });
    BOOST_TEST_REQUIRE(error.has_value());
    BOOST_TEST(error->kind() == ErrorKind::Unsupported);
    const std::string message = error->what();
    BOOST_TEST(contains(message, "kernel 'empty' for " + target.arch), message);
    BOOST_TEST(contains(message, "libkiln-test-missing-nvrtc.so.0"), message);
  }
}

BOOST_AUTO_TEST_CASE(a_library_without_nvrtc_is_passed_over) {
  const std::array<std::string_view, 1> not_nvrtc{"libc.so.6"};
  const cuda::NvrtcLibrary nvrtc = cuda::open_nvrtc(not_nvrtc);
  BOOST_TEST(!nvrtc.loaded());
  BOOST_TEST(contains(nvrtc.failure, "libc.so.6 ("), nvrtc.failure);
  BOOST_TEST(contains(nvrtc.failure, ") lacks nvrtcVersion"), nvrtc.failure);
}

BOOST_AUTO_TEST_CASE(nvrtc_names_are_tried_in_order) {
  std::vector<std::string_view> names{"libkiln-test-missing-nvrtc.so.0"};
  names.insert(names.end(), cuda::kNvrtcSonames.begin(), cuda::kNvrtcSonames.end());
  const cuda::NvrtcLibrary nvrtc = cuda::open_nvrtc(names);
  const cuda::NvrtcLibrary& process = cuda::nvrtc_library();
  BOOST_TEST(nvrtc.loaded() == process.loaded());
  if (!process.loaded()) {
    BOOST_TEST_MESSAGE("no NVRTC here: " << process.failure);
    for (std::string_view name : names) BOOST_TEST(contains(nvrtc.failure, name), name << " not in " << nvrtc.failure);
    return;
  }
  // The first name that exists wins, found where the process's was.
  BOOST_TEST(nvrtc.library.soname == process.library.soname);
  BOOST_TEST(nvrtc.library.path == process.library.path);
  BOOST_TEST(!nvrtc.library.path.empty());
  BOOST_TEST(nvrtc.major == process.major);
  BOOST_TEST(!nvrtc.supported_archs.empty());
  BOOST_TEST(cuda::NvrtcCompiler(nvrtc).version() == cuda::NvrtcCompiler().version());
}
#endif

#if KILN_HAVE_HIP
namespace hip = kiln::backend::hip;

BOOST_AUTO_TEST_CASE(hiprtc_missing_is_a_reason_and_compiling_throws_unsupported) {
  const std::array<std::string_view, 1> missing{"libkiln-test-missing-hiprtc.so.0"};
  const hip::HiprtcLibrary hiprtc = hip::open_hiprtc(missing);
  BOOST_TEST(!hiprtc.loaded());
  BOOST_TEST(hiprtc.failure.starts_with("cannot load hiprtc: "), hiprtc.failure);
  BOOST_TEST(contains(hiprtc.failure, "libkiln-test-missing-hiprtc.so.0: cannot open shared object file"),
             hiprtc.failure);

  const hip::HiprtcCompiler compiler(hiprtc);
  BOOST_TEST(compiler.version() == "hiprtc (not loaded)");
  BOOST_TEST(compiler.unavailable_reason().value_or("") == hiprtc.failure);
  const kiln::backend::KernelSource source{.name = "empty", .language = "hip", .text = "__global__ void empty() {}"};
  for (const kiln::backend::TargetDesc& target : hip::offline_targets()) {
    const auto error = thrown_error([&] { compiler.compile(source, target); });
    BOOST_TEST_REQUIRE(error.has_value());
    BOOST_TEST(error->kind() == ErrorKind::Unsupported);
    const std::string message = error->what();
    BOOST_TEST(contains(message, "kernel 'empty' for " + target.arch), message);
    BOOST_TEST(contains(message, "libkiln-test-missing-hiprtc.so.0"), message);
  }
}

BOOST_AUTO_TEST_CASE(a_library_without_hiprtc_is_passed_over) {
  const std::array<std::string_view, 1> not_hiprtc{"libc.so.6"};
  const hip::HiprtcLibrary hiprtc = hip::open_hiprtc(not_hiprtc);
  BOOST_TEST(!hiprtc.loaded());
  BOOST_TEST(contains(hiprtc.failure, ") lacks hiprtcGetErrorString"), hiprtc.failure);
}

BOOST_AUTO_TEST_CASE(hip_runtime_missing_is_a_reason) {
  const std::array<std::string_view, 1> missing{"libkiln-test-missing-amdhip64.so.0"};
  const hip::HipRuntimeLibrary runtime = hip::open_hip_runtime(missing);
  BOOST_TEST(!runtime.loaded());
  BOOST_TEST(runtime.failure.starts_with("no HIP runtime: "), runtime.failure);
  BOOST_TEST(contains(runtime.failure, "libkiln-test-missing-amdhip64.so.0: cannot open shared object file"),
             runtime.failure);
}

BOOST_AUTO_TEST_CASE(hiprtc_names_are_tried_in_order) {
  std::vector<std::string_view> names{"libkiln-test-missing-hiprtc.so.0"};
  names.insert(names.end(), hip::kHiprtcSonames.begin(), hip::kHiprtcSonames.end());
  const hip::HiprtcLibrary hiprtc = hip::open_hiprtc(names);
  const hip::HiprtcLibrary& process = hip::hiprtc_library();
  BOOST_TEST(hiprtc.loaded() == process.loaded());
  if (!process.loaded()) {
    BOOST_TEST_MESSAGE("no hiprtc here: " << process.failure);
    for (std::string_view name : names)
      BOOST_TEST(contains(hiprtc.failure, name), name << " not in " << hiprtc.failure);
    return;
  }
  BOOST_TEST(hiprtc.library.soname == process.library.soname);
  BOOST_TEST(hiprtc.library.path == process.library.path);
  BOOST_TEST(!hiprtc.library.path.empty());
}
#endif

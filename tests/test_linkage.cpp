#define BOOST_TEST_MODULE linkage
#include <boost/test/unit_test.hpp>

// Vendor libraries are opened at run time, never linked: the built binaries
// need none of them (readelf), `kiln` runs where they are missing and names
// what it tried, and a compile without its library is a clear error.
//
// Arguments after `--` (tests/meson.build): the hide_vendor_libraries module
// to preload, then every binary whose dynamic dependencies are checked.

#include "cli_runner.h"
#include "exported_symbol.h"

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
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

using kiln::Error;
using kiln::ErrorKind;
using exported_symbol::Owner;

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

// What a shell command prints (stdout and stderr); fails the test unless it exits 0.
std::string command_output(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  BOOST_REQUIRE(pipe != nullptr);
  std::string output;
  std::array<char, 4096> buffer{};
  while (std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe)) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  BOOST_REQUIRE_MESSAGE(WIFEXITED(status) && WEXITSTATUS(status) == 0, command << " failed:\n" << output);
  return output;
}

// `readelf -d` of `path`: the NEEDED entries, in order.
std::vector<std::string> needed_libraries(const std::string& path) {
  const std::string output = command_output("readelf -d --wide '" + path + "'");
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
// and nothing of its insides: no internal namespace, nothing of the
// libraries it compiles in (glslang, SPIRV-Tools, shaderc) or links.
// libstdc++'s template instantiations over public or standard types are
// exported by the compiler's rules and allowed. exported_symbol.cpp says
// whose a symbol is.
BOOST_AUTO_TEST_CASE(the_shared_library_exports_only_the_public_api) {
  std::optional<std::string> library;
  for (const std::string& binary : custom_arguments())
    if (std::filesystem::path(binary).filename().string().starts_with("libkiln.so")) library = binary;
  if (!library) {
    BOOST_TEST_MESSAGE("libkiln is static in this build (-Ddefault_library=static): nothing to check");
    return;
  }
  const std::string output = command_output("nm -D --defined-only '" + *library + "'");
  std::map<Owner, std::vector<std::string>> by_owner;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    // "<address> <type> <mangled name>"
    const std::size_t name_start = line.rfind(' ');
    if (name_start == std::string::npos) continue;
    const exported_symbol::Symbol symbol = exported_symbol::classify(std::string_view(line).substr(name_start + 1));
    by_owner[symbol.owner].push_back(symbol.demangled);
  }
  for (const auto& [owner, names] : by_owner)
    BOOST_TEST_MESSAGE(names.size() << " exported symbols of " << exported_symbol::owner_name(owner));
  // The first few of a list, then how many more.
  const auto some = [](const std::vector<std::string>& names) {
    std::string text;
    for (std::size_t i = 0; i < names.size() && i < 20; ++i) text += "\n  " + names[i];
    if (names.size() > 20) text += "\n  ... (" + std::to_string(names.size() - 20) + " more)";
    return text;
  };
  const std::vector<std::string>& internal = by_owner[Owner::kiln_internal];
  BOOST_TEST(internal.empty(), "libkiln exports " << internal.size()
                                                  << " symbols of kiln's internals (KILN_API on an internal "
                                                     "declaration, or a static library built without "
                                                     "gnu_symbol_visibility: 'inlineshidden'):"
                                                  << some(internal));
  const std::vector<std::string>& foreign = by_owner[Owner::foreign];
  BOOST_TEST(foreign.empty(), "libkiln exports " << foreign.size()
                                                 << " symbols of other libraries (a static library linked "
                                                    "without -Wl,--exclude-libs, src/package/meson.build):"
                                                 << some(foreign));
  // Proves the listing was read: the API is there, its exception type too
  // (catch (const kiln::Error&) in an application matches its typeinfo).
  const std::vector<std::string>& api = by_owner[Owner::kiln_public];
  BOOST_TEST(api.size() > 100u, api.size() << " symbols of kiln's public API exported");
  for (std::string_view expected : {"kiln::compile(kiln::Model const&, kiln::CompileOptions const&)",
                                    "kiln::Tensor::Tensor()", "typeinfo for kiln::Error", "vtable for kiln::Error"})
    BOOST_TEST((std::find(api.begin(), api.end(), expected) != api.end()), "libkiln does not export " << expected);
}

// The check above is only as good as its reading of mangled names: real
// names from libkiln's builds (before hidden visibility) and the special
// names (typeinfo, thunks, guard variables, local statics).
BOOST_AUTO_TEST_CASE(exported_symbols_are_told_apart_by_their_mangled_names) {
  const std::vector<std::pair<std::string_view, Owner>> cases{
      {"_ZN4kiln7compileERKNS_5ModelERKNS_14CompileOptionsE", Owner::kiln_public},
      {"_ZTIN4kiln5ErrorE", Owner::kiln_public},
      {"_ZTv0_n24_N4kiln5ErrorD0Ev", Owner::kiln_public},
      // A function template: its return type comes after the name.
      {"_ZN4kiln6Tensor6valuesIfEESt4spanIT_Lm18446744073709551615EEv", Owner::kiln_public},
      {"_ZN4kiln6models5buildERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEERKNS0_12ModelOptionsE",
       Owner::kiln_public},
      // Model's private constructor takes the graph: the public class's member.
      {"_ZN4kiln5ModelC2ESt10shared_ptrIKNS_5graph5GraphEENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE",
       Owner::kiln_public},
      {"_ZN4kiln5graph5Graph11set_outputsESt6vectorIiSaIiEE", Owner::kiln_internal},
      {"_ZN4kiln6models4init11fill_normalERNS_6TensorEj", Owner::kiln_internal},
      {"_ZThn16_N4kiln5graph4NodeD1Ev", Owner::kiln_internal},
      {"_ZGVZN4kiln7runtime6loggerEvE8instance", Owner::kiln_internal},
      {"_ZTINSt6thread11_State_implINS_8_InvokerISt5tupleIJMN4kiln7runtime9CallQueueEFvvEPS5_EEEEEE",
       Owner::kiln_internal},
      {"_ZNSt6vectorIN4kiln6TensorESaIS1_EE17_M_realloc_insertIJRKS1_EEEvN9__gnu_cxx17__normal_iteratorIPS1_S3_EEDpOT_",
       Owner::standard_library},
      {"_ZZNSt8__detail18__to_chars_10_implIjEEvPcjT_E8__digits", Owner::standard_library},
      {"_ZTIPFddE", Owner::standard_library},  // typeinfo for double (*)(double)
      {"_ZTIPN4kiln5graph4NodeE", Owner::kiln_internal},
      {"_ZTSPN7glslang5TTypeE", Owner::foreign},
      {"_ZNSt6vectorIN8spvtools3opt7OperandESaIS2_EE17_M_realloc_insertIJRKS2_EEEvN9__gnu_cxx17__normal_"
       "iteratorIPS2_S4_EEDpOT_",
       Owner::foreign},
      {"_ZN7glslang7TShader17setNanMinMaxClampEb", Owner::foreign},
      {"_ZTVN8spvtools3opt15MergeReturnPassE", Owner::foreign},
      {"ShCompile", Owner::foreign},
      {"sqlite3_open_v2", Owner::foreign},
      {"_edata", Owner::elf_housekeeping},
  };
  for (const auto& [mangled, owner] : cases) {
    const exported_symbol::Symbol symbol = exported_symbol::classify(mangled);
    BOOST_TEST((symbol.owner == owner), mangled << " (" << symbol.demangled << ") read as "
                                              << exported_symbol::owner_name(symbol.owner) << ", not "
                                              << exported_symbol::owner_name(owner));
  }
  BOOST_TEST(exported_symbol::classify("_ZTIN4kiln5ErrorE").demangled == "typeinfo for kiln::Error");
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

#include "backends/cpu/compiler.h"

#include "src/base/check.h"

#include <kiln/error.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace kiln::backend::cpu {
namespace {

namespace fs = std::filesystem;

// Flags that give C the kernel IR's semantics (src/kernel/interpreter.h):
// wrapping signed arithmetic, no contraction of a * b + c into one rounding,
// and shared objects.
const std::vector<std::string> kFlags = {"-std=gnu11", "-O2", "-fPIC", "-shared", "-fwrapv", "-ffp-contract=off",
                                         "-fno-math-errno", "-w"};

struct RunResult {
  int status = -1;     // the exit status, or -1 if it could not start or was killed
  std::string output;  // stdout and stderr together
};

// Runs `args` (args[0] looked up on PATH) with stdout and stderr into `log`.
RunResult run(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  RunResult result;
  const int spawned = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    result.output = std::string("cannot run ") + args[0] + ": " + std::strerror(spawned);
    return result;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::ifstream in(log);
  result.output.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// A fresh private folder for one compile, removed when done.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (fs::temp_directory_path() / "kiln-cc-XXXXXX").string();
    KILN_CHECK(mkdtemp(pattern.data()) != nullptr, ErrorKind::Internal,
               "the cpu backend cannot make a scratch folder in " + fs::temp_directory_path().string() + ": " +
                   std::strerror(errno));
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

struct Probe {
  std::string version;
  std::optional<std::string> problem;
};

const Probe& probe() {
  static const Probe p = [] {
    Probe out;
    try {
      ScratchDir dir;
      const RunResult r = run({"cc", "--version"}, dir.path() / "version.txt");
      if (r.status != 0) {
        out.problem = "no C compiler: `cc --version` failed" + (r.output.empty() ? "" : ": " + trim_log(r.output));
        return out;
      }
      out.version = "cc: " + r.output.substr(0, r.output.find('\n'));
    } catch (const Error& e) {
      out.problem = std::string("no C compiler: ") + e.what();
    }
    return out;
  }();
  return p;
}

}  // namespace

std::string with_entry_points(const KernelSource& source) {
  std::string args;
  for (std::uint32_t i = 0; i < source.num_buffers; ++i) args += "kiln_b[" + std::to_string(i) + "], ";
  const bool params = source.num_params > 0;
  if (params) args += "kiln_kp, ";
  const std::string unpack =
      params ? "  KilnParams kiln_kp;\n  memcpy(&kiln_kp, kiln_p, sizeof kiln_kp);\n" : "  (void)kiln_p;\n";
  const std::string wg = std::to_string(source.workgroup_size);
  std::ostringstream out;
  out << source.text << "\n#include <string.h>\n"
      << "void kiln_cpu_set_barrier(void (*fn)(void*), void* context) {\n"
      << "  kiln_barrier_fn = fn;\n  kiln_barrier_ctx = context;\n}\n"
      << "void kiln_cpu_invoke(void* const* kiln_b, const int32_t* kiln_p, kiln_uvec3 kiln_gid, kiln_uvec3 kiln_ng) {\n"
      << unpack << "  " << source.name << "(" << args << "kiln_gid, kiln_ng);\n}\n"
      << "void kiln_cpu_run_groups(void* const* kiln_b, const int32_t* kiln_p, uint32_t kiln_first, uint32_t kiln_end,\n"
      << "                         kiln_uvec3 kiln_ng) {\n"
      << unpack << "  for (uint32_t g = kiln_first; g < kiln_end; ++g) {\n"
      << "    kiln_uvec3 kiln_gid = {0u, g / kiln_ng.x, 0u};\n"
      << "    const uint32_t base = (g % kiln_ng.x) * " << wg << "u;\n"
      << "    for (uint32_t l = 0; l < " << wg << "u; ++l) {\n"
      << "      kiln_gid.x = base + l;\n"
      << "      " << source.name << "(" << args << "kiln_gid, kiln_ng);\n"
      << "    }\n  }\n}\n";
  return out.str();
}

std::string CCompiler::version() const {
  const Probe& p = probe();
  return p.problem ? "cc: unavailable" : p.version;
}

std::optional<std::string> CCompiler::unavailable_reason() const { return probe().problem; }

KernelBinary CCompiler::compile(const KernelSource& source, const TargetDesc& target) const {
  KILN_CHECK(target.backend == "cpu", ErrorKind::Internal,
             "the cpu compiler got a target of backend '" + target.backend + "'");
  if (const auto& problem = probe().problem) throw_error(ErrorKind::Unsupported, "the cpu backend: " + *problem);
  ScratchDir dir;
  const fs::path c_file = dir.path() / (source.name + ".c");
  const fs::path so_file = dir.path() / (source.name + ".so");
  const std::string text = with_entry_points(source);
  {
    std::ofstream out(c_file, std::ios::binary);
    out << text;
    KILN_CHECK(out.good(), ErrorKind::Internal, "the cpu backend cannot write " + c_file.string());
  }
  std::vector<std::string> args = {"cc"};
  args.insert(args.end(), kFlags.begin(), kFlags.end());
  args.insert(args.end(), {"-o", so_file.string(), c_file.string(), "-lm"});
  const RunResult r = run(args, dir.path() / "log.txt");
  KILN_CHECK(r.status == 0, ErrorKind::Internal,
             "cc could not compile kernel '" + source.name + "' (a kiln bug):\n" + trim_log(r.output) + "\n" +
                 numbered_source(text));
  std::ifstream in(so_file, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  KILN_CHECK(!bytes.empty(), ErrorKind::Internal, "cc wrote no shared object for kernel '" + source.name + "'");
  KernelBinary binary;
  binary.format = binary_format(target);
  binary.data.resize(bytes.size());
  std::memcpy(binary.data.data(), bytes.data(), bytes.size());
  binary.log = trim_log(r.output);
  return binary;
}

}  // namespace kiln::backend::cpu

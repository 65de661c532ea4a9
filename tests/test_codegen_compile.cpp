#define BOOST_TEST_MODULE codegen_compile
// Our own main() below turns "no code-generation backend compiled in" into
// Meson's skip exit code (77) before Boost.Test starts.
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

// Every kernel kiln generates must compile for every backend's offline
// targets (SPIR-V, NVRTC PTX/CUBIN, hiprtc code objects, the host's shared
// objects, ...), with no GPU present: the op cases are lowered node by node,
// before and after the compile passes, rendered with each backend's language
// table, and compiled for each of its targets. Also: the CUDA and HIP
// compilers' failure modes and those backends' device probing.

#include "backends/registry.h"
#include <kiln/builder.h>
#include "graph/ir.h"
#include "graph/passes/passes.h"
#include "fragment_kernels.h"
#include "offline_targets.h"
#include "op_cases.h"
#include "shaders/gemm_template.h"
#include "shaders/knobs.h"
#include "src/artifact/plan_codec.h"
#include "src/fuse/schedule.h"
#include "src/kernel/ir.h"
#include "src/lower/lower.h"
#include "src/lower/target_policy.h"
#include "src/render/cstyle.h"
#include "src/runtime/internal_access.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <atomic>
#include <future>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace kiln {
// Lets Boost.Test print error kinds in failed comparisons (found by ADL).
std::ostream& boost_test_print_type(std::ostream& out, ErrorKind kind) { return out << error_kind_name(kind); }
}  // namespace kiln

namespace {

using kiln::Error;
using kiln::ErrorKind;
using kiln::backend::Backend;
using kiln::backend::KernelBinary;
using kiln::backend::KernelCompiler;
using kiln::backend::KernelSource;
using kiln::backend::TargetDesc;
using kiln::backend::F16Conversion;

// The CUDA-style backends, in registry order: cuda, hip (each only where
// meson found its compiler), for the checks of their languages and compilers.
std::vector<const Backend*> codegen_backends() {
  std::vector<const Backend*> backends;
  for (const Backend* backend : kiln::backend::all_backends())
    if (backend->name() == "cuda" || backend->name() == "hip") backends.push_back(backend);
  return backends;
}

const Backend* find_codegen_backend(const std::string& name) {
  for (const Backend* backend : codegen_backends())
    if (backend->name() == name) return backend;
  return nullptr;
}

template <typename Call>
std::optional<Error> thrown_error(Call&& call) {
  try {
    call();
  } catch (const Error& error) {
    return error;
  }
  return std::nullopt;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

bool contains_bytes(const std::vector<std::byte>& data, const std::string& part) {
  const auto* begin = reinterpret_cast<const char*>(data.data());
  return std::search(begin, begin + data.size(), part.begin(), part.end()) != begin + data.size();
}

// What a correct binary looks like: the format its compiler declares for the
// target, ELF where that is an object, and the kernel's entry point present
// by name.
std::optional<std::string> binary_problem(const KernelCompiler& compiler, const KernelSource& source,
                                          const TargetDesc& target, const KernelBinary& binary) {
  const std::string where = "kernel '" + source.name + "' for " + target.arch + ": ";
  const std::string expected = compiler.binary_format(target);
  if (binary.format != expected) return where + "format '" + binary.format + "', expected '" + expected + "'";
  if (binary.data.size() < 4) return where + "a binary of " + std::to_string(binary.data.size()) + " bytes";
  const bool elf = std::memcmp(binary.data.data(), "\x7f" "ELF", 4) == 0;
  const bool object = binary.format == "cubin" || binary.format == "hsaco" || binary.format == "elf-so";
  if (object && !elf) return where + "the " + binary.format + " binary is not an ELF object";
  const std::uint32_t spirv_magic = 0x07230203;
  if (binary.format == "spirv" && std::memcmp(binary.data.data(), &spirv_magic, 4) != 0)
    return where + "the SPIR-V module does not start with its magic number";
  if (binary.format == "ptx" && !contains_bytes(binary.data, ".entry")) return where + "the PTX has no .entry";
  // GLSL's entry point is always main; the others keep the kernel's name.
  const std::string entry = binary.format == "spirv" ? "main" : source.name;
  if (!contains_bytes(binary.data, entry)) return where + "the binary does not name the entry point " + entry;
  return std::nullopt;
}

// One compile job: a rendered source and the target to build it for.
struct CompileJob {
  const Backend* backend;
  KernelSource source;
  TargetDesc target;
};

struct CompileOutcome {
  int compiled = 0;
  std::vector<std::string> failures;
};

CompileOutcome run_job(const CompileJob& job) {
  CompileOutcome outcome;
  try {
    const KernelBinary binary = job.backend->compiler().compile(job.source, job.target);
    if (auto problem = binary_problem(job.backend->compiler(), job.source, job.target, binary))
      outcome.failures.push_back(*problem);
    else
      ++outcome.compiled;
  } catch (const Error& error) {
    outcome.failures.push_back(std::string(kiln::error_kind_name(error.kind())) + ": " + error.what());
  }
  return outcome;
}

// Compiles every job on one worker per hardware thread, taking the backends'
// jobs in turn (NVRTC compiles on several threads at once; hiprtc one
// program at a time, so its jobs are spread out rather than queued behind
// each other), and checks the results on the test thread, where Boost.Test
// assertions belong. Returns the count.
int compile_all(const std::vector<CompileJob>& jobs) {
  std::map<const Backend*, std::vector<const CompileJob*>> by_backend;
  for (const CompileJob& job : jobs) by_backend[job.backend].push_back(&job);
  std::vector<const CompileJob*> order;
  for (std::size_t i = 0; order.size() < jobs.size(); ++i)
    for (const auto& [backend, list] : by_backend)
      if (i < list.size()) order.push_back(list[i]);
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    CompileOutcome outcome;
    for (std::size_t i = next++; i < order.size(); i = next++) {
      CompileOutcome one = run_job(*order[i]);
      outcome.compiled += one.compiled;
      outcome.failures.insert(outcome.failures.end(), one.failures.begin(), one.failures.end());
    }
    return outcome;
  };
  std::vector<std::future<CompileOutcome>> outcomes;
  for (unsigned t = 0; t < std::max(2u, std::thread::hardware_concurrency()); ++t)
    outcomes.push_back(std::async(std::launch::async, worker));
  int compiled = 0;
  for (auto& future : outcomes) {
    const CompileOutcome outcome = future.get();
    compiled += outcome.compiled;
    for (const std::string& failure : outcome.failures) BOOST_ERROR(failure);
  }
  return compiled;
}

// Whether a target must take a kernel (fail), may refuse it (skip), or may
// refuse it only for a capability it lacks (capability: 64-bit integers or
// bool tensors on a minimal Vulkan 1.1 device, whose nodes run on the host).
enum class Refusals { fail, skip, capability };

bool lacks_a_capability(const kiln::backend::KernelRequirements& k, const TargetDesc& t) {
  return (k.int64 && !t.int64) || (k.storage8 && !t.storage8) || (k.storage16 && !t.storage16) ||
         (k.fp16 && !t.fp16) ||
         (k.subgroup_size != 0 && !t.subgroup_basic) || (k.texel_width_1 && !t.texel_r32f) ||
         (k.texel_width_4 && !t.texel_rgba32f) || (k.texel_16bit && !t.texel_16bit);
}

// Renders `kernel` for every backend with offline targets (those of this
// part: tests/offline_targets.h) and queues it for each target, skipping
// sources already queued (identical text compiles identically). Checks first
// that the target accepts the kernel.
class JobQueue {
 public:
  JobQueue() : targets_(kiln::testing::offline_targets_of_part()) {}

  // Queues `kernel` for every target, or for `only` (a kernel lowered for that target).
  void add(const kiln::kir::Kernel& kernel, const std::string& origin, Refusals refusals = Refusals::fail,
           const kiln::testing::OfflineTarget* only = nullptr) {
    const kiln::backend::KernelRequirements requirements = kiln::render::kernel_requirements(kernel);
    std::map<const Backend*, KernelSource> rendered;
    for (const kiln::testing::OfflineTarget& t : targets_) {
      if (only != nullptr && (t.backend != only->backend || t.target.arch != only->target.arch)) continue;
      auto it = rendered.find(t.backend);
      if (it == rendered.end()) {
        it = rendered.emplace(t.backend, kiln::render::make_kernel_source(kernel, t.backend->language())).first;
        BOOST_TEST_REQUIRE(it->second.language == t.backend->language().name);
        texts_[t.backend->name()].insert(it->second.text);
      }
      if (!seen_.insert({t.target.fingerprint(), it->second.text}).second) continue;
      const auto refusal = t.backend->supports(requirements, t.target);
      const bool allowed = refusals == Refusals::skip ||
                           (refusals == Refusals::capability && lacks_a_capability(requirements, t.target));
      if (!allowed)
        BOOST_CHECK_MESSAGE(!refusal, origin << ": " << t.target.arch << " refuses the kernel: " << refusal.value_or(""));
      if (refusal) ++refused_;
      else jobs_.push_back({t.backend, it->second, t.target});
    }
  }
  const std::vector<CompileJob>& jobs() const { return jobs_; }
  const std::vector<kiln::testing::OfflineTarget>& targets() const { return targets_; }
  // Distinct sources queued for `backend`.
  int sources(const std::string& backend) const {
    return texts_.count(backend) ? static_cast<int>(texts_.at(backend).size()) : 0;
  }
  // Jobs left out because their target refused the kernel.
  int refused() const { return refused_; }

 private:
  std::vector<kiln::testing::OfflineTarget> targets_;
  std::set<std::pair<std::string, std::string>> seen_;  // target fingerprint, source text
  std::vector<CompileJob> jobs_;
  std::map<std::string, std::set<std::string>> texts_;  // backend -> distinct sources
  int refused_ = 0;
};

// Lowers every node of `graph` for each offline target, as compiling for
// that target would (aliases move no data and are skipped), and queues the
// kernels. Returns the number of nodes lowered to a kernel.
int queue_graph_kernels(const kiln::graph::Graph& graph, const std::string& origin, JobQueue& queue) {
  int kernels = 0;
  for (const kiln::graph::Node& node : graph.nodes()) {
    std::vector<kiln::graph::TensorType> inputs, outputs;
    for (kiln::graph::ValueId id : node.inputs)
      if (id >= 0) inputs.push_back(graph.value(id).type);
    for (kiln::graph::ValueId id : node.outputs) outputs.push_back(graph.value(id).type);
    const std::string where = origin + ", node '" + node.name + "' (" + node.op + ")";
    // One node failing to lower or render must not hide the others' results.
    try {
      const auto reason = kiln::lower::unsupported_reason(node, inputs, outputs);
      BOOST_CHECK_MESSAGE(!reason, where << " cannot be lowered: " << reason.value_or(""));
      if (reason) continue;
      bool kernel = false;
      for (const kiln::testing::OfflineTarget& t : queue.targets()) {
        kiln::lower::LoweredNode lowered =
            kiln::lower::lower_node(node, inputs, outputs, kiln::lower::target_policy(t.target).lower);
        if (lowered.kind != kiln::lower::LoweredNode::Kind::kernel) continue;
        BOOST_TEST_REQUIRE(lowered.kernel.has_value());
        queue.add(*lowered.kernel, where, Refusals::capability, &t);
        kernel = true;
      }
      kernels += kernel ? 1 : 0;
    } catch (const Error& error) {
      BOOST_ERROR(where << ": " << kiln::error_kind_name(error.kind()) << ": " << error.what());
    }
  }
  return kernels;
}

// A kernel using every construct of the kernel IR: every unary and binary op,
// all scalar types, casts, select, declare/assign, a strided loop, a branch
// with an else, and read, write and read-write buffers. The op cases may not
// reach every spelling in the language tables; this does.
kiln::kir::Kernel every_construct_kernel() {
  using namespace kiln::kir;
  using T = ScalarType;
  Kernel kernel("every_construct");
  const Buf x = kernel.add_buffer("x", T::f32, Access::read);
  const Buf counts = kernel.add_buffer("counts", T::i32, Access::read);
  const Buf flags = kernel.add_buffer("flags", T::u32, Access::read);
  const Buf y = kernel.add_buffer("y", T::f32, Access::write);
  const Buf total = kernel.add_buffer("total", T::f32, Access::read_write);
  kernel.global_size = 1000;
  kernel.workgroup_size = 128;

  const Expr i = global_index();
  const Expr a = var("a", T::f32);
  const Expr n = var("n", T::i32);
  const Expr j = var("j", T::i32);
  const Expr u = var("u", T::u32);
  const Expr sum = var("sum", T::f32);
  const Expr positive = var("positive", T::boolean);

  const Expr floats = exp(-a) + log(abs(a) + f32(1.0)) + sqrt(abs(a)) * rsqrt(abs(a) + f32(0.5)) + tanh(a) +
                      erf(a) - floor(a) / unary(UnaryOp::ceil, a + f32(2.5)) + pow(abs(a), f32(1.5)) +
                      min(a, f32(0.25)) + max(a, f32(-0.25));
  const Expr ints = (n % i32(3)) + (n / i32(2)) - min(n, i32(4)) * max(n, i32(1));
  const Expr tests = ((a < f32(1.0)) && (a <= f32(2.0))) || ((a > f32(-1.0)) && (a >= f32(-2.0)));
  const Expr equalities = eq(n, i32(0)) || ne(u, u32(7));

  kernel.body = {
      declare("a", T::f32, load(x, i, T::f32)),
      declare("n", T::i32, load(counts, i % i32(16), T::i32)),
      declare("u", T::u32, load(flags, i, T::u32) + u32(1)),
      declare("positive", T::boolean, unary(UnaryOp::logical_not, a < f32(0.0))),
      declare("sum", T::f32, f32(0.0)),
      loop("j", i32(0), min(n, i32(8)), {assign("sum", sum + cast(T::f32, j) * floats)}, 2),
      branch(positive && (tests || equalities),
             {store(y, i, select(eq(u % u32(2), u32(0)), sum, cast(T::f32, ints)))},
             {store(y, i, cast(T::f32, cast(T::i32, cast(T::u32, abs(a)))) + cast(T::f32, positive))}),
      store(total, i, load(total, i, T::f32) + sum),
  };
  return kernel;
}

// Workgroup constructs: shared arrays of each element type, local and
// workgroup indices, and barriers (at the top level and in a loop with
// uniform bounds), as a per-workgroup prefix sum.
kiln::kir::Kernel workgroup_construct_kernel() {
  using namespace kiln::kir;
  using T = ScalarType;
  Kernel kernel("workgroup_construct");
  const Buf x = kernel.add_buffer("x", T::f32, Access::read);
  const Buf y = kernel.add_buffer("y", T::f32, Access::write);
  const Buf groups = kernel.add_buffer("groups", T::i32, Access::write);
  const Shared sums = kernel.add_shared("sums", T::f32, 128);
  const Shared ids = kernel.add_shared("ids", T::i32, 128);
  const Shared flags = kernel.add_shared("flags", T::u32, 1);
  kernel.global_size = 1024;
  kernel.workgroup_size = 128;
  const Expr lid = local_index();
  const Expr offset = var("offset", T::i32);
  kernel.body = {
      store(sums, lid, load(x, global_index(), T::f32)),
      store(ids, lid, workgroup_index()),
      branch(eq(lid, i32(0)), {store(flags, i32(0), u32(1))}),
      barrier(),
      declare("offset", T::i32, i32(1)),
      loop("round", i32(0), i32(7),
           {declare("add", T::f32, select(lid >= offset, load(sums, max(lid - offset, i32(0)), T::f32), f32(0.0))),
            barrier(), store(sums, lid, load(sums, lid, T::f32) + var("add", T::f32)), barrier(),
            assign("offset", offset * i32(2))}),
      store(y, global_index(), load(sums, lid, T::f32) * cast(T::f32, load(flags, i32(0), T::u32))),
      store(groups, global_index(), load(ids, lid, T::i32)),
  };
  return kernel;
}

// Subgroup operations and texel buffers: lane and subgroup indices, a
// broadcast of each type, inside a uniform loop; texel loads of both widths
// (scalar, component and vec4), as the subgroup GEMM uses them. 64
// invocations: whole wavefronts on gfx90a, whole warps on NVIDIA.
kiln::kir::Kernel subgroup_construct_kernel() {
  using namespace kiln::kir;
  using T = ScalarType;
  Kernel kernel("subgroup_construct");
  const Buf t1 = kernel.add_texel_buffer("t1", 1);
  const Buf t4 = kernel.add_texel_buffer("t4", 4);
  const Buf y = kernel.add_buffer("y", T::f32, Access::write);
  const Buf ids = kernel.add_buffer("ids", T::i32, Access::write);
  kernel.global_size = 256;
  kernel.workgroup_size = 64;
  kernel.subgroup_size = 8;
  const Expr i = global_index();
  const Expr w = var("w", T::f32);
  kernel.body = {
      load_vector({"q0", "q1", "q2", "q3"}, t4, i, T::f32),
      declare("w", T::f32, load(t1, i, T::f32) + var("q2", T::f32) + load(t4, i * i32(4) + i32(3), T::f32)),
      loop("r", i32(0), i32(4), {assign("w", w + subgroup_broadcast(w, 5))}),
      store(y, i, w),
      store(ids, i,
            subgroup_id() * i32(8) + subgroup_broadcast(subgroup_lane(), 7) +
                cast(T::i32, subgroup_broadcast(cast(T::u32, i), 0))),
  };
  return kernel;
}

// "184 binaries = 46 kernels x 2 cuda targets (compute_80, sm_90) + ... in 36.43 s"
std::string summary_line(const JobQueue& queue, int compiled, double seconds) {
  std::ostringstream line;
  line << "codegen_compile: " << compiled << " binaries =";
  const char* separator = " ";
  std::map<const Backend*, std::vector<std::string>> archs;
  std::vector<const Backend*> order;
  for (const kiln::testing::OfflineTarget& t : queue.targets()) {
    if (!archs.count(t.backend)) order.push_back(t.backend);
    archs[t.backend].push_back(t.target.arch);
  }
  for (const Backend* backend : order) {
    const std::vector<std::string>& list = archs[backend];
    line << separator << queue.sources(backend->name()) << " kernels x " << list.size() << " " << backend->name()
         << " targets (";
    for (std::size_t i = 0; i < list.size(); ++i) line << (i ? ", " : "") << list[i];
    line << ")";
    separator = " + ";
  }
  line << ", compiled in " << std::fixed << std::setprecision(2) << seconds << " s";
  return line.str();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(codegen_compile)

BOOST_AUTO_TEST_CASE(every_op_case_kernel_compiles_for_every_offline_target, *boost::unit_test::label("offline_targets")) {
  const auto start = std::chrono::steady_clock::now();
  JobQueue queue;
  int lowered = 0;
  const std::vector<kiln::testing::OpCase> cases = kiln::testing::make_op_cases();
  BOOST_TEST_REQUIRE(!cases.empty());
  for (const kiln::testing::OpCase& op_case : cases) {
    const kiln::graph::Graph& graph = kiln::internal::graph(op_case.model);
    lowered += queue_graph_kernels(graph, op_case.name, queue);
    try {
      // As for a CPU device: the superset of layouts (packed MatMul weights too).
      kiln::backend::TargetDesc cpu_class;
      cpu_class.cpu_cores = true;
      const kiln::graph::passes::PipelineResult compiled =
          kiln::graph::passes::run_compile_passes(graph, kiln::lower::target_policy(cpu_class).pass_options({}));
      lowered += queue_graph_kernels(compiled.graph, op_case.name + " (after compile passes)", queue);
    } catch (const Error& error) {
      BOOST_ERROR(op_case.name << ": the compile passes failed: " << error.what());
    }
  }
  BOOST_TEST(lowered > static_cast<int>(cases.size()));  // most cases lower to at least one kernel
  BOOST_TEST_REQUIRE(!queue.jobs().empty());

  const std::vector<CompileJob>& jobs = queue.jobs();
  const int compiled = compile_all(jobs);
  BOOST_TEST(compiled == static_cast<int>(jobs.size()));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const char* part = std::getenv("KILN_OFFLINE_PART");
  std::cout << summary_line(queue, compiled, seconds) << " (" << lowered << " kernels lowered from " << cases.size()
            << " op cases, before and after the compile passes" << (part ? std::string("; part ") + part : "") << ")"
            << std::endl;
}

BOOST_AUTO_TEST_CASE(every_kernel_ir_construct_compiles_for_every_offline_target) {
  const kiln::kir::Kernel kernel = every_construct_kernel();
  kiln::kir::verify(kernel);
  JobQueue queue;
  queue.add(kernel, "every_construct");
  for (const auto& t : queue.targets()) BOOST_TEST(queue.sources(t.backend->name()) == 1);
  BOOST_TEST(queue.jobs().size() == queue.targets().size());
  BOOST_TEST(compile_all(queue.jobs()) == static_cast<int>(queue.targets().size()));
}

BOOST_AUTO_TEST_CASE(workgroup_constructs_compile_for_every_offline_target) {
  const kiln::kir::Kernel kernel = workgroup_construct_kernel();
  kiln::kir::verify(kernel);
  JobQueue queue;
  queue.add(kernel, "workgroup_construct");
  for (const Backend* backend : codegen_backends()) {
    BOOST_TEST(queue.sources(backend->name()) == 1);
    const std::string text = kiln::render::render(kernel, backend->language());
    BOOST_TEST(contains(text, "__shared__ float s_sums[128];"));
    BOOST_TEST(contains(text, "__syncthreads();"));
    BOOST_TEST(contains(text, "if (kiln_group >= 8) return;"));  // whole workgroups leave, never part of one
  }
  BOOST_TEST(queue.jobs().size() == queue.targets().size());
  BOOST_TEST(compile_all(queue.jobs()) == static_cast<int>(queue.targets().size()));
  // GLSL and C99 spell the same constructs their own way.
  const std::string glsl = kiln::render::render(kernel, kiln::backend::get_backend("vulkan").language());
  BOOST_TEST(contains(glsl, "\nshared float s_sums[128];\nshared int s_ids[128];\nshared uint s_flags[1];\n"));
  BOOST_TEST(contains(glsl, "memoryBarrierShared(); barrier();"));
  BOOST_TEST(contains(glsl, "int kiln_lid = int(gl_LocalInvocationIndex);"));
  BOOST_TEST(contains(glsl, "int kiln_group = int(gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x);"));
  const std::string c99 = kiln::render::render(kernel, kiln::backend::get_backend("null").language());
  BOOST_TEST(contains(c99, "float* restrict s_sums, int32_t* restrict s_ids, uint32_t* restrict s_flags, "));
  BOOST_TEST(contains(c99, "void kiln_barrier(void);"));
  BOOST_TEST(contains(c99, "    kiln_barrier();\n"));
}

// A GEMM whose shared tiles take `knobs` (128 x 128 blocks: 300 x 260 x 200).
kiln::kir::Kernel shared_gemm_kernel(const std::string& knobs) {
  kiln::kir::Kernel kernel("gemm_shared_" + knobs);
  kiln::shaders::GemmProblem p;
  p.m = 300, p.n = 260, p.k = 200;
  p.a_row_stride = 200, p.a_k_stride = 1, p.b_k_stride = 260, p.b_col_stride = 1, p.y_row_stride = 260;
  p.a = kernel.add_buffer("a", kiln::kir::ScalarType::f32, kiln::kir::Access::read);
  p.b = kernel.add_buffer("b", kiln::kir::ScalarType::f32, kiln::kir::Access::read);
  p.y = kernel.add_buffer("y", kiln::kir::ScalarType::f32, kiln::kir::Access::write);
  kiln::shaders::build_gemm(kernel, p, kiln::shaders::parse_gemm_knobs(knobs));
  return kernel;
}

// Shared memory past CUDA's static 48 KiB (a 128 x 128 block with
// double-buffered K tiles of 32: 64 KiB): the CUDA source declares it as one
// dynamic array with each shared array a view into it, and its KernelSource
// says how many bytes (what loading opts in to and each launch passes);
// HIP, whose static limit is the LDS itself, declares it statically. Only
// targets that give a block that much take the kernel; NVRTC compiles it.
BOOST_AUTO_TEST_CASE(shared_memory_past_48_kib_is_dynamic_on_cuda) {
  const kiln::kir::Kernel deep = shared_gemm_kernel("8x8_k1_p1_wg256_v4_s32_st2");
  BOOST_TEST(kiln::kir::shared_memory_bytes(deep) == 65536u);
  const Backend& cuda = kiln::backend::get_backend("cuda");
  const KernelSource source = kiln::render::make_kernel_source(deep, cuda.language());
  BOOST_TEST(source.dynamic_shared_bytes == 65536u);
  BOOST_TEST(contains(source.text, "extern __shared__ __align__(16) unsigned char kiln_shared[];"), source.text);
  BOOST_TEST(contains(source.text, "float* s_tiles = reinterpret_cast<float*>(kiln_shared + 0);"));
  BOOST_TEST(!contains(source.text, "__shared__ float s_tiles["));
  const KernelSource hip = kiln::render::make_kernel_source(deep, kiln::backend::get_backend("hip").language());
  BOOST_TEST(hip.dynamic_shared_bytes == 0u);
  BOOST_TEST(contains(hip.text, "__shared__ float s_tiles[16384];"));
  // Within 48 KiB, static as before.
  const KernelSource shallow =
      kiln::render::make_kernel_source(shared_gemm_kernel("8x8_k1_p1_wg256_v4_s8_st2"), cuda.language());
  BOOST_TEST(shallow.dynamic_shared_bytes == 0u);
  BOOST_TEST(contains(shallow.text, "__shared__ float s_tiles[4096];"));
  // A .kiln file or plan-cache entry keeps the bytes; one from before them has none.
  BOOST_TEST(kiln::artifact::decode_source(kiln::artifact::encode_source(source)).dynamic_shared_bytes == 65536u);
  nlohmann::json old = kiln::artifact::encode_source(shallow);
  old.erase("dynamic_shared_bytes");
  BOOST_TEST(kiln::artifact::decode_source(old).dynamic_shared_bytes == 0u);

  // Hopper's CUBIN target lets a block have 227 KiB; PTX, compiled again for
  // whatever GPU loads it, keeps the static 48 KiB.
  const kiln::backend::KernelRequirements needs = kiln::render::kernel_requirements(deep);
  int compiled = 0;
  for (const TargetDesc& target : cuda.offline_targets()) {
    BOOST_TEST_CONTEXT(target.arch) {
      const bool cubin = target.arch.rfind("sm_", 0) == 0;
      BOOST_TEST(target.max_shared_memory_bytes == (target.arch == "sm_90" ? 227u : 48u) * 1024u);
      const std::optional<std::string> refusal = cuda.supports(needs, target);
      BOOST_TEST(refusal.has_value() == !cubin);
      if (refusal) {
        BOOST_TEST(contains(*refusal, "shared memory"), *refusal);
        continue;
      }
      try {
        const kiln::backend::KernelBinary binary = cuda.compiler().compile(source, target);
        BOOST_TEST(!binary.data.empty());
        ++compiled;
      } catch (const kiln::Error& e) {
        // NVRTC is opened at run time: without it there is nothing to compile with.
        BOOST_REQUIRE_MESSAGE(e.kind() == kiln::ErrorKind::Unsupported, e.what());
      }
    }
  }
  BOOST_TEST_MESSAGE("compiled the 64 KiB kernel for " << compiled << " CUDA target(s)");
}

BOOST_AUTO_TEST_CASE(subgroup_and_texel_constructs_compile_for_every_offline_target) {
  const kiln::kir::Kernel kernel = subgroup_construct_kernel();
  kiln::kir::verify(kernel);
  JobQueue queue;
  queue.add(kernel, "subgroup_construct", Refusals::skip);
  for (const Backend* backend : codegen_backends()) {
    BOOST_TEST(queue.sources(backend->name()) == 1);
    const std::string text = kiln::render::render(kernel, backend->language());
    BOOST_TEST(contains(text, "__ldg(&reinterpret_cast<const float4*>(b_t4)[kiln_gid])"));
    BOOST_TEST(contains(text, "const float* __restrict__ b_t1"));
    BOOST_TEST(contains(text, backend->name() == "cuda" ? "__shfl_sync(0xffffffffu, v_w, 5, 8)" : "__shfl(v_w, 5, 8)"));
    // A subgroup of 8 is a slice of a warp or wavefront; blocks must be whole ones.
    kiln::backend::KernelRequirements ragged = kiln::render::kernel_requirements(kernel);
    ragged.workgroup_size = 48;
    for (const TargetDesc& target : backend->offline_targets()) {
      const auto refusal = backend->supports(ragged, target);
      BOOST_TEST_REQUIRE(refusal.has_value());
      BOOST_TEST(refusal->find("not whole subgroups") != std::string::npos, *refusal);
    }
  }
  // Targets with subgroups take it (every CUDA and HIP one); the others refuse.
  for (const Backend* backend : codegen_backends())
    for (const TargetDesc& target : backend->offline_targets())
      BOOST_TEST(std::any_of(queue.jobs().begin(), queue.jobs().end(),
                             [&](const CompileJob& job) { return job.target.arch == target.arch; }),
                 target.arch << " took no subgroup kernel");
  BOOST_TEST(compile_all(queue.jobs()) == static_cast<int>(queue.jobs().size()));
}

// f16 and bf16 buffers (kir storage types): scalar and vector loads and
// stores, which widen to and round from f32 in each language's spelling.
BOOST_AUTO_TEST_CASE(sixteen_bit_storage_compiles_for_every_offline_target) {
  using namespace kiln::kir;
  using T = ScalarType;
  Kernel kernel("storage16_construct");
  const Buf halves = kernel.add_buffer("halves", T::f16, Access::read);
  const Buf brains = kernel.add_buffer("brains", T::bf16, Access::read_write);
  const Buf out = kernel.add_buffer("out", T::f16, Access::write);
  kernel.global_size = 256;
  const Expr i = global_index();
  kernel.body = {
      load_vector({"a0", "a1", "a2", "a3"}, halves, i, T::f32),
      declare("b", T::f32, load(brains, i, T::f32)),
      store(brains, i, var("b", T::f32) * var("a0", T::f32)),
      store_vector(out, i, {var("a3", T::f32), var("a2", T::f32), var("a1", T::f32), var("b", T::f32)}),
  };
  verify(kernel);
  // The minimal Vulkan 1.1 target has no 16-bit storage (its nodes run on
  // the host); lavapipe compiles and runs the GLSL (backend_conformance).
  JobQueue queue;
  queue.add(kernel, "storage16_construct", Refusals::capability);
  for (const Backend* backend : codegen_backends()) {
    BOOST_TEST(queue.sources(backend->name()) == 1);
    const std::string text = kiln::render::render(kernel, backend->language());
    if (backend->name() == "cuda") {
      BOOST_TEST(contains(text, "cvt.rn.f16.f32"), text);
      BOOST_TEST(contains(text, " = make_ushort4(kiln_f32_to_f16("), text);  // one vector store
    }
    if (backend->name() == "hip") BOOST_TEST(contains(text, "const _Float16* __restrict__ b_halves"), text);
    BOOST_TEST(contains(text, "kiln_f32_to_bf16("), text);
  }
  const std::string glsl = kiln::render::render(kernel, kiln::backend::get_backend("vulkan").language());
  BOOST_TEST(contains(glsl, " = u16vec4(uvec4(kiln_f32_to_f16("), glsl);
  BOOST_TEST(queue.jobs().size() + static_cast<std::size_t>(queue.refused()) == queue.targets().size());
  BOOST_TEST(queue.refused() <= 1);
  BOOST_TEST(compile_all(queue.jobs()) == static_cast<int>(queue.jobs().size()));
}

// Where a target converts f16 natively (TargetDesc::f16_conversion), the
// GLSL keeps f16 elements as float16_t, reads and writes them as f16vec4,
// and its SPIR-V asks for kir's rule: RoundingModeRTE for 16-bit floats, and
// DenormPreserve where the device promises it (`native`). lavapipe runs the
// native-rte spelling (the *_native_f16 tests); this checks what it cannot.
BOOST_AUTO_TEST_CASE(native_f16_conversions_ask_for_exact_rounding) {
  using namespace kiln::kir;
  using T = ScalarType;
  Kernel kernel("native_f16");
  const Buf halves = kernel.add_buffer("halves", T::f16, Access::read);
  const Buf out = kernel.add_buffer("out", T::f16, Access::write);
  kernel.global_size = 256;
  const Expr i = global_index();
  kernel.body = {
      load_vector({"a0", "a1", "a2", "a3"}, halves, i, T::f32),
      store_vector(out, i, {var("a3", T::f32), var("a2", T::f32), var("a1", T::f32), var("a0", T::f32)}),
      store(out, i + i32(1024), load(halves, i, T::f32) * f32(2.0)),
  };
  verify(kernel);
  const Backend& vulkan = kiln::backend::get_backend("vulkan");
  // OpExecutionMode (opcode 16, four words): entry point, mode, bit width.
  auto has_mode = [](const kiln::backend::KernelBinary& binary, std::uint32_t mode) {
    std::vector<std::uint32_t> words(binary.data.size() / 4);
    std::memcpy(words.data(), binary.data.data(), words.size() * 4);
    for (std::size_t w = 5; w + 3 < words.size(); w += std::max<std::size_t>(1, words[w] >> 16))
      if (words[w] == ((4u << 16) | 16u) && words[w + 2] == mode && words[w + 3] == 16u) return true;
    return false;
  };
  constexpr std::uint32_t kRoundingModeRTE = 4462, kDenormPreserve = 4459;
  for (const F16Conversion conversion : {F16Conversion::integer, F16Conversion::native, F16Conversion::native_rte}) {
    BOOST_TEST_CONTEXT(kiln::backend::f16_conversion_name(conversion)) {
      TargetDesc target = vulkan.offline_targets().front();
      target.storage16 = true;
      target.f16_conversion = conversion;
      const kiln::backend::KernelSource source =
          kiln::render::make_kernel_source(kernel, vulkan.language_for(target));
      const bool native = conversion != F16Conversion::integer;
      BOOST_TEST(contains(source.text, "{ float16_t data[]; } b_halves;") == native, source.text);
      BOOST_TEST(contains(source.text, "{ f16vec4 data[]; }") == native, source.text);
      BOOST_TEST(contains(source.text, "= f16vec4(vec4(") == native, source.text);
      BOOST_TEST(contains(source.text, "= uint16_t(kiln_f32_to_f16(") == !native, source.text);
      BOOST_TEST(contains(source.text, "= float16_t(") == native, source.text);
      const kiln::backend::KernelBinary binary = vulkan.compiler().compile(source, target);
      BOOST_TEST(has_mode(binary, kRoundingModeRTE) == native);
      BOOST_TEST(has_mode(binary, kDenormPreserve) == (conversion == F16Conversion::native));
    }
  }
}

// f16 arithmetic (kir f16 values): GLSL computes in float16_t with the
// explicit-arithmetic extension (a Vulkan device with shaderFloat16), HIP in
// _Float16, CUDA and C99 in f32 rounded after every op (no f16 type without
// cuda_fp16.h); functions and min/max run in f32 and round once everywhere.
// Every offline compiler takes the kernel (the SPIR-V one for a target with
// fp16 and 16-bit storage).
BOOST_AUTO_TEST_CASE(f16_arithmetic_compiles_for_every_offline_target) {
  using namespace kiln::kir;
  using T = ScalarType;
  Kernel kernel("f16_arithmetic");
  const Buf a = kernel.add_buffer("a", T::f16, Access::read);
  const Buf b = kernel.add_buffer("b", T::f16, Access::read);
  const Buf out = kernel.add_buffer("out", T::f16, Access::write);
  const Buf wide = kernel.add_buffer("wide", T::f32, Access::write);
  kernel.global_size = 256;
  const Expr i = global_index();
  const Expr ha = cast(T::f16, load(a, i, T::f32)), hb = cast(T::f16, load(b, i, T::f32));
  kernel.body = {
      store(out, i, cast(T::f32, select(ha < hb, ha * hb - ha / hb, -max(ha, hb)))),
      store(out, i + i32(256), cast(T::f32, tanh(ha) + exp(abs(hb)) + min(ha, cast(T::f16, f32(0.5))))),
      store(wide, i, cast(T::f32, sqrt(ha * ha + hb * hb))),
  };
  verify(kernel);
  BOOST_TEST(kiln::render::kernel_requirements(kernel).fp16);
  JobQueue queue;
  queue.add(kernel, "f16_arithmetic", Refusals::capability);
  for (const Backend* backend : codegen_backends()) {
    const std::string text = kiln::render::render(kernel, backend->language());
    if (backend->name() == "cuda") BOOST_TEST(contains(text, "kiln_f16_to_f32(kiln_f32_to_f16(("), text);
    if (backend->name() == "hip") {
      BOOST_TEST(contains(text, "))) * ((_Float16)("), text);  // a native f16 product
      BOOST_TEST(contains(text, "((_Float16)(tanhf(((float)("), text);
    }
  }
  BOOST_TEST(compile_all(queue.jobs()) == static_cast<int>(queue.jobs().size()));
  const Backend& vulkan = kiln::backend::get_backend("vulkan");
  TargetDesc target = vulkan.offline_targets().front();
  target.storage16 = true;
  target.fp16 = true;
  const kiln::backend::KernelSource source = kiln::render::make_kernel_source(kernel, vulkan.language_for(target));
  BOOST_TEST(contains(source.text, "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require"), source.text);
  BOOST_TEST(contains(source.text, "float16_t("), source.text);
  BOOST_TEST(!vulkan.compiler().compile(source, target).data.empty());
  // A device without f16 arithmetic refuses the kernel with the reason.
  target.fp16 = false;
  const auto why = vulkan.supports(kiln::render::kernel_requirements(kernel), target);
  BOOST_TEST_REQUIRE(why.has_value());
  BOOST_TEST(contains(*why, "fp16 arithmetic"), *why);
}

// Matrix fragments held by one lane (the emulation): every language renders
// the loops, every offline compiler takes them (f16 and bf16 inputs round
// through 16-bit conversions, so the minimal Vulkan target refuses those).
// Fragments in subgroups of more lanes need matrix instructions, which no
// language renders yet: a clear error.
BOOST_AUTO_TEST_CASE(emulated_matrix_fragments_compile_for_every_offline_target) {
  using kiln::kir::MatrixPrecision;
  JobQueue queue;
  for (const MatrixPrecision precision : {MatrixPrecision::tf32, MatrixPrecision::f16, MatrixPrecision::bf16}) {
    const kiln::kir::Kernel kernel = kiln::test::fragment_gemm(40, 56, 20, 1, 4, precision);
    queue.add(kernel, std::string("fragment_gemm_") + kiln::kir::matrix_precision_name(precision), Refusals::capability);
    for (const Backend* backend : codegen_backends()) {
      const std::string text = kiln::render::render(kernel, backend->language());
      BOOST_TEST(contains(text, "kiln_frag_acc[256];"), text);
      if (precision == MatrixPrecision::tf32) BOOST_TEST(contains(text, "0xffffe000u"), text);
    }
  }
  BOOST_TEST(queue.jobs().size() + static_cast<std::size_t>(queue.refused()) == 3 * queue.targets().size());
  BOOST_TEST(queue.refused() <= 2);
  BOOST_TEST(compile_all(queue.jobs()) == static_cast<int>(queue.jobs().size()));
  // 16x16x8 is no instruction's shape: fragments of it in 32 lanes are a clear error.
  const kiln::kir::Kernel warp = kiln::test::fragment_gemm(16, 16, 8, 32, 32, MatrixPrecision::tf32);
  for (const Backend* backend : codegen_backends()) {
    try {
      kiln::render::render(warp, backend->language());
      BOOST_ERROR(backend->name() << " rendered 16x16x8 fragments in subgroups of 32");
    } catch (const Error& e) {
      BOOST_TEST(contains(e.what(), "has no matrix instruction for it"), e.what());
    }
  }
}

// Every matrix instruction's layouts put each element of a tile in exactly
// one lane's element, agree with the vendors' documentation at a few
// places, and lay out the accumulators of one shape alike (the renderer
// takes any of them for an accumulator). Whether the hardware agrees only a
// GPU can tell: backend_conformance runs the fragment GEMM there.
BOOST_AUTO_TEST_CASE(matrix_instruction_layouts_cover_each_tile_once) {
  using kiln::backend::FragmentLayout;
  using kiln::backend::MatrixInstruction;
  using kiln::backend::matrix_shape_name;
  // (row, col) of element e of lane `lane`.
  auto at = [](const MatrixInstruction& ins, const FragmentLayout& l, std::uint32_t lane, std::size_t e) {
    const std::uint32_t lo = lane & ((1u << ins.lane_bits) - 1), hi = lane >> ins.lane_bits;
    return std::pair{l.row_hi * hi + l.row_lo * lo + l.row[e], l.col_hi * hi + l.col_lo * lo + l.col[e]};
  };
  int instructions = 0;
  for (const Backend* backend : kiln::backend::all_backends()) {
    const auto& table = backend->language().matrix_instructions;
    for (const MatrixInstruction& ins : table) {
      ++instructions;
      const auto& shape = ins.shape;
      BOOST_TEST_CONTEXT(backend->name() << " " << matrix_shape_name(shape)) {
        BOOST_TEST((1u << ins.lane_bits) <= shape.lanes);
        const std::pair<const FragmentLayout*, std::pair<std::uint32_t, std::uint32_t>> tiles[] = {
            {&ins.a, {shape.m, shape.k}}, {&ins.b, {shape.k, shape.n}}, {&ins.accumulator, {shape.m, shape.n}}};
        for (const auto& [layout, rows_cols] : tiles) {
          const auto [rows, cols] = rows_cols;
          BOOST_TEST_REQUIRE(layout->row.size() == layout->col.size());
          BOOST_TEST(layout->row.size() * shape.lanes == static_cast<std::size_t>(rows) * cols);
          std::vector<int> held(static_cast<std::size_t>(rows) * cols, 0);
          for (std::uint32_t lane = 0; lane < shape.lanes; ++lane)
            for (std::size_t e = 0; e < layout->row.size(); ++e) {
              const auto [r, c] = at(ins, *layout, lane, e);
              BOOST_TEST_REQUIRE((r < rows && c < cols), "lane " << lane << " element " << e << " at " << r << ", " << c);
              ++held[static_cast<std::size_t>(r) * cols + c];
            }
          BOOST_TEST(std::count(held.begin(), held.end(), 1) == static_cast<std::ptrdiff_t>(held.size()));
        }
        for (const MatrixInstruction& other : table)
          if (other.shape.m == shape.m && other.shape.n == shape.n && other.shape.k == shape.k &&
              other.shape.lanes == shape.lanes) {
            BOOST_TEST(other.accumulator.row == ins.accumulator.row);
            BOOST_TEST(other.accumulator.col == ins.accumulator.col);
          }
      }
    }
    if (backend->name() == "cuda") {
      // The PTX ISA's figures: tf32 m16n8k8 a3 of lane 6 (groupID 1,
      // threadID_in_group 2) is row 9, column 6; f16 m16n8k16 a5 of lane 6
      // is row 1, column 13, b2 row 12, column 1; c3 row 9, column 5.
      BOOST_TEST_REQUIRE(table.size() == 3u);
      BOOST_TEST((at(table[0], table[0].a, 6, 3) == std::pair<std::uint32_t, std::uint32_t>{9, 6}));
      BOOST_TEST((at(table[0], table[0].b, 6, 1) == std::pair<std::uint32_t, std::uint32_t>{6, 1}));
      BOOST_TEST((at(table[1], table[1].a, 6, 5) == std::pair<std::uint32_t, std::uint32_t>{1, 13}));
      BOOST_TEST((at(table[1], table[1].b, 6, 2) == std::pair<std::uint32_t, std::uint32_t>{12, 1}));
      BOOST_TEST((at(table[1], table[1].accumulator, 6, 3) == std::pair<std::uint32_t, std::uint32_t>{9, 5}));
    }
    if (backend->name() == "hip") {
      // AMD's matrix instruction calculator, 16x16x16 f16: A[i][k] is lane
      // i + 16 * (k / 4), item k % 4; D[i][j] lane j + 16 * (i / 4), item i % 4.
      BOOST_TEST_REQUIRE(table.size() == 3u);
      BOOST_TEST((at(table[1], table[1].a, 3 + 16 * 2, 1) == std::pair<std::uint32_t, std::uint32_t>{3, 9}));
      BOOST_TEST((at(table[1], table[1].accumulator, 5 + 16 * 3, 2) == std::pair<std::uint32_t, std::uint32_t>{14, 5}));
      BOOST_TEST((at(table[0], table[0].b, 7 + 16 * 3, 0) == std::pair<std::uint32_t, std::uint32_t>{3, 7}));
    }
  }
  if (codegen_backends().empty()) BOOST_TEST_MESSAGE("no CUDA or HIP backend built: no matrix instructions to check");
  BOOST_TEST(instructions == 3 * static_cast<int>(codegen_backends().size()));
}

// The disassembly of an AMDGPU code object (llvm-objdump of LLVM 15, which
// the sanitizer build's clang brings; empty when it is not installed).
std::string amdgpu_disassembly(const KernelBinary& binary, const std::string& arch) {
  const char* tools[] = {"llvm-objdump-15", "llvm-objdump"};
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("kiln-mfma-" + std::to_string(::getpid()) + "-" + arch + ".hsaco")).string();
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(binary.data.data()), static_cast<std::streamsize>(binary.data.size()));
  }
  std::string text;
  for (const char* tool : tools) {
    const std::string command = std::string(tool) + " -d --mcpu=" + arch + " " + path + " 2>/dev/null";
    FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr) continue;
    char chunk[4096];
    for (std::size_t got; (got = std::fread(chunk, 1, sizeof chunk, pipe)) > 0;) text.append(chunk, got);
    if (::pclose(pipe) == 0 && !text.empty()) break;
    text.clear();
  }
  std::filesystem::remove(path);
  return text;
}

// Fragments in whole warps and wavefronts: each instruction's GEMM renders
// with its helpers and compiles (NVRTC CUBIN for sm_80 and sm_90; hiprtc for
// gfx90a, whose code object holds the MFMA instruction); targets without the
// shape (RDNA's gfx1030; any target with its shapes removed) refuse the
// kernel, naming the shape. KILN_NVDISASM (PyPI's
// nvidia-cuda-nvdisasm; the toolkit here has none) adds the check that the
// CUBINs hold tensor-core (HMMA) instructions.
BOOST_AUTO_TEST_CASE(matrix_instructions_compile_for_their_targets) {
  using kiln::kir::MatrixPrecision;
  int compiled = 0;
  for (const Backend* backend : codegen_backends()) {
    std::vector<TargetDesc> with_units, without_units;
    for (const TargetDesc& t : backend->offline_targets()) (t.matrix_shapes.empty() ? without_units : with_units).push_back(t);
    if (backend->name() == "cuda") {
      TargetDesc sm80 = with_units.back();  // sm_90's record, for an sm_80 CUBIN
      sm80.arch = "sm_80";
      with_units.push_back(sm80);
    }
    BOOST_TEST_REQUIRE(!with_units.empty());
    for (const auto& ins : backend->language().matrix_instructions) {
      const auto& shape = ins.shape;
      const MatrixPrecision precision = kiln::kir::matrix_precision_of(shape.inputs).value();
      BOOST_TEST_CONTEXT(backend->name() << " " << kiln::backend::matrix_shape_name(shape)) {
        // Two subgroups per workgroup, edge tiles in both directions.
        const int m = static_cast<int>(shape.m) * 2 - 3, n = static_cast<int>(shape.n) * 3 - 1;
        const kiln::kir::Kernel kernel = kiln::test::fragment_gemm(
            m, n, static_cast<int>(shape.k) * 3, shape.lanes, shape.lanes * 2, precision, kiln::kir::ScalarType::f32,
            {shape.m, shape.n, shape.k});
        const KernelSource source = kiln::render::make_kernel_source(kernel, backend->language());
        BOOST_TEST(contains(source.text, ins.call.substr(0, ins.call.find('('))), source.text);
        const auto requirements = kiln::render::kernel_requirements(kernel);
        for (const TargetDesc& target : with_units) {
          BOOST_TEST_CONTEXT(target.arch) {
            const auto refusal = backend->supports(requirements, target);
            BOOST_TEST(!refusal, refusal.value_or(""));
            TargetDesc bare = target;
            bare.matrix_shapes.clear();
            const auto bare_refusal = backend->supports(requirements, bare);
            BOOST_TEST((bare_refusal && contains(*bare_refusal, "has no instruction for")), bare_refusal.value_or("none"));
            const KernelBinary binary = backend->compiler().compile(source, target);
            BOOST_TEST(!binary_problem(backend->compiler(), source, target, binary));
            ++compiled;
            if (binary.format == "hsaco") {
              const std::string text = amdgpu_disassembly(binary, target.arch);
              if (text.empty())
                BOOST_TEST_MESSAGE("llvm-objdump not found: MFMA instructions not checked");
              else
                BOOST_TEST(contains(text, "v_mfma_f32_16x16x"), "no v_mfma in the code object for " << target.arch);
            }
            const char* nvdisasm = std::getenv("KILN_NVDISASM");
            if (binary.format == "cubin" && nvdisasm != nullptr && *nvdisasm != '\0') {
              const std::string path = (std::filesystem::temp_directory_path() /
                                        ("kiln-hmma-" + std::to_string(::getpid()) + ".cubin")).string();
              std::ofstream(path, std::ios::binary)
                  .write(reinterpret_cast<const char*>(binary.data.data()), static_cast<std::streamsize>(binary.data.size()));
              FILE* pipe = ::popen((std::string(nvdisasm) + " " + path).c_str(), "r");
              BOOST_TEST_REQUIRE(pipe != nullptr);
              std::string text;
              char chunk[4096];
              for (std::size_t got; (got = std::fread(chunk, 1, sizeof chunk, pipe)) > 0;) text.append(chunk, got);
              ::pclose(pipe);
              std::filesystem::remove(path);
              BOOST_TEST(contains(text, "HMMA"), "no HMMA in the CUBIN for " << target.arch);
            }
          }
        }
        for (const TargetDesc& target : without_units)
          BOOST_TEST(backend->supports(requirements, target).has_value(), target.arch << " takes the kernel");
      }
    }
  }
  BOOST_TEST(compiled == (find_codegen_backend("cuda") ? 9 : 0) + (find_codegen_backend("hip") ? 3 : 0));
}

// A model of 16-bit tensors (a MatMul with a bias and ReLU, a 1x1 and a
// strided 3x3 convolution) lowered for every offline target: where the
// target has the tensors' matrix instruction (CUDA sm_80+, gfx90a) all three
// take it, and every kernel compiles.
BOOST_AUTO_TEST_CASE(sixteen_bit_gemms_take_the_targets_matrix_units) {
  for (const kiln::DType dtype : {kiln::DType::f16, kiln::DType::bf16}) {
    BOOST_TEST_CONTEXT(kiln::dtype_name(dtype)) {
      kiln::Builder b("matrix_units");
      const auto x = b.input("x", dtype, {1, 64, 24, 24});
      auto weights = [&](const std::string& name, kiln::Shape shape) {
        std::int64_t count = 1;
        for (std::int64_t d : shape) count *= d;
        std::vector<float> values(static_cast<std::size_t>(count));
        for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.01f * static_cast<float>(i % 13) - 0.06f;
        return b.constant(name, kiln::Tensor::from_f32(shape, values).to(dtype));
      };
      const auto pointwise = b.relu(b.conv2d(x, weights("w1", {64, 64, 1, 1}), weights("b1", {64})));
      const auto strided = b.conv2d(pointwise, weights("w3", {64, 64, 3, 3}), std::nullopt,
                                    {.stride = {2, 2}, .padding = {1, 1, 1, 1}});
      const auto rows = b.input("rows", dtype, {96, 128});
      const auto product = b.relu(b.add(b.matmul(rows, weights("m", {128, 64})), weights("bias", {64})));
      const kiln::Model model = b.build({strided, product});
      JobQueue queue;
      BOOST_TEST(queue_graph_kernels(kiln::internal::graph(model), "matrix_units", queue) >= 3);
      const char* call = dtype == kiln::DType::f16 ? "_f16_16x" : "_bf16_16x";
      for (const Backend* backend : codegen_backends()) {
        bool any = false;
        for (const kiln::testing::OfflineTarget& t : queue.targets())
          any = any || (t.backend == backend && !t.target.matrix_shapes.empty());
        if (!any) continue;
        int with_units = 0;
        for (const CompileJob& job : queue.jobs())
          if (job.backend == backend && contains(job.source.text, call)) ++with_units;
        // The MatMul, the 1x1 convolution and the strided 3x3 one (an
        // implicit GEMM gathering its taps into the shared tiles).
        BOOST_TEST(with_units >= 3, backend->name() << ": " << with_units << " kernels with matrix units");
      }
      BOOST_TEST(compile_all(queue.jobs()) == static_cast<int>(queue.jobs().size()));
    }
  }
}

// An f32 model (a 1x1 convolution, a MatMul with a bias) through the compile
// passes of every offline target with TF32 matrix units: under PyTorch's
// defaults the convolution takes TF32 and the MatMul stays f32; with
// float32_matmul_precision high both take it; with conv_allow_tf32 off
// neither. Every kernel of the second compiles.
BOOST_AUTO_TEST_CASE(f32_gemms_take_tf32_where_the_precision_settings_allow) {
  kiln::Builder b("tf32");
  const auto x = b.input("x", kiln::DType::f32, {1, 64, 24, 24});
  auto weights = [&](const std::string& name, kiln::Shape shape) {
    std::int64_t count = 1;
    for (std::int64_t d : shape) count *= d;
    std::vector<float> values(static_cast<std::size_t>(count));
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.01f * static_cast<float>(i % 13) - 0.06f;
    return b.constant(name, kiln::Tensor::from_f32(shape, values));
  };
  const auto pointwise = b.relu(b.conv2d(x, weights("w1", {64, 64, 1, 1}), weights("b1", {64})));
  const auto rows = b.input("rows", kiln::DType::f32, {96, 128});
  const auto product = b.relu(b.add(b.matmul(rows, weights("m", {128, 64})), weights("bias", {64})));
  const kiln::Model model = b.build({pointwise, product});
  const kiln::Settings defaults;
  struct Case {
    kiln::Settings settings;
    int with_tf32;  // kernels with TF32 instructions per target
  };
  const Case cases[] = {{defaults, 1},
                        {defaults.with("float32_matmul_precision", "high"), 2},
                        {defaults.with("conv_allow_tf32", "off"), 0}};
  int targets = 0;
  for (const Case& c : cases) {
    JobQueue queue;
    for (const kiln::testing::OfflineTarget& t : queue.targets()) {
      const bool tf32 = std::any_of(t.target.matrix_shapes.begin(), t.target.matrix_shapes.end(),
                                    [](const kiln::backend::MatrixShape& s) { return s.inputs == "tf32"; });
      if (!tf32) continue;
      const kiln::lower::TargetPolicy policy = kiln::lower::target_policy(t.target);
      const kiln::graph::Graph graph =
          kiln::graph::passes::run_compile_passes(kiln::internal::graph(model), policy.pass_options(c.settings)).graph;
      int with_tf32 = 0;
      for (const kiln::graph::Node& node : graph.nodes()) {
        std::vector<kiln::graph::TensorType> inputs, outputs;
        for (kiln::graph::ValueId id : node.inputs)
          if (id >= 0) inputs.push_back(graph.value(id).type);
        for (kiln::graph::ValueId id : node.outputs) outputs.push_back(graph.value(id).type);
        kiln::lower::LoweredNode lowered = kiln::lower::lower_node(node, inputs, outputs, policy.lower);
        if (!lowered.kernel) continue;
        const bool uses = lowered.kernel->tuning_site &&
                          contains(lowered.kernel->tuning_site->knobs, "tf32") &&
                          contains(lowered.kernel->tuning_site->problem, "products=tf32");
        with_tf32 += uses ? 1 : 0;
        if (c.with_tf32 == 2) queue.add(*lowered.kernel, "tf32, node '" + node.name + "'", Refusals::capability, &t);
      }
      BOOST_TEST(with_tf32 == c.with_tf32,
                 t.backend->name() << " " << t.target.device_name << ": " << with_tf32 << " kernels with TF32");
      ++targets;
    }
    BOOST_TEST(compile_all(queue.jobs()) == static_cast<int>(queue.jobs().size()));
  }
  BOOST_TEST(targets >= 3 * 3);  // sm_80, sm_90 and gfx90a at least
}

// The subgroup GEMM (texel loads, vec4 A and B, a row bias) as lowering
// would build it for a target with 32-lane subgroups.
BOOST_AUTO_TEST_CASE(subgroup_gemm_compiles_for_every_offline_target) {
  using namespace kiln::kir;
  Kernel kernel("subgroup_gemm");
  kiln::shaders::GemmProblem p;
  p.m = 37, p.n = 96, p.k = 136;
  p.a_row_stride = p.k, p.a_k_stride = 1, p.b_k_stride = p.n, p.b_col_stride = 1, p.y_row_stride = p.n;
  p.a = kernel.add_buffer("a", ScalarType::f32, Access::read);
  p.b = kernel.add_buffer("b", ScalarType::f32, Access::read);
  const Buf bias = kernel.add_buffer("bias", ScalarType::f32, Access::read);
  p.y = kernel.add_buffer("y", ScalarType::f32, Access::write);
  p.epilogue = [&](Expr acc, Expr row, Expr, Expr) { return acc + load(bias, row, ScalarType::f32); };
  kiln::shaders::GemmKnobs knobs;
  knobs.tile_m = 2, knobs.tile_n = 4, knobs.k_unroll = 1, knobs.workgroup_size = 64, knobs.panel_width = 1;
  knobs.subgroup_broadcast = 32;
  knobs.texel_loads = true;
  kiln::shaders::build_gemm(kernel, p, knobs);
  BOOST_TEST(kernel.subgroup_size == 32u);
  BOOST_TEST(kernel.buffers[0].texel_width == 4u);
  JobQueue queue;
  queue.add(kernel, "subgroup_gemm", Refusals::skip);
  BOOST_TEST(queue.jobs().size() + queue.refused() == queue.targets().size());
  BOOST_TEST(compile_all(queue.jobs()) == static_cast<int>(queue.jobs().size()));
}

BOOST_AUTO_TEST_CASE(offline_targets_describe_their_architecture) {
  std::map<std::string, std::uint32_t> expected_subgroup{
      {"compute_80", 32}, {"sm_90", 32}, {"gfx90a", 64}, {"gfx1030", 32}};
  for (const Backend* backend : codegen_backends()) {
    const std::vector<TargetDesc> targets = backend->offline_targets();
    BOOST_TEST(targets.size() == 2u);
    const std::string version = backend->compiler().version();
    BOOST_TEST(version.starts_with(backend->name() == "cuda" ? "NVRTC " : "hiprtc "), version);
    for (const TargetDesc& target : targets) {
      BOOST_TEST_CONTEXT(backend->name() << " " << target.arch) {
        BOOST_TEST(target.backend == backend->name());
        BOOST_TEST(target.device_type == "offline");
        BOOST_TEST(target.offline);
        BOOST_TEST_REQUIRE(expected_subgroup.count(target.arch) == 1u);
        BOOST_TEST(target.subgroup_size == expected_subgroup[target.arch]);
        BOOST_TEST(target.max_workgroup_invocations == 1024u);
        BOOST_TEST(target.max_shared_memory_bytes >= 48u * 1024u);
        BOOST_TEST(target.fp16);
        BOOST_TEST(target.driver == version);  // the compiler version is part of the fingerprint
        BOOST_TEST(contains(target.fingerprint(), target.arch));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(broken_source_gives_internal_error_with_compiler_log) {
  for (const Backend* backend : codegen_backends()) {
    const KernelSource broken{"broken", backend->language().name,
                              "extern \"C\" __global__ void broken(float* x) {\n  x[0] = undeclared_name;\n}\n", 64, 1};
    for (const TargetDesc& target : backend->offline_targets()) {
      BOOST_TEST_CONTEXT(backend->name() << " " << target.arch) {
        const auto error = thrown_error([&] { backend->compiler().compile(broken, target); });
        BOOST_TEST_REQUIRE(error.has_value());
        BOOST_TEST(error->kind() == ErrorKind::Internal);
        const std::string message = error->what();
        BOOST_TEST(contains(message, "'broken'"), message);
        BOOST_TEST(contains(message, target.arch), message);
        BOOST_TEST(contains(message, "error"), message);                      // the compiler's log
        BOOST_TEST(contains(message, "   2 |   x[0] = undeclared_name;"), message);  // the numbered source
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(unsupported_architectures_are_refused_before_compiling) {
  const KernelSource copy{"copy", "", "extern \"C\" __global__ void copy(const float* x, float* y) { y[0] = x[0]; }",
                          64, 2};
  if (const Backend* hip = find_codegen_backend("hip")) {
    TargetDesc target = hip->offline_targets().front();
    target.arch = "gfx1100";  // hiprtc of ROCm 5.2 crashes inside comgr for it
    KernelSource source = copy;
    source.language = hip->language().name;
    const auto error = thrown_error([&] { hip->compiler().compile(source, target); });
    BOOST_TEST_REQUIRE(error.has_value());
    BOOST_TEST(error->kind() == ErrorKind::Unsupported);
    BOOST_TEST(contains(error->what(), "gfx1100"), error->what());
    BOOST_TEST(contains(error->what(), "gfx90a"), error->what());  // the supported list
  }
  if (const Backend* cuda = find_codegen_backend("cuda")) {
    KernelSource source = copy;
    source.language = cuda->language().name;
    for (const std::string arch : {"sm_20", "compute_xx", "gfx90a"}) {
      TargetDesc target = cuda->offline_targets().front();
      target.arch = arch;
      const auto error = thrown_error([&] { cuda->compiler().compile(source, target); });
      BOOST_TEST_REQUIRE(error.has_value(), arch);
      BOOST_TEST(error->kind() == ErrorKind::Unsupported, arch);
      BOOST_TEST(contains(error->what(), arch), error->what());
    }
  }
}

BOOST_AUTO_TEST_CASE(backends_without_a_device_say_why) {
  for (const Backend* backend : codegen_backends()) {
    BOOST_TEST_CONTEXT(backend->name()) {
      const auto devices = backend->enumerate_devices();
      const auto reason = backend->unavailable_reason();
      if (devices.empty()) {
        BOOST_TEST_REQUIRE(reason.has_value());
        BOOST_TEST(!reason->empty());
        std::cout << backend->name() << " unavailable: " << *reason << std::endl;
        const auto error = thrown_error([&] { backend->create_device(0); });
        BOOST_TEST_REQUIRE(error.has_value());
        BOOST_TEST(error->kind() == ErrorKind::DeviceUnavailable);
        BOOST_TEST(contains(error->what(), *reason), error->what());
      } else {
        BOOST_TEST(!reason.has_value());
        for (const auto& device : devices) BOOST_TEST(device.target.backend == backend->name());
        // Execution on these backends is a later step; code generation is not.
        const auto error = thrown_error([&] { backend->create_device(0); });
        BOOST_TEST_REQUIRE(error.has_value());
        BOOST_TEST(error->kind() == ErrorKind::Unsupported);
        const auto out_of_range = thrown_error([&] { backend->create_device(static_cast<int>(devices.size())); });
        BOOST_TEST_REQUIRE(out_of_range.has_value());
        BOOST_TEST(out_of_range->kind() == ErrorKind::NotFound);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(registry_lists_backends_in_preference_order) {
  const std::vector<std::string> order{"vulkan", "cuda", "hip", "cpu", "null"};
  std::vector<std::string> names;
  for (const Backend* backend : kiln::backend::all_backends()) names.push_back(backend->name());
  BOOST_TEST_REQUIRE(!names.empty());
  BOOST_TEST(names.back() == "null");
  BOOST_TEST(std::is_sorted(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    return std::find(order.begin(), order.end(), a) < std::find(order.begin(), order.end(), b);
  }));
  BOOST_TEST(&kiln::backend::all_backends() == &kiln::backend::all_backends());  // built once
  BOOST_TEST(&kiln::backend::get_backend("null") == kiln::backend::all_backends().back());

  const auto error = thrown_error([] { kiln::backend::get_backend("metal"); });
  BOOST_TEST_REQUIRE(error.has_value());
  BOOST_TEST(error->kind() == ErrorKind::NotFound);
  BOOST_TEST(contains(error->what(), "unknown backend 'metal'"), error->what());
  BOOST_TEST(contains(error->what(), "cuda"), error->what());
}

BOOST_AUTO_TEST_CASE(null_backend_returns_the_source_and_runs_nothing) {
  const Backend& null = kiln::backend::get_backend("null");
  BOOST_TEST(null.unavailable_reason().value_or("") ==
             "the null backend runs nothing: it is the template for new backends");
  BOOST_TEST(null.enumerate_devices().empty());
  const auto no_device = thrown_error([&] { null.create_device(0); });
  BOOST_TEST_REQUIRE(no_device.has_value());
  BOOST_TEST(no_device->kind() == ErrorKind::Unsupported);

  const std::vector<TargetDesc> targets = null.offline_targets();
  BOOST_TEST_REQUIRE(targets.size() == 1u);
  const KernelSource source{"k", null.language().name, "void k() {}\n", 64, 0};
  const KernelBinary binary = null.compiler().compile(source, targets[0]);
  BOOST_TEST(binary.format == "text");
  BOOST_TEST(std::string(reinterpret_cast<const char*>(binary.data.data()), binary.data.size()) == source.text);

  const auto empty = thrown_error([&] { null.compiler().compile({"k", null.language().name, "", 64, 0}, targets[0]); });
  BOOST_TEST_REQUIRE(empty.has_value());
  BOOST_TEST(empty->kind() == ErrorKind::Internal);
}

BOOST_AUTO_TEST_SUITE_END()

int main(int argc, char* argv[]) { return boost::unit_test::unit_test_main(&init_unit_test, argc, argv); }

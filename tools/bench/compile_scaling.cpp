// compile_scaling: compile time against graph size, for a chain of Relus and
// for stacks of small pre-LN transformer blocks (scaling_models.h). Each row
// builds the model, compiles it cold (disk cache off, Mesa's shader cache
// off) with kiln::compile + prepare(), and runs it once. Wall and CPU
// (user + system, every thread of the process) times are both reported: on a
// shared machine the CPU time is the steadier of the two.
//
//   build/tools/compile_scaling                         # 1k .. 100k nodes, both kinds
//   build/tools/compile_scaling --kinds chain --sizes 1000,10000 --markdown out.md
#include "scaling_models.h"

#include <kiln/kiln.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

using kiln::tools::bench::kTransformerBlockNodes;

// Wall and CPU seconds since construction.
class Stopwatch {
 public:
  Stopwatch() : wall_(std::chrono::steady_clock::now()), cpu_(std::clock()) {}
  double wall_s() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_).count(); }
  double cpu_s() const { return static_cast<double>(std::clock() - cpu_) / CLOCKS_PER_SEC; }

 private:
  std::chrono::steady_clock::time_point wall_;
  std::clock_t cpu_;
};

struct Row {
  std::string kind;
  std::int64_t nodes = 0;
  double build_s = 0, build_cpu_s = 0;
  double compile_s = 0, compile_cpu_s = 0;
  double first_call_ms = 0;
  int dispatches = 0;
  int kernels = 0;
};

Row measure(const std::string& kind, std::int64_t nodes, const std::string& backend) {
  Row row;
  row.kind = kind;
  const std::int64_t blocks = std::max<std::int64_t>(1, nodes / kTransformerBlockNodes);
  row.nodes = kind == "chain" ? nodes : blocks * kTransformerBlockNodes;
  Stopwatch build;
  kiln::Model model =
      kind == "chain" ? kiln::tools::bench::relu_chain(nodes) : kiln::tools::bench::transformer_stack(blocks);
  row.build_s = build.wall_s();
  row.build_cpu_s = build.cpu_s();
  const kiln::TensorSpec input = model.inputs().at(0);

  Stopwatch compile;
  kiln::CompiledModel compiled = kiln::compile(model, {.backend = backend, .cache_dir = "off"});
  compiled.prepare();
  row.compile_s = compile.wall_s();
  row.compile_cpu_s = compile.cpu_s();
  row.dispatches = compiled.stats().dispatches_per_run;
  row.kernels = compiled.stats().kernels;

  kiln::Tensor x(input.dtype, input.shape);
  for (float& v : x.values<float>()) v = 0.5f;
  compiled({x});
  row.first_call_ms = compiled.stats().last_run_ms;
  return row;
}

std::string table_header() {
  return "| graph | nodes | graph build s (CPU) | compile wall s | compile CPU s | dispatches | distinct kernels | "
         "first call ms |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
}

std::string table_row(const Row& r) {
  char line[256];
  std::snprintf(line, sizeof line, "| %s | %lld | %.2f (%.2f) | %.2f | %.2f | %d | %d | %.1f |\n", r.kind.c_str(),
                static_cast<long long>(r.nodes), r.build_s, r.build_cpu_s, r.compile_s, r.compile_cpu_s, r.dispatches,
                r.kernels, r.first_call_ms);
  return line;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"compile time against graph size (chains and transformer-shaped graphs)", "compile_scaling"};
  std::vector<std::string> kinds = {"chain", "transformer"};
  std::vector<std::int64_t> sizes = {1000, 2000, 4000, 10000, 20000, 50000, 100000};
  std::string backend = "vulkan";
  std::string markdown;
  app.add_option("--kinds", kinds, "graphs to measure: chain, transformer")
      ->delimiter(',')
      ->check(CLI::IsMember({"chain", "transformer"}));
  app.add_option("--sizes", sizes, "approximate node counts (a transformer rounds down to whole blocks)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  app.add_option("--backend", backend, "backend to compile for");
  app.add_option("--markdown", markdown, "also write the table to this file");
  CLI11_PARSE(app, argc, argv);

  // Cold compiles: Mesa's own pipeline cache would hide the driver's work.
  setenv("MESA_SHADER_CACHE_DISABLE", "true", 0);

  std::string table = table_header();
  std::cout << table << std::flush;
  try {
    for (const std::string& kind : kinds)
      for (std::int64_t nodes : sizes) {
        const std::string line = table_row(measure(kind, nodes, backend));
        std::cout << line << std::flush;
        table += line;
      }
  } catch (const kiln::Error& e) {
    std::cerr << "compile_scaling: " << e.what() << "\n";
    return e.is_user_error() ? 2 : 3;
  }
  if (!markdown.empty()) std::ofstream(markdown) << table;
  return 0;
}

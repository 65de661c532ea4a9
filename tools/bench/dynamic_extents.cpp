// dynamic_extents: what a new extent of an image model's symbolic height and
// width costs (docs/benchmarks/dynamic-dims.md). One compiled model takes
// calls at each size in turn, square images [1, C, S, S]; the first size
// compiles shape set 1, the second makes height and width dynamic (shape set
// 2, automatic_dynamic), later ones are served by that set. Per size: the
// first call's wall time and its plan, graph passes and kernels compiled;
// then the median of the next calls. The disk cache is off (every kernel a
// call needs that the process has not compiled yet is compiled). With
// --check, each size's outputs are compared with eager mode's (the largest
// absolute difference, and the run fails past 1e-3). "MiB held": the device
// memory the process holds after each size (eager's too, with --check).
//
//   build/tools/dynamic_extents yolov8n.onnx --sizes 320,256,384,416,448
//   build/tools/dynamic_extents model.onnx --backend cpu --input images
#include <kiln/kiln.h>
#include <kiln/onnx.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <optional>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {


double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"What a new extent of an image model's symbolic height and width costs"};
  std::string path, backend = "vulkan", input;
  std::vector<std::int64_t> sizes = {320, 256, 384, 416, 448};
  int calls = 3;
  bool check = false;
  app.add_option("model", path, "an ONNX file whose image input has symbolic height and width")->required();
  app.add_option("--sizes", sizes, "image sizes, in call order")->delimiter(',');
  app.add_option("--backend", backend, "vulkan, cuda, hip or cpu");
  app.add_option("--input", input, "the image input (default: the model's first input)");
  app.add_option("--calls", calls, "timed calls after the first, per size")->check(CLI::Range(1, 1000));
  app.add_flag("--check", check, "compare each size's outputs with eager mode's (fails past 1e-3)");
  CLI11_PARSE(app, argc, argv);

  try {
    const kiln::Model model = kiln::load_onnx(path);
    const std::vector<kiln::TensorSpec> specs = model.inputs();
    auto spec = specs.begin();
    if (!input.empty())
      spec = std::find_if(specs.begin(), specs.end(), [&](const kiln::TensorSpec& s) { return s.name == input; });
    if (spec == specs.end() || spec->shape.size() != 4) {
      std::fprintf(stderr, "dynamic_extents: no 4-d image input%s%s\n", input.empty() ? "" : " named ", input.c_str());
      return 2;
    }
    kiln::CompiledModel compiled = kiln::compile(model, {.backend = backend, .cache_dir = "off"});
    std::optional<kiln::EagerModel> eager;
    if (check) eager = kiln::eager(model, {.backend = backend});
    double worst = 0;
    using Clock = std::chrono::steady_clock;
    std::printf("%s on %s, input '%s', disk cache off\n", path.c_str(), backend.c_str(), spec->name.c_str());
    std::printf("%6s %10s %10s %8s %8s %9s %11s %6s %9s%s\n", "size", "first ms", "plan ms", "passes", "kernels",
                "compiled", "median ms", "sets", "MiB held", check ? "  vs eager" : "");
    for (const std::int64_t size : sizes) {
      std::vector<kiln::Tensor> inputs;
      for (const kiln::TensorSpec& s : specs) {
        kiln::Shape shape = s.shape;
        if (s.name == spec->name) shape = {1, spec->shape[1], size, size};
        kiln::Tensor t(s.dtype, shape);
        if (s.dtype == kiln::DType::f32) {
          std::uint32_t state = 12345;  // a fixed pattern in [0, 1), not a constant image
          for (float& v : t.values<float>()) {
            state = state * 1664525u + 1013904223u;
            v = static_cast<float>(state >> 8) / 16777216.0f;
          }
        }
        inputs.push_back(std::move(t));
      }
      const auto first_start = Clock::now();
      const std::vector<kiln::Tensor> outputs = compiled(inputs);
      const double first_ms = std::chrono::duration<double, std::milli>(Clock::now() - first_start).count();
      const kiln::RunStats stats = compiled.stats();
      std::vector<double> times;
      for (int i = 0; i < calls; ++i) {
        const auto start = Clock::now();
        compiled(inputs);
        times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      }
      // Device memory the process holds: the plans kept so far (the set's and
      // its latest extents'), their weights, activations and staging.
      std::uint64_t held = 0;
      for (const kiln::DeviceMemoryUse& use : kiln::device_memory_use()) held += use.bytes;
      std::printf("%6lld %10.1f %10.1f %8d %8d %9d %11.1f %6d %9.1f", static_cast<long long>(size), first_ms,
                  stats.plan_ms, stats.graph_passes_run, stats.kernels, stats.kernel_cache_misses, median(times),
                  stats.shape_sets, static_cast<double>(held) / (1 << 20));
      if (eager) {
        const std::vector<kiln::Tensor> want = (*eager)(inputs);
        double diff = 0;
        for (std::size_t o = 0; o < want.size(); ++o) {
          if (want[o].dtype() != kiln::DType::f32) continue;
          const auto a = want[o].values<float>();
          const auto b = outputs.at(o).values<float>();
          for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
            diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
        }
        worst = std::max(worst, diff);
        std::printf("  %9.2e", diff);
      }
      std::printf("\n");
    }
    if (worst > 1e-3) {
      std::fprintf(stderr, "dynamic_extents: compiled and eager differ by %.3g\n", worst);
      return 1;
    }
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "dynamic_extents: %s\n", e.what());
    return 1;
  }
}

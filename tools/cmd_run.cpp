// `kiln run`: a model on a photograph, eager and compiled, side by side.
#include "commands.h"
#include "image.h"
#include "labels.h"
#include "model_args.h"

#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <numeric>
#include <vector>

namespace kiln::tools {
namespace {

struct Timing {
  double first_ms = 0;
  double median_ms = 0;
};

template <class Fn> Timing time_calls(Fn&& call, int iters, std::vector<Tensor>& out) {
  using Clock = std::chrono::steady_clock;
  Timing t;
  auto start = Clock::now();
  out = call();
  t.first_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  std::vector<double> times;
  for (int i = 0; i < iters; ++i) {
    start = Clock::now();
    out = call();
    times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  if (!times.empty()) {
    std::sort(times.begin(), times.end());
    t.median_ms = times[times.size() / 2];
  }
  return t;
}

void print_top(const Tensor& logits, int k) {
  const auto values = logits.values<float>();
  const std::size_t classes = static_cast<std::size_t>(logits.shape().back());
  // Softmax over the first image's logits, in double for a stable sum.
  const float top = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(classes));
  double sum = 0;
  for (std::size_t i = 0; i < classes; ++i) sum += std::exp(static_cast<double>(values[i] - top));
  std::vector<std::size_t> order(classes);
  std::iota(order.begin(), order.end(), 0);
  const std::size_t shown = std::min<std::size_t>(static_cast<std::size_t>(k), classes);
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(shown), order.end(),
                    [&](std::size_t a, std::size_t b) { return values[a] > values[b]; });
  const auto& labels = imagenet_labels();
  for (std::size_t r = 0; r < shown; ++r) {
    const std::size_t c = order[r];
    const std::string label = (classes == labels.size()) ? labels[c] : "class " + std::to_string(c);
    std::printf("  %zu. %-28s (class %4zu)  p = %.4f  logit = %.4f\n", r + 1, label.c_str(), c,
                std::exp(static_cast<double>(values[c] - top)) / sum, static_cast<double>(values[c]));
  }
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "run a model on an image, eagerly and compiled; print the top classes, "
                                        "the eager/compiled difference and both timings");
  auto args = std::make_shared<ModelArgs>();
  auto image = std::make_shared<std::string>("data/images/chelsea.png");
  auto iters = std::make_shared<int>(3);
  auto top = std::make_shared<int>(5);
  args->add_to(*cmd);
  cmd->add_option("--image", *image, "an image file (PNG, JPEG, BMP, ...)")->capture_default_str();
  cmd->add_option("--iters", *iters, "timed calls after the first one (median reported)")
      ->capture_default_str()->check(CLI::Range(0, 100000));
  cmd->add_option("--top", *top, "how many classes to print")->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->callback([args, image, iters, top] {
    Model model = args->load();
    ImageInfo info;
    Tensor input = load_image_tensor(*image, args->image_size, args->batch, &info);
    const CompileOptions options = args->compile_options();

    EagerModel eager_model = eager(model, {.backend = options.backend, .device = options.device});
    CompiledModel compiled = compile(model, options);

    std::printf("kiln run: %s, batch %lld, on %s (%dx%d, %d channels) resized to %lldx%lld\n", model.name().c_str(),
                static_cast<long long>(args->batch), image->c_str(), info.width, info.height, info.channels,
                static_cast<long long>(args->image_size), static_cast<long long>(args->image_size));
    std::vector<Tensor> eager_out, compiled_out;
    Timing te = time_calls([&] { return eager_model({input}); }, *iters, eager_out);
    Timing tc = time_calls([&] { return compiled({input}); }, *iters, compiled_out);

    std::printf("backend %s, mode %s; weights are seeded (seed %llu), not trained, so the classes show the pipeline "
                "working, not a real prediction\n",
                options.backend.c_str(), std::string(mode_name(options.mode)).c_str(),
                static_cast<unsigned long long>(args->seed));
    std::printf("top-%d (compiled):\n", *top);
    print_top(compiled_out.at(0), *top);

    float scale = 0;
    for (float v : eager_out.at(0).values<float>()) scale = std::max(scale, std::fabs(v));
    const float diff = max_abs_diff(eager_out.at(0), compiled_out.at(0));
    std::printf("max |eager - compiled| = %.3g (largest |output| %.3g)\n", static_cast<double>(diff),
                static_cast<double>(scale));

    const auto& es = eager_model.stats();
    const auto& cs = compiled.stats();
    std::printf("timings (first call includes compiling; then the median of %d calls):\n", *iters);
    std::printf("  %-10s first %9.1f ms   median %9.1f ms   %4d dispatches   %7.1f MiB on device\n", "eager",
                te.first_ms, te.median_ms, es.dispatches_per_run, static_cast<double>(es.peak_device_bytes) / 1048576.0);
    std::printf("  %-10s first %9.1f ms   median %9.1f ms   %4d dispatches   %7.1f MiB on device\n", "compiled",
                tc.first_ms, tc.median_ms, cs.dispatches_per_run, static_cast<double>(cs.peak_device_bytes) / 1048576.0);
    if (*iters > 0 && tc.median_ms > 0)
      std::printf("  compiled is %.2fx the speed of eager (compile: %.0f ms, %d kernels compiled, %d from the disk cache)\n",
                  te.median_ms / tc.median_ms, cs.compile_ms, cs.kernel_cache_misses, cs.kernel_cache_hits);
  });
}

}  // namespace kiln::tools

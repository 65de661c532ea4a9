// `kiln profile`: where a call's time goes, kernel by kernel.
#include "commands.h"
#include "image.h"
#include "model_args.h"
#include "src/base/check.h"

#include <kiln/kiln.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <memory>
#include <numeric>

namespace kiln::tools {
namespace {

// The image input of a model with exactly one input, f32[N, 3, S, S].
Tensor image_input(const Model& model, const std::string& image) {
  const std::vector<TensorSpec> inputs = model.inputs();
  KILN_CHECK(inputs.size() == 1, ErrorKind::InvalidArgument,
             "kiln profile feeds one image; model '" + model.name() + "' has " + std::to_string(inputs.size()) +
                 " inputs");
  const TensorSpec& w = inputs[0];
  KILN_CHECK(w.dtype == DType::f32 && w.shape.size() == 4 && w.shape[1] == 3 && w.shape[2] == w.shape[3],
             ErrorKind::InvalidArgument,
             "input '" + w.name + "' (" + std::string(dtype_name(w.dtype)) + shape_str(w.shape) +
                 ") cannot take an image (that needs f32[N, 3, S, S])");
  return load_image_tensor(image, w.shape[2], w.shape[0]);
}

// "conv2d_gemm_1x1_8x16_k4_p8_wg64_v4_add_relu" -> "conv2d_gemm_1x1": the
// template or op a kernel came from, its knobs and fused epilogue dropped.
std::string kernel_family(const std::string& name) {
  std::size_t end = name.size();
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (name[i] != '_' || i + 1 >= name.size()) continue;
    const char next = name[i + 1];
    const bool knob = std::isdigit(static_cast<unsigned char>(next)) ||
                      ((next == 'k' || next == 'p' || next == 'c' || next == 'w' || next == 'v') && i + 2 < name.size() &&
                       std::isdigit(static_cast<unsigned char>(name[i + 2])));
    // "gemm_1x1" names the algorithm; a later "1x1" is a register tile.
    const bool algorithm_name = i >= 4 && name.compare(i - 4, 4, "gemm") == 0 && name.compare(i + 1, 3, "1x1") == 0;
    if (knob && !algorithm_name) {
      end = i;
      break;
    }
  }
  return name.substr(0, end);
}

void print_profile(const std::vector<KernelTiming>& timings, int top) {
  const double total = std::accumulate(timings.begin(), timings.end(), 0.0,
                                       [](double sum, const KernelTiming& t) { return sum + t.ms; });
  std::vector<std::size_t> order(timings.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return timings[a].ms > timings[b].ms; });

  std::printf("%zu dispatches, %.2f ms in all (%s, each dispatch alone, median)\n\n", timings.size(), total,
              !timings.empty() && timings[0].device_time ? "device time" : "host time per submit");
  std::printf("%5s %10s %6s %6s  %-44s %-22s %s\n", "#", "ms", "%", "cum%", "kernel", "output", "nodes");
  double cumulative = 0;
  for (std::size_t rank = 0; rank < order.size() && static_cast<int>(rank) < top; ++rank) {
    const KernelTiming& t = timings[order[rank]];
    cumulative += t.ms;
    std::string nodes = t.nodes.empty() ? "" : t.nodes.front();
    if (t.nodes.size() > 1) nodes += " +" + std::to_string(t.nodes.size() - 1);
    std::printf("%5zu %10.3f %6.1f %6.1f  %-44s %-22s %s\n", order[rank], t.ms, total > 0 ? 100 * t.ms / total : 0.0,
                total > 0 ? 100 * cumulative / total : 0.0, t.kernel.c_str(), t.output.c_str(), nodes.c_str());
  }

  std::map<std::string, std::pair<double, int>> families;
  for (const KernelTiming& t : timings) {
    auto& [ms, count] = families[kernel_family(t.kernel)];
    ms += t.ms;
    ++count;
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> by_family(families.begin(), families.end());
  std::sort(by_family.begin(), by_family.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::printf("\nby kernel family:\n%10s %6s %6s  %s\n", "ms", "%", "count", "family");
  for (const auto& [family, sum] : by_family)
    std::printf("%10.3f %6.1f %6d  %s\n", sum.first, total > 0 ? 100 * sum.first / total : 0.0, sum.second,
                family.c_str());
}

}  // namespace

void add_profile_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("profile", "run a model with each kernel in its own submission and print where the "
                                            "time goes: kernels by time (with the nodes fused into each) and per "
                                            "kernel family");
  auto args = std::make_shared<ModelArgs>();
  auto image = std::make_shared<std::string>(default_image_path());
  auto calls = std::make_shared<int>(5);
  auto top = std::make_shared<int>(25);
  auto eager_mode = std::make_shared<bool>(false);
  args->add_to(*cmd);
  cmd->add_option("--image", *image, "the image every call is fed")->capture_default_str();
  cmd->add_option("--calls", *calls, "profiled calls (each kernel's median is reported)")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->add_option("--top", *top, "how many kernels to list, slowest first")->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->add_flag("--eager", *eager_mode, "profile eager mode (one kernel per op) instead of the compiled model");
  cmd->callback([args, image, calls, top, eager_mode] {
    Model model = args->load();
    const Tensor input = image_input(model, *image);
    std::vector<KernelTiming> timings;
    if (*eager_mode) {
      DeviceOptions device;
      device.backend = args->backend;
      device.device = args->device;
      EagerModel m = eager(model, device);
      m({input});  // the first call plans and lets the driver compile every pipeline
      timings = m.profile({input}, *calls);
    } else {
      CompiledModel m = compile(model, args->compile_options());
      m.prepare();
      timings = m.profile({input}, *calls);
    }
    std::printf("%s, %s mode, input %s\n", model.name().c_str(), *eager_mode ? "eager" : args->mode.c_str(),
                shape_str(input.shape()).c_str());
    print_profile(timings, *top);
  });
}

}  // namespace kiln::tools

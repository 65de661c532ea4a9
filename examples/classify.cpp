// Classifies a photograph with an image classifier compiled by kiln.
//
//   classify MODEL IMAGE [--labels FILE] [--size 224] [--backend vulkan]
//            [--mode default|reduce-overhead|max-autotune]
//
// MODEL is an ONNX file (an ImageNet classifier exported from PyTorch, say),
// a compiled-model file (`kiln compile ... -o model.kiln`: loaded as it is,
// nothing compiled; --mode and --size do not apply) or a built-in model's
// name ("resnet18"). Prints the five likeliest classes, named from FILE (one
// label per line, in the order of the logits) if given.
#include "image_input.h"
#include "model_source.h"

#include <kiln/kiln.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

namespace {

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw kiln::Error(kiln::ErrorKind::Io, "cannot read labels '" + path + "'");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

int run(int argc, char** argv) {
  std::vector<std::string> positional;
  std::string labels_path, backend = "vulkan", mode = "default";
  int size = 224;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--labels" && has_value) labels_path = argv[++i];
    else if (arg == "--size" && has_value) size = examples::size_argument(argv[++i]);
    else if (arg == "--backend" && has_value) backend = argv[++i];
    else if (arg == "--mode" && has_value) mode = argv[++i];
    else positional.push_back(arg);
  }
  if (positional.size() != 2) {
    std::fprintf(stderr, "usage: classify MODEL IMAGE [--labels FILE] [--size 224] [--backend vulkan] [--mode MODE]\n");
    return 2;
  }

  kiln::CompiledModel compiled =
      examples::is_compiled_model_file(positional[0])
          ? kiln::load(positional[0], {.backend = backend})
          : kiln::compile(examples::load_model(positional[0], size), {.backend = backend, .mode = kiln::parse_mode(mode)});
  const kiln::Model& model = compiled.model();
  mode = std::string(kiln::mode_name(compiled.options().mode));
  const kiln::Tensor input = examples::imagenet_input(examples::read_picture(positional[1]), examples::input_size(model));
  const kiln::Tensor logits = compiled({input}).at(0);
  if (logits.dtype() != kiln::DType::f32 || logits.rank() != 2)
    throw kiln::Error(kiln::ErrorKind::InvalidArgument,
                      model.name() + ": a classifier's output is f32 logits [N, classes], got " + kiln::shape_str(logits.shape()));

  // Softmax of the first image's logits, in double.
  const auto values = logits.values<float>().first(static_cast<std::size_t>(logits.shape()[1]));
  const float largest = *std::max_element(values.begin(), values.end());
  std::vector<double> p(values.size());
  for (std::size_t c = 0; c < values.size(); ++c) p[c] = std::exp(double(values[c]) - largest);
  const double total = std::accumulate(p.begin(), p.end(), 0.0);
  std::vector<std::size_t> order(p.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  const std::size_t shown = std::min<std::size_t>(5, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(shown), order.end(),
                    [&](std::size_t a, std::size_t b) { return p[a] > p[b]; });

  const std::vector<std::string> labels = labels_path.empty() ? std::vector<std::string>{} : read_lines(labels_path);
  std::printf("%s on %s (%s), %s in %.0f ms; top-%zu:\n", model.name().c_str(), backend.c_str(), mode.c_str(),
              compiled.stats().graph_passes_run == 0 ? "loaded" : "compiled", compiled.stats().compile_ms, shown);
  for (std::size_t r = 0; r < shown; ++r) {
    const std::size_t c = order[r];
    std::printf("  %zu. class %zu%s%s  p = %.4f\n", r + 1, c, c < labels.size() ? " " : "",
                c < labels.size() ? labels[c].c_str() : "", p[c] / total);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "classify: %s\n", e.what());
    return 1;
  }
}

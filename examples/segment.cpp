// Segments a photograph with a semantic-segmentation model compiled by kiln
// and writes the mask as a PNG, one colour per class.
//
//   segment MODEL IMAGE MASK.png [--size 224] [--backend vulkan]
//           [--mode default|reduce-overhead|max-autotune]
//
// MODEL is an ONNX file whose first output is per-pixel logits
// [N, classes, H, W] (torchvision's DeepLabV3 or LR-ASPP exported from
// PyTorch, say) or a built-in model's name ("lraspp_mobilenet_v3").
#include "image_input.h"
#include "model_source.h"

#include <kiln/kiln.h>

#include <stb_image_write.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <numeric>
#include <string>
#include <vector>

namespace {

// PASCAL VOC's colour map: class c's bits, three at a time, spread over the
// high bits of red, green and blue.
std::array<unsigned char, 3> class_colour(std::int64_t c) {
  std::array<unsigned char, 3> rgb{};
  auto bits = static_cast<std::uint64_t>(c);
  for (int shift = 7; shift >= 0 && bits != 0; --shift, bits >>= 3)
    for (std::size_t channel = 0; channel < 3; ++channel)
      rgb[channel] = static_cast<unsigned char>(rgb[channel] | (((bits >> channel) & 1u) << shift));
  return rgb;
}

int run(int argc, char** argv) {
  std::vector<std::string> positional;
  std::string backend = "vulkan", mode = "default";
  int size = 224;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--size" && has_value) size = examples::size_argument(argv[++i]);
    else if (arg == "--backend" && has_value) backend = argv[++i];
    else if (arg == "--mode" && has_value) mode = argv[++i];
    else positional.push_back(arg);
  }
  if (positional.size() != 3) {
    std::fprintf(stderr, "usage: segment MODEL IMAGE MASK.png [--size 224] [--backend vulkan] [--mode MODE]\n");
    return 2;
  }

  const kiln::Model model = examples::load_model(positional[0], size);
  const kiln::Tensor input = examples::imagenet_input(examples::read_picture(positional[1]), examples::input_size(model));
  kiln::CompiledModel compiled = kiln::compile(model, {.backend = backend, .mode = kiln::parse_mode(mode)});
  const kiln::Tensor logits = compiled({input}).at(0);
  const kiln::Shape& shape = logits.shape();
  if (logits.dtype() != kiln::DType::f32 || shape.size() != 4)
    throw kiln::Error(kiln::ErrorKind::InvalidArgument,
                      model.name() + ": a segmentation output is f32 logits [N, classes, H, W], got " + kiln::shape_str(shape));

  // Each pixel's likeliest class, for the first image.
  const std::int64_t classes = shape[1], height = shape[2], width = shape[3], pixels = height * width;
  const auto values = logits.values<float>();
  std::vector<std::int64_t> count(static_cast<std::size_t>(classes), 0);
  std::vector<unsigned char> mask(static_cast<std::size_t>(pixels) * 3);
  for (std::int64_t p = 0; p < pixels; ++p) {
    std::int64_t best = 0;
    for (std::int64_t c = 1; c < classes; ++c)
      if (values[static_cast<std::size_t>(c * pixels + p)] > values[static_cast<std::size_t>(best * pixels + p)]) best = c;
    ++count[static_cast<std::size_t>(best)];
    std::copy_n(class_colour(best).begin(), 3, mask.begin() + p * 3);
  }
  const std::string& mask_path = positional[2];
  if (stbi_write_png(mask_path.c_str(), static_cast<int>(width), static_cast<int>(height), 3, mask.data(),
                     static_cast<int>(width) * 3) == 0)
    throw kiln::Error(kiln::ErrorKind::Io, "cannot write '" + mask_path + "'");

  std::vector<std::size_t> order(count.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return count[a] > count[b]; });
  std::printf("%s on %s (%s), compiled in %.0f ms; mask %lldx%lld, largest classes by area:\n", model.name().c_str(),
              backend.c_str(), mode.c_str(), compiled.stats().compile_ms, static_cast<long long>(width),
              static_cast<long long>(height));
  for (std::size_t r = 0; r < std::min<std::size_t>(5, order.size()) && count[order[r]] > 0; ++r)
    std::printf("  %zu. class %zu  %5.1f%% of pixels\n", r + 1, order[r], 100.0 * double(count[order[r]]) / double(pixels));
  std::printf("mask written to %s\n", mask_path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "segment: %s\n", e.what());
    return 1;
  }
}

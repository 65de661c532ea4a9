// Turning a photograph into a model input the way torchvision's ImageNet
// models expect: scale the shorter side to size * 256 / 224, crop the centre
// size x size, scale to [0, 1], normalise by ImageNet's mean and standard
// deviation, NCHW f32. Decoding and resizing are stb's (Debian: libstb-dev).
#pragma once

#include <kiln/tensor.h>

#include <stb_image.h>
#include <stb_image_resize.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace examples {

struct Picture {
  int width = 0, height = 0;
  std::vector<unsigned char> rgb;  // width x height x 3
};

inline Picture read_picture(const std::string& path) {
  Picture picture;
  int channels = 0;
  std::unique_ptr<unsigned char, void (*)(void*)> pixels(
      stbi_load(path.c_str(), &picture.width, &picture.height, &channels, 3), stbi_image_free);
  if (!pixels) throw std::runtime_error("cannot read image '" + path + "': " + stbi_failure_reason());
  picture.rgb.assign(pixels.get(), pixels.get() + std::size_t(picture.width) * std::size_t(picture.height) * 3);
  return picture;
}

// A [1, 3, size, size] tensor of the picture's centre.
inline kiln::Tensor imagenet_input(const Picture& picture, int size) {
  const double shorter = std::round(size * 256.0 / 224.0);
  const double scale = shorter / std::min(picture.width, picture.height);
  const int width = static_cast<int>(std::max<double>(size, std::round(picture.width * scale)));
  const int height = static_cast<int>(std::max<double>(size, std::round(picture.height * scale)));
  std::vector<unsigned char> resized(std::size_t(width) * std::size_t(height) * 3);
  if (stbir_resize_uint8(picture.rgb.data(), picture.width, picture.height, 0, resized.data(), width, height, 0, 3) != 1)
    throw std::runtime_error("resizing the image failed");

  const int left = (width - size) / 2, top = (height - size) / 2;
  const float mean[3] = {0.485f, 0.456f, 0.406f};
  const float stddev[3] = {0.229f, 0.224f, 0.225f};
  kiln::Tensor input(kiln::DType::f32, {1, 3, size, size});
  float* out = input.values<float>().data();
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < size; ++y)
      for (int x = 0; x < size; ++x) {
        const unsigned char value = resized[(std::size_t(top + y) * std::size_t(width) + std::size_t(left + x)) * 3 + c];
        *out++ = (value / 255.0f - mean[c]) / stddev[c];
      }
  return input;
}

}  // namespace examples

#include "image.h"

#include <stb_image.h>
#include <stb_image_resize.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <vector>

namespace kiln::tools {

Tensor load_image_tensor(const std::string& path, std::int64_t size, std::int64_t batch, ImageInfo* info) {
  KILN_CHECK(size >= 8 && size <= 4096, ErrorKind::InvalidArgument,
             "image size " + std::to_string(size) + " is out of range (8..4096)");
  KILN_CHECK(batch >= 1, ErrorKind::InvalidArgument, "batch must be at least 1");
  std::error_code ec;
  KILN_CHECK(std::filesystem::is_regular_file(path, ec), ErrorKind::Io, "cannot read image '" + path + "': no such file");

  int w = 0, h = 0, channels = 0;
  std::unique_ptr<unsigned char, void (*)(void*)> pixels(stbi_load(path.c_str(), &w, &h, &channels, 3), stbi_image_free);
  KILN_CHECK(pixels != nullptr, ErrorKind::Corrupt,
             "cannot decode image '" + path + "': " + std::string(stbi_failure_reason() ? stbi_failure_reason() : "unknown format"));
  if (info) *info = {w, h, channels};

  // torchvision: Resize(size * 256 / 224) on the shorter side, then CenterCrop(size).
  const double resize_short = std::round(static_cast<double>(size) * 256.0 / 224.0);
  const double scale = resize_short / std::min(w, h);
  const int rw = std::max<int>(static_cast<int>(size), static_cast<int>(std::lround(w * scale)));
  const int rh = std::max<int>(static_cast<int>(size), static_cast<int>(std::lround(h * scale)));
  std::vector<unsigned char> resized(static_cast<std::size_t>(rw) * rh * 3);
  KILN_CHECK(stbir_resize_uint8(pixels.get(), w, h, 0, resized.data(), rw, rh, 0, 3) == 1, ErrorKind::Internal,
             "stb_image_resize failed on '" + path + "'");

  const int x0 = (rw - static_cast<int>(size)) / 2;
  const int y0 = (rh - static_cast<int>(size)) / 2;
  constexpr float kMean[3] = {0.485f, 0.456f, 0.406f};
  constexpr float kStd[3] = {0.229f, 0.224f, 0.225f};
  Tensor t(DType::f32, {batch, 3, size, size});
  auto out = t.values<float>();
  const std::size_t plane = static_cast<std::size_t>(size * size);
  for (int c = 0; c < 3; ++c)
    for (std::int64_t y = 0; y < size; ++y)
      for (std::int64_t x = 0; x < size; ++x) {
        unsigned char p = resized[(static_cast<std::size_t>(y0 + y) * rw + static_cast<std::size_t>(x0 + x)) * 3 + c];
        out[c * plane + static_cast<std::size_t>(y * size + x)] = (p / 255.0f - kMean[c]) / kStd[c];
      }
  for (std::int64_t b = 1; b < batch; ++b)
    std::copy_n(out.begin(), 3 * plane, out.begin() + static_cast<std::ptrdiff_t>(b * 3 * plane));
  return t;
}

}  // namespace kiln::tools

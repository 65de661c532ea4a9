#include "image.h"

#include <stb_image.h>
#include <stb_image_resize.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

namespace kiln::tools {

namespace {

std::string size_str(std::int64_t width, std::int64_t height) {
  return std::to_string(width) + "x" + std::to_string(height);
}

std::string stb_reason() {
  const char* reason = stbi_failure_reason();
  return reason ? reason : "unknown format";
}

}  // namespace

RgbImage read_rgb_image(const std::string& path) {
  std::error_code ec;
  KILN_CHECK(std::filesystem::is_regular_file(path, ec), ErrorKind::Io, "cannot read image '" + path + "': no such file");
  // One open file for the header and the pixels, so both describe the same bytes.
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), std::fclose);
  KILN_CHECK(file != nullptr, ErrorKind::Io, "cannot read image '" + path + "': " + std::strerror(errno));
  RgbImage image;
  ImageInfo& info = image.info;
  KILN_CHECK(stbi_info_from_file(file.get(), &info.width, &info.height, &info.channels) == 1, ErrorKind::Corrupt,
             "cannot decode image '" + path + "': " + stb_reason());
  const std::int64_t pixels = std::int64_t{info.width} * info.height;
  KILN_CHECK(info.width <= kMaxImageSide && info.height <= kMaxImageSide && pixels <= kMaxImagePixels,
             ErrorKind::InvalidArgument,
             "image '" + path + "' is " + size_str(info.width, info.height) + " pixels, larger than kiln's limit of " +
                 std::to_string(kMaxImagePixels) + " pixels and " + std::to_string(kMaxImageSide) +
                 " a side; scale it down first");
  int width = 0, height = 0, channels = 0;
  std::unique_ptr<unsigned char, void (*)(void*)> rgb(stbi_load_from_file(file.get(), &width, &height, &channels, 3),
                                                      stbi_image_free);
  KILN_CHECK(rgb != nullptr, ErrorKind::Corrupt, "cannot decode image '" + path + "': " + stb_reason());
  KILN_CHECK(width == info.width && height == info.height, ErrorKind::Corrupt,
             "image '" + path + "': its header says " + size_str(info.width, info.height) + ", its pixels are " +
                 size_str(width, height));
  image.rgb.assign(rgb.get(), rgb.get() + static_cast<std::size_t>(pixels) * 3);
  return image;
}

Tensor load_image_tensor(const std::string& path, std::int64_t size, std::int64_t batch, ImageInfo* info) {
  KILN_CHECK(size >= 8 && size <= 4096, ErrorKind::InvalidArgument,
             "image size " + std::to_string(size) + " is out of range (8..4096)");
  KILN_CHECK(batch >= 1, ErrorKind::InvalidArgument, "batch must be at least 1");
  const RgbImage image = read_rgb_image(path);
  const int w = image.info.width, h = image.info.height;
  if (info) *info = image.info;

  // torchvision: Resize(size * 256 / 224) on the shorter side, then CenterCrop(size).
  const double resize_short = std::round(static_cast<double>(size) * 256.0 / 224.0);
  const double scale = resize_short / std::min(w, h);
  const double resized_w = std::max<double>(static_cast<double>(size), std::round(w * scale));
  const double resized_h = std::max<double>(static_cast<double>(size), std::round(h * scale));
  // A long, thin image grows along its long side: bound it before allocating.
  KILN_CHECK(resized_w * resized_h <= static_cast<double>(kMaxImagePixels), ErrorKind::InvalidArgument,
             "image '" + path + "' (" + size_str(w, h) + ") would be resized to " +
                 size_str(static_cast<std::int64_t>(resized_w), static_cast<std::int64_t>(resized_h)) +
                 " pixels for a " + std::to_string(size) + " pixel centre crop, more than kiln's limit of " +
                 std::to_string(kMaxImagePixels) + "; crop it closer to square first");
  const int rw = static_cast<int>(resized_w), rh = static_cast<int>(resized_h);
  std::vector<unsigned char> resized(static_cast<std::size_t>(rw) * rh * 3);
  KILN_CHECK(stbir_resize_uint8(image.rgb.data(), w, h, 0, resized.data(), rw, rh, 0, 3) == 1, ErrorKind::Internal,
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

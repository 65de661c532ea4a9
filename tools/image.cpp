#include "image.h"

#include "src/base/check.h"

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

std::optional<Preprocess> parse_preprocess(std::string_view name) {
  if (name == "imagenet") return Preprocess::imagenet;
  if (name == "unit") return Preprocess::unit;
  if (name == "letterbox") return Preprocess::letterbox;
  return std::nullopt;
}

namespace {

constexpr std::array<float, 3> kImagenetMean = {0.485f, 0.456f, 0.406f};
constexpr std::array<float, 3> kImagenetStd = {0.229f, 0.224f, 0.225f};
// Ultralytics' letterbox padding, (114, 114, 114).
constexpr unsigned char kLetterboxGrey = 114;

std::array<float, 3> mean_of(const ImagePreparation& p) {
  return p.mean ? *p.mean : p.kind == Preprocess::imagenet ? kImagenetMean : std::array<float, 3>{0, 0, 0};
}
std::array<float, 3> std_of(const ImagePreparation& p) {
  return p.std ? *p.std : p.kind == Preprocess::imagenet ? kImagenetStd : std::array<float, 3>{1, 1, 1};
}

std::string triple(const std::array<float, 3>& v) {
  char text[64];
  std::snprintf(text, sizeof text, "(%g, %g, %g)", v[0], v[1], v[2]);
  return text;
}

std::vector<unsigned char> resize(const RgbImage& image, int width, int height, const std::string& path) {
  std::vector<unsigned char> out(static_cast<std::size_t>(width) * height * 3);
  KILN_CHECK(stbir_resize_uint8(image.rgb.data(), image.info.width, image.info.height, 0, out.data(), width, height, 0,
                                3) == 1,
             ErrorKind::Internal, "stb_image_resize failed on '" + path + "'");
  return out;
}

}  // namespace

std::string describe(const ImagePreparation& p, std::int64_t height, std::int64_t width) {
  const std::string size = std::to_string(width) + "x" + std::to_string(height);
  std::string what;
  switch (p.kind) {
    case Preprocess::imagenet:
      what = "imagenet: shorter side resized to 256/224 of the input, centre " + size + " crop";
      break;
    case Preprocess::unit: what = "unit: resized to " + size; break;
    case Preprocess::letterbox:
      what = "letterbox: resized to fit " + size + " keeping its aspect ratio, padded with grey (114)";
      break;
  }
  const std::array<float, 3> mean = mean_of(p), std = std_of(p);
  const bool plain = mean == std::array<float, 3>{0, 0, 0} && std == std::array<float, 3>{1, 1, 1};
  return what + ", scaled to [0, 1]" + (plain ? std::string() : ", normalised by mean " + triple(mean) + " and std " + triple(std));
}

Tensor load_image_tensor(const std::string& path, std::int64_t height, std::int64_t width, std::int64_t batch,
                         const ImagePreparation& preparation, ImageInfo* info, ImageGeometry* geometry) {
  KILN_CHECK(height >= 8 && height <= 4096 && width >= 8 && width <= 4096, ErrorKind::InvalidArgument,
             "image size " + size_str(width, height) + " is out of range (8..4096 a side)");
  KILN_CHECK(batch >= 1, ErrorKind::InvalidArgument, "batch must be at least 1");
  const RgbImage image = read_rgb_image(path);
  const int w = image.info.width, h = image.info.height;
  if (info) *info = image.info;

  // The resized image and where the input's pixels lie in it.
  int rw = 0, rh = 0;
  double x0 = 0, y0 = 0;  // input pixel (0, 0) in resized pixels (negative: padding)
  switch (preparation.kind) {
    case Preprocess::imagenet: {
      // torchvision: Resize(size * 256 / 224) on the shorter side, then CenterCrop.
      const double scale = std::max(std::round(static_cast<double>(width) * 256.0 / 224.0) / w,
                                    std::round(static_cast<double>(height) * 256.0 / 224.0) / h);
      rw = static_cast<int>(std::max<double>(static_cast<double>(width), std::round(w * scale)));
      rh = static_cast<int>(std::max<double>(static_cast<double>(height), std::round(h * scale)));
      x0 = (rw - static_cast<int>(width)) / 2;
      y0 = (rh - static_cast<int>(height)) / 2;
      break;
    }
    case Preprocess::unit:
      rw = static_cast<int>(width);
      rh = static_cast<int>(height);
      break;
    case Preprocess::letterbox: {
      const double scale = std::min(static_cast<double>(width) / w, static_cast<double>(height) / h);
      rw = std::max(1, static_cast<int>(std::lround(w * scale)));
      rh = std::max(1, static_cast<int>(std::lround(h * scale)));
      x0 = -std::floor((static_cast<double>(width) - rw) / 2);
      y0 = -std::floor((static_cast<double>(height) - rh) / 2);
      break;
    }
  }
  // A long, thin image grows along its long side: bound it before allocating.
  KILN_CHECK(static_cast<double>(rw) * rh <= static_cast<double>(kMaxImagePixels), ErrorKind::InvalidArgument,
             "image '" + path + "' (" + size_str(w, h) + ") would be resized to " + size_str(rw, rh) +
                 " pixels for a " + size_str(width, height) + " input, more than kiln's limit of " +
                 std::to_string(kMaxImagePixels) + "; crop it closer to the input's shape first");
  const std::vector<unsigned char> resized = resize(image, rw, rh, path);
  if (geometry) *geometry = {static_cast<double>(w) / rw, static_cast<double>(h) / rh, x0, y0};

  const std::array<float, 3> mean = mean_of(preparation), std = std_of(preparation);
  Tensor t(DType::f32, {batch, 3, height, width});
  auto out = t.values<float>();
  const std::size_t plane = static_cast<std::size_t>(height * width);
  for (int c = 0; c < 3; ++c)
    for (std::int64_t y = 0; y < height; ++y)
      for (std::int64_t x = 0; x < width; ++x) {
        const std::int64_t sx = x + static_cast<std::int64_t>(x0), sy = y + static_cast<std::int64_t>(y0);
        const bool inside = sx >= 0 && sx < rw && sy >= 0 && sy < rh;
        const unsigned char p = inside ? resized[(static_cast<std::size_t>(sy) * rw + static_cast<std::size_t>(sx)) * 3 + c]
                                       : kLetterboxGrey;
        out[c * plane + static_cast<std::size_t>(y * width + x)] = (p / 255.0f - mean[c]) / std[c];
      }
  for (std::int64_t b = 1; b < batch; ++b)
    std::copy_n(out.begin(), 3 * plane, out.begin() + static_cast<std::ptrdiff_t>(b * 3 * plane));
  return t;
}

Tensor load_image_tensor(const std::string& path, std::int64_t size, std::int64_t batch, ImageInfo* info) {
  return load_image_tensor(path, size, size, batch, ImagePreparation{}, info);
}

std::string default_image_path() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path installed = exe.parent_path() / ".." / "share" / "kiln" / "images" / "chelsea.png";
    if (std::filesystem::is_regular_file(installed, ec)) return std::filesystem::weakly_canonical(installed, ec).string();
  }
#ifdef KILN_SOURCE_IMAGES
  const std::filesystem::path source = std::filesystem::path(KILN_SOURCE_IMAGES) / "chelsea.png";
  if (std::filesystem::is_regular_file(source, ec)) return source.string();
#endif
  return "";
}

}  // namespace kiln::tools

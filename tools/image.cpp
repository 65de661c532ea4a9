#include "image.h"

#include "src/base/check.h"
#include "src/base/file_type.h"
#include "src/base/printable.h"

#include <stb_image.h>
#include <stb_image_resize.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <vector>

namespace kiln::tools {

namespace {

std::string size_str(std::int64_t width, std::int64_t height) {
  return std::to_string(width) + "x" + std::to_string(height);
}

// stb_image's reason, which can carry bytes of the file (a PNG chunk's name).
std::string stb_reason() {
  const char* reason = stbi_failure_reason();
  return reason ? base::printable(reason) : "unknown format";
}

// The formats kiln decodes, by their first bytes: stb_image reads more (PSD,
// HDR, PIC, TGA, GIF), but those are neither documented nor fuzzed here.
enum class ImageFormat { png, jpeg, bmp, pnm, other };

ImageFormat sniff_format(std::string_view head) {
  if (head.starts_with("\x89PNG\r\n\x1a\n")) return ImageFormat::png;
  if (head.starts_with("\xff\xd8\xff")) return ImageFormat::jpeg;
  if (head.starts_with("BM")) return ImageFormat::bmp;
  if (head.starts_with("P5") || head.starts_with("P6")) return ImageFormat::pnm;
  return ImageFormat::other;
}

std::uint32_t big_endian_u32(const unsigned char* p) {
  return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | p[3];
}

// Inflates a PNG's image data (its IDAT chunks, in order) without keeping
// it, and refuses a file whose data inflates past what its header's size
// needs, or does not inflate: stb_image would inflate all of it into memory
// before noticing (a few megabytes of file can inflate to gigabytes).
void check_png_inflated_size(std::string_view bytes, const std::string& shown, std::int64_t width, std::int64_t height) {
  // At most 16 bits x 4 channels a pixel, one filter byte a row; Adam7
  // interlacing adds at most a filter byte per row of each of its 7 passes.
  const std::int64_t allowed = height * (1 + width * 8) + 7 * height + 64;
  z_stream z{};
  KILN_CHECK(inflateInit(&z) == Z_OK, ErrorKind::OutOfMemory, "cannot inflate image '" + shown + "'");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&z, inflateEnd);
  std::vector<unsigned char> scratch(64 * 1024);
  std::int64_t inflated = 0;
  std::size_t at = 8;  // past the signature
  bool ended = false;
  // Every chunk's length is checked, after the stream's end too: stb_image
  // allocates what an IDAT chunk's length says before reading its data.
  while (at + 8 <= bytes.size()) {  // a chunk's length and type are there
    const auto* chunk = reinterpret_cast<const unsigned char*>(bytes.data() + at);
    const std::uint32_t length = big_endian_u32(chunk);
    const std::string_view type(bytes.data() + at + 4, 4);
    KILN_CHECK(bytes.size() - at >= 12 && length <= bytes.size() - at - 12, ErrorKind::Corrupt,
               "image '" + shown + "': its PNG chunk at byte " + std::to_string(at) + " runs past the end of the file");
    if (type == "IDAT" && !ended) {
      z.next_in = const_cast<unsigned char*>(chunk + 8);
      z.avail_in = length;
      while (z.avail_in != 0 && !ended) {
        z.next_out = scratch.data();
        z.avail_out = static_cast<uInt>(scratch.size());
        const int status = inflate(&z, Z_NO_FLUSH);
        inflated += static_cast<std::int64_t>(scratch.size() - z.avail_out);
        KILN_CHECK(inflated <= allowed, ErrorKind::Corrupt,
                   "image '" + shown + "': its pixel data inflates past the " + std::to_string(allowed) +
                       " bytes a " + size_str(width, height) + " PNG can hold; not decoded");
        if (status == Z_STREAM_END) {
          ended = true;
        } else if (status == Z_BUF_ERROR) {
          break;  // the stream goes on in the next IDAT chunk
        } else if (status != Z_OK) {
          // stb_image's inflater checks less (no Adler-32) and could go on
          // to output far past this point: damaged data is refused here.
          throw_error(ErrorKind::Corrupt, "image '" + shown + "': its PNG pixel data is damaged (zlib: " +
                                              base::printable(z.msg != nullptr ? z.msg : "error " + std::to_string(status)) +
                                              ")");
        }
      }
    } else if (type == "IEND") {
      break;
    }
    at += 12 + std::size_t{length};
  }
  // stb_image reads zeros past the end of the data and can decode them into
  // output without end: a stream that does not finish is refused.
  KILN_CHECK(ended, ErrorKind::Corrupt,
             "image '" + shown + "': its PNG pixel data ends before its compressed stream does");
}

// A binary PPM/PGM's header (P6/P5, width, height, maxval, with '#'
// comments) and its pixels: 8 bits a sample (a maxval of 1 to 255) and every
// sample there. stb_image reads 16-bit samples past the end of short data.
void check_pnm(std::string_view bytes, const std::string& shown) {
  std::size_t at = 2;
  const auto next_number = [&](const char* what) -> std::int64_t {
    while (at < bytes.size()) {
      if (bytes[at] == '#') {
        while (at < bytes.size() && bytes[at] != '\n') ++at;
      } else if (std::isspace(static_cast<unsigned char>(bytes[at]))) {
        ++at;
      } else {
        break;
      }
    }
    std::int64_t value = 0;
    const std::size_t start = at;
    while (at < bytes.size() && std::isdigit(static_cast<unsigned char>(bytes[at])) && at - start < 9)
      value = value * 10 + (bytes[at++] - '0');
    KILN_CHECK(at > start, ErrorKind::Corrupt, "image '" + shown + "': its PPM/PGM header has no " + what);
    return value;
  };
  const std::int64_t width = next_number("width");
  const std::int64_t height = next_number("height");
  const std::int64_t maxval = next_number("maximum value");
  KILN_CHECK(maxval >= 1 && maxval <= 255, ErrorKind::Unsupported,
             "image '" + shown + "': a PPM/PGM with samples up to " + std::to_string(maxval) +
                 " (kiln reads 8-bit ones, a maximum of 1 to 255)");
  ++at;  // the one whitespace byte before the pixels
  const std::int64_t channels = bytes[1] == '6' ? 3 : 1;
  KILN_CHECK(at <= bytes.size() && static_cast<std::int64_t>(bytes.size() - at) >= width * height * channels,
             ErrorKind::Corrupt,
             "image '" + shown + "': its " + size_str(width, height) + " pixels need " +
                 std::to_string(width * height * channels) + " bytes, the file holds " +
                 std::to_string(at <= bytes.size() ? bytes.size() - at : 0));
}

}  // namespace

RgbImage read_rgb_image(const std::string& path) {
  const std::string shown = base::printable(path);
  struct stat status {};
  KILN_CHECK(::stat(path.c_str(), &status) == 0, ErrorKind::Io,
             "cannot read image '" + shown + "': " + std::strerror(errno));
  KILN_CHECK(S_ISREG(status.st_mode), ErrorKind::Io,
             "cannot read image '" + shown + "': it is " + base::file_type_name(status.st_mode) + ", not an image file");
  KILN_CHECK(status.st_size <= kMaxImageFileBytes, ErrorKind::InvalidArgument,
             "image file '" + shown + "' is " + std::to_string(status.st_size) + " bytes, larger than kiln's limit of " +
                 std::to_string(kMaxImageFileBytes));
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in.good(), ErrorKind::Io, "cannot read image '" + shown + "': " + std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  KILN_CHECK(!in.bad(), ErrorKind::Io, "cannot read image '" + shown + "': " + std::strerror(errno));
  return decode_rgb_image(bytes, path);
}

RgbImage decode_rgb_image(std::string_view bytes, const std::string& name) {
  const std::string shown = base::printable(name);
  const ImageFormat format = sniff_format(bytes);
  KILN_CHECK(format != ImageFormat::other, ErrorKind::Unsupported,
             "image '" + shown + "' is not a PNG, JPEG, BMP or binary PPM/PGM file, the formats kiln reads");
  KILN_CHECK(bytes.size() <= static_cast<std::size_t>(INT32_MAX), ErrorKind::InvalidArgument,
             "image file '" + shown + "' is too large");
  const auto* data = reinterpret_cast<const stbi_uc*>(bytes.data());
  const int size = static_cast<int>(bytes.size());

  RgbImage image;
  ImageInfo& info = image.info;
  KILN_CHECK(stbi_info_from_memory(data, size, &info.width, &info.height, &info.channels) == 1, ErrorKind::Corrupt,
             "cannot decode image '" + shown + "': " + stb_reason());
  KILN_CHECK(info.width >= 1 && info.height >= 1, ErrorKind::Corrupt,
             "image '" + shown + "' has no pixels: its header says " + size_str(info.width, info.height));
  const std::int64_t pixels = std::int64_t{info.width} * info.height;
  KILN_CHECK(info.width <= kMaxImageSide && info.height <= kMaxImageSide && pixels <= kMaxImagePixels,
             ErrorKind::InvalidArgument,
             "image '" + shown + "' is " + size_str(info.width, info.height) + " pixels, larger than kiln's limit of " +
                 std::to_string(kMaxImagePixels) + " pixels and " + std::to_string(kMaxImageSide) +
                 " a side; scale it down first");
  if (format == ImageFormat::png) check_png_inflated_size(bytes, shown, info.width, info.height);
  if (format == ImageFormat::pnm) check_pnm(bytes, shown);
  int width = 0, height = 0, channels = 0;
  std::unique_ptr<unsigned char, void (*)(void*)> rgb(stbi_load_from_memory(data, size, &width, &height, &channels, 3),
                                                      stbi_image_free);
  KILN_CHECK(rgb != nullptr, ErrorKind::Corrupt, "cannot decode image '" + shown + "': " + stb_reason());
  KILN_CHECK(width == info.width && height == info.height, ErrorKind::Corrupt,
             "image '" + shown + "': its header says " + size_str(info.width, info.height) + ", its pixels are " +
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
             ErrorKind::Internal, "stb_image_resize failed on '" + base::printable(path) + "'");
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
             "image '" + base::printable(path) + "' (" + size_str(w, h) + ") would be resized to " + size_str(rw, rh) +
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

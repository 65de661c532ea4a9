// Loading a photograph as a model input, NCHW f32, prepared as the model was
// trained: torchvision's ImageNet classifiers (resize the shorter side,
// centre-crop, scale to [0, 1], normalise by ImageNet's mean and standard
// deviation), models that take [0, 1] pixels (resized to the input), or
// detectors such as YOLO (letterboxed: resized keeping the aspect ratio,
// padded with grey, scaled to [0, 1]).
#pragma once

#include <kiln/tensor.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::tools {

// The largest image kiln decodes, checked from the file's header before any
// pixel is decoded (a 4,000,000 x 1 PNG of a few hundred bytes would
// otherwise cost gigabytes): at most kMaxImagePixels pixels (8192 x 8192) and
// kMaxImageSide pixels a side. The image resized for the centre crop must
// fit kMaxImagePixels too (a very long, thin image would not).
inline constexpr std::int64_t kMaxImagePixels = std::int64_t{1} << 26;
inline constexpr int kMaxImageSide = 32768;
// The largest image file kiln reads (it reads the file whole).
inline constexpr std::int64_t kMaxImageFileBytes = std::int64_t{256} << 20;

struct ImageInfo {
  int width = 0, height = 0, channels = 0;  // channels: as stored in the file
};

struct RgbImage {
  ImageInfo info;
  std::vector<unsigned char> rgb;  // width x height x 3, row-major
};

// Decodes a PNG, JPEG, BMP or binary PPM/PGM file (known by its first bytes;
// stb_image decodes them) as 8-bit RGB. Throws Error(Io) if the path cannot
// be read or is not a regular file (naming what it is), Error(Unsupported)
// for another format, Error(Corrupt) for a file that does not decode, has
// no pixels (a 0x0 header), or whose PNG data inflates past what its size
// needs, Error(InvalidArgument) naming the file and its size if it is larger
// than the limits above. Bytes of the path or the file in a message are
// escaped (src/base/printable.h).
RgbImage read_rgb_image(const std::string& path);
// The same for a file's bytes already read; `name` is the file's, for messages.
RgbImage decode_rgb_image(std::string_view bytes, const std::string& name);

enum class Preprocess { imagenet, unit, letterbox };
// "imagenet", "unit", "letterbox" (nullopt for anything else).
std::optional<Preprocess> parse_preprocess(std::string_view name);

struct ImagePreparation {
  Preprocess kind = Preprocess::imagenet;
  // Per-channel (R, G, B) normalisation of the [0, 1] pixels, replacing the
  // kind's (imagenet: ImageNet's; unit and letterbox: mean 0, std 1).
  std::optional<std::array<float, 3>> mean, std;
};

// One line saying what a preparation does to an image for a height x width input.
std::string describe(const ImagePreparation& preparation, std::int64_t height, std::int64_t width);

// Where a model-input pixel (x, y) came from in the photograph:
// ((x + offset_x) * scale_x, (y + offset_y) * scale_y).
struct ImageGeometry {
  double scale_x = 1, scale_y = 1, offset_x = 0, offset_y = 0;
};

// Returns a [batch, 3, height, width] f32 tensor (the image repeated `batch`
// times) prepared as `preparation` says. Throws as read_rgb_image does, and
// Error(InvalidArgument) when the resized image would pass kMaxImagePixels.
Tensor load_image_tensor(const std::string& path, std::int64_t height, std::int64_t width, std::int64_t batch,
                         const ImagePreparation& preparation, ImageInfo* info = nullptr,
                         ImageGeometry* geometry = nullptr);
// A square input with ImageNet's preparation.
Tensor load_image_tensor(const std::string& path, std::int64_t size, std::int64_t batch, ImageInfo* info = nullptr);

// The photograph `kiln run` uses when --image is not given: the installed
// copy (<prefix>/share/kiln/images/chelsea.png, found from the running
// program's folder), else, for a program in its build tree, the source
// tree's; "" when neither exists.
std::string default_image_path();

}  // namespace kiln::tools

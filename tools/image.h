// Loading a photograph as a model input, with torchvision's ImageNet
// preprocessing: resize the shorter side, centre-crop, scale to [0, 1],
// normalise by ImageNet's mean and standard deviation, NCHW.
#pragma once

#include <kiln/tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::tools {

// The largest image kiln decodes, checked from the file's header before any
// pixel is decoded (a 4,000,000 x 1 PNG of a few hundred bytes would
// otherwise cost gigabytes): at most kMaxImagePixels pixels (8192 x 8192) and
// kMaxImageSide pixels a side. The image resized for the centre crop must
// fit kMaxImagePixels too (a very long, thin image would not).
inline constexpr std::int64_t kMaxImagePixels = std::int64_t{1} << 26;
inline constexpr int kMaxImageSide = 32768;

struct ImageInfo {
  int width = 0, height = 0, channels = 0;  // channels: as stored in the file
};

struct RgbImage {
  ImageInfo info;
  std::vector<unsigned char> rgb;  // width x height x 3, row-major
};

// Decodes an image file (PNG, JPEG, BMP, ... : what stb_image reads) as 8-bit
// RGB. Throws Error(Io) if the file cannot be read, Error(Corrupt) if it is
// not an image stb_image can decode, Error(InvalidArgument) naming the file
// and its size if it is larger than the limits above.
RgbImage read_rgb_image(const std::string& path);

// Returns a [batch, 3, size, size] f32 tensor (the image repeated `batch`
// times). Throws as read_rgb_image does, and Error(InvalidArgument) when the
// resized image would pass kMaxImagePixels.
Tensor load_image_tensor(const std::string& path, std::int64_t size, std::int64_t batch, ImageInfo* info = nullptr);

}  // namespace kiln::tools

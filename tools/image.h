// Loading a photograph as a model input, with torchvision's ImageNet
// preprocessing: resize the shorter side, centre-crop, scale to [0, 1],
// normalise by ImageNet's mean and standard deviation, NCHW.
#pragma once

#include <kiln/tensor.h>

#include <cstdint>
#include <string>

namespace kiln::tools {

struct ImageInfo {
  int width = 0, height = 0, channels = 0;
};

// Returns a [batch, 3, size, size] f32 tensor (the image repeated `batch`
// times). Throws Error(Io) if the file cannot be read and Error(Corrupt) if it
// is not an image stb_image can decode.
Tensor load_image_tensor(const std::string& path, std::int64_t size, std::int64_t batch, ImageInfo* info = nullptr);

}  // namespace kiln::tools

#include "src/zoo/dense_prediction.h"

#include <kiln/error.h>

#include "src/base/check.h"

namespace kiln::models {

std::int64_t check_dense_options(const std::string& model, const ModelOptions& options,
                                 std::int64_t min_image_size, std::int64_t default_classes) {
  KILN_CHECK(options.batch >= 1, ErrorKind::InvalidArgument,
             model + ": batch must be >= 1, got " + std::to_string(options.batch));
  KILN_CHECK(options.image_size >= min_image_size, ErrorKind::InvalidArgument,
             model + ": image_size must be >= " + std::to_string(min_image_size) + ", got " +
                 std::to_string(options.image_size));
  KILN_CHECK(options.num_classes >= 0, ErrorKind::InvalidArgument,
             model + ": num_classes must be >= 0 (0 = " + std::to_string(default_classes) + "), got " +
                 std::to_string(options.num_classes));
  return options.num_classes == 0 ? default_classes : options.num_classes;
}

Builder::Value upsample_bilinear(Builder& b, Builder::Value x, std::int64_t height, std::int64_t width) {
  Shape sizes = b.shape(x);
  KILN_ASSERT(sizes.size() == 4);
  sizes[2] = height;
  sizes[3] = width;
  Attributes attrs;
  attrs.set("mode", std::string("linear"));
  attrs.set("coordinate_transformation_mode", std::string("pytorch_half_pixel"));
  attrs.set("sizes", std::vector<std::int64_t>(sizes.begin(), sizes.end()));
  return b.op("Resize", {x}, attrs).at(0);
}

}  // namespace kiln::models

// The classification family of the built-in zoo.
#include "src/zoo/classification.h"

#include <kiln/error.h>

#include "src/base/check.h"
#include "src/zoo/zoo.h"

#include <array>

namespace kiln::models {

namespace {

constexpr std::array kClassificationModels{
    ModelEntry{"resnet50", &resnet50},
    ModelEntry{"mobilenet_v2", &mobilenet_v2},
    ModelEntry{"efficientnet_b0", &efficientnet_b0},
    ModelEntry{"convnext_tiny", &convnext_tiny},
    ModelEntry{"vit_b_16", &vit_b_16},
};

}  // namespace

std::span<const ModelEntry> classification_models() { return kClassificationModels; }

ClassifierShape check_classifier_options(const std::string& model, const ModelOptions& options,
                                         std::int64_t min_image_size) {
  KILN_CHECK(options.batch >= 1, ErrorKind::InvalidArgument,
             model + ": batch must be >= 1, got " + std::to_string(options.batch));
  KILN_CHECK(options.image_size >= min_image_size, ErrorKind::InvalidArgument,
             model + ": image_size must be >= " + std::to_string(min_image_size) + ", got " +
                 std::to_string(options.image_size));
  KILN_CHECK(options.num_classes >= 0, ErrorKind::InvalidArgument,
             model + ": num_classes must be >= 0 (0 = 1000), got " + std::to_string(options.num_classes));
  return {.num_classes = options.num_classes == 0 ? 1000 : options.num_classes};
}

}  // namespace kiln::models

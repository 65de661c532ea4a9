// Internal to src/zoo: the classification family of the zoo
// (torchvision architectures; input "input" [batch, 3, S, S] f32, output
// "logits" [batch, num_classes]). classification.cpp lists them by name.
#pragma once

#include <kiln/models.h>

#include <cstdint>
#include <string>

namespace kiln::models {

struct ClassifierShape {
  std::int64_t num_classes = 1000;
};

// Checks batch, image_size >= min_image_size and num_classes; resolves
// num_classes 0 to 1000. Throws InvalidArgument naming the model.
ClassifierShape check_classifier_options(const std::string& model, const ModelOptions& options,
                                         std::int64_t min_image_size = 1);

Model resnet50(const ModelOptions& options);
Model mobilenet_v2(const ModelOptions& options);
Model efficientnet_b0(const ModelOptions& options);
Model convnext_tiny(const ModelOptions& options);
Model vit_b_16(const ModelOptions& options);  // image_size must be a multiple of 16

}  // namespace kiln::models

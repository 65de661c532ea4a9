// Internal to src/zoo: the segmentation and detection families of the zoo
// and the small pieces they share (option checks, the bilinear upsampling
// torchvision's heads end with).
#pragma once

#include <kiln/builder.h>
#include <kiln/models.h>

#include <cstdint>
#include <string>

namespace kiln::models {

// Checks batch >= 1, image_size >= min_image_size and num_classes >= 0;
// returns num_classes with 0 resolved to default_classes. Throws
// InvalidArgument naming the model.
std::int64_t check_dense_options(const std::string& model, const ModelOptions& options,
                                 std::int64_t min_image_size, std::int64_t default_classes);

// F.interpolate(x, size=(height, width), mode="bilinear", align_corners=False)
// as torch.onnx.export writes it: Resize, linear, pytorch_half_pixel, sizes.
Builder::Value upsample_bilinear(Builder& b, Builder::Value x, std::int64_t height, std::int64_t width);

// Segmentation (torchvision, aux classifiers off): input "input"
// [batch, 3, S, S], output "out" [batch, classes (0 -> 21, VOC), S, S].
Model deeplabv3_mobilenet_v3_large(const ModelOptions& options);
Model lraspp_mobilenet_v3_large(const ModelOptions& options);
Model fcn_resnet50(const ModelOptions& options);
// Hugging Face SegformerForSemanticSegmentation (nvidia/mit-b0): output
// "logits" [batch, classes (0 -> 150, ADE20k), S/4, S/4].
Model segformer_b0(const ModelOptions& options);

// DETR with a ResNet-50 backbone: outputs "logits" [batch, 100, classes + 1]
// (0 -> 91 COCO classes) and "boxes" [batch, 100, 4] (cx, cy, w, h in [0, 1]).
Model detr_resnet50(const ModelOptions& options);

}  // namespace kiln::models

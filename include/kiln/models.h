// Built-in models written with kiln::Builder, weights from a fixed seed so
// that tests and benchmarks need no downloads.
#pragma once

#include <kiln/export.h>
#include <kiln/model.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::models {

struct KILN_API ModelOptions {
  std::int64_t batch = 1;
  std::int64_t image_size = 224;   // square input, NCHW f32
  // 0: the model's usual head (1000 ImageNet classes, 21 VOC classes for
  // segmentation, 91 COCO classes for detection).
  std::int64_t num_classes = 0;
  std::uint64_t seed = 0;
};

// torchvision's ResNet-18 architecture (BasicBlock, [2, 2, 2, 2]); input
// "input" [batch, 3, image_size, image_size], output "logits" [batch, num_classes].
KILN_API Model resnet18(const ModelOptions& options = {});

// Names accepted by build(): "resnet18", ... (every family of the zoo; see
// docs/models.md for each one's inputs, outputs and task).
KILN_API std::vector<std::string> names();
// What a built-in model's outputs mean, the same as build(name).task()
// ("classification", "segmentation" or "detection") without building it.
// Accepts the aliases below; throws Error(NotFound) listing the known names.
KILN_API std::string task_of(const std::string& name);
// The input height and width a built-in model is usually run at (its
// torchvision weights' training size): 320 for SSDLite320, else 224. What
// `kiln run`, `kiln tune` and `kiln bench` use when no --image-size is given,
// so that tuning records are for the shapes benchmarks run. Accepts the
// aliases below; throws Error(NotFound) listing the known names.
KILN_API std::int64_t usual_image_size(const std::string& name);
// Also accepts the short aliases "deeplabv3_mobilenet_v3",
// "lraspp_mobilenet_v3" and "ssdlite320_mobilenet_v3" for the MobileNetV3-Large
// variants (the model keeps its canonical name). Throws Error(NotFound)
// listing the known names.
KILN_API Model build(const std::string& name, const ModelOptions& options = {});

}  // namespace kiln::models

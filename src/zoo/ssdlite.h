// Internal to src/zoo: torchvision's SSDLite detector.
#pragma once

#include <kiln/models.h>

namespace kiln::models {

// torchvision's ssdlite320_mobilenet_v3_large with its post-processing
// (score threshold 0.001, top 300 candidates per class, batched NMS at IoU
// 0.55, 300 detections), which runs as graph breaks on the host. Input
// "input" [1, 3, S, S] (already normalised; S >= 32); outputs "boxes"
// f32[?, 4] (x1, y1, x2, y2 in pixels), "scores" f32[?] and "labels" i64[?].
Model ssdlite320_mobilenet_v3_large(const ModelOptions& options);

}  // namespace kiln::models

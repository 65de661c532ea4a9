// The detection family of the built-in zoo (DETR in detr.cpp).
#include "src/zoo/dense_prediction.h"
#include "src/zoo/ssdlite.h"
#include "src/zoo/zoo.h"

#include <array>

namespace kiln::models {

namespace {

constexpr std::array kDetectionModels{
    ModelEntry{"detr_resnet50", &detr_resnet50},
    ModelEntry{"ssdlite320_mobilenet_v3_large", &ssdlite320_mobilenet_v3_large},
};

}  // namespace

std::span<const ModelEntry> detection_models() { return kDetectionModels; }

}  // namespace kiln::models

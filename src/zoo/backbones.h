// Internal to src/zoo: backbones that several model families share
// (classification heads, segmentation and detection models build on them).
#pragma once

#include <kiln/builder.h>

#include <cstdint>
#include <vector>

namespace kiln::models {

// torchvision's ResNet-50 from conv1 to layer4 (no avgpool/fc), with
// replace_stride_with_dilation = {false, dilate_layer3, dilate_layer4}.
// Node and constant names are torchvision's state_dict keys below the
// builder's current scope ("layer3.0.conv2.weight"); BatchNorm stays as
// BatchNormalization nodes with randomised statistics. x is [N, 3, H, W];
// returns layer4's output [N, 2048, h, w]. If stage_outputs is given, the
// outputs of layer1..layer4 are appended to it in that order.
Builder::Value resnet50_trunk(Builder& b, std::uint64_t seed, Builder::Value x, bool dilate_layer3,
                              bool dilate_layer4, std::vector<Builder::Value>* stage_outputs = nullptr);

class LayerWriter;  // src/zoo/layers.h

// torchvision's MobileNetV3-Large `features` (features.0 .. features.16),
// written as layers "0".."16" below the writer's current scope (torchvision's
// segmentation models name them "backbone.<i>"). With `dilated`, the last
// stage (features.13..15) keeps stride 1 and dilates by 2, as
// mobilenet_v3_large(dilated=True) does: output stride 16 instead of 32.
// x is [N, 3, H, W]; returns features.16's output [N, 960, h, w]. If
// feature_outputs is given, the output of every features.<i> is appended in
// order (17 values), so callers pick taps by torchvision's indices.
Builder::Value mobilenet_v3_large_features(LayerWriter& w, Builder::Value x, bool dilated,
                                           std::vector<Builder::Value>* feature_outputs = nullptr);

// The two parts of MobileNetV3-Large's features that torchvision's
// SSDLiteFeatureExtractorMobileNet makes by cutting layer `split` (its
// c4_pos) after its expansion conv:
//   "0": features.0 .. features.<split-1>, then layer split's expansion
//        (Conv2dNormActivation) named "0.<split>.0" / "0.<split>.1";
//   "1": the rest of layer split (depthwise, squeeze-excitation, projection)
//        named "1.0.1", "1.0.2", "1.0.3" (block[1:] keeps its indices), then
//        features.<split+1> .. features.16 named "1.1", "1.2", ...
// Both are written below the writer's current scope. With `reduced_tail`
// (torchvision's mobilenet_v3_large(reduced_tail=True), which SSDLite uses
// when it does not start from an ImageNet backbone), features.13..16 are half
// as wide: 80 output channels instead of 160, expansions 480 instead of 960,
// and a 480-channel last conv.
struct MobileNetV3LargeSplit {
  Builder::Value expansion;  // part "0"'s output: layer split's expanded map (SSDLite's first feature map)
  Builder::Value last;       // part "1"'s output: the last conv's
};
MobileNetV3LargeSplit mobilenet_v3_large_split_features(LayerWriter& w, Builder::Value x, int split,
                                                        bool reduced_tail);

}  // namespace kiln::models

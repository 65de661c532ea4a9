// The segmentation family of the built-in zoo: torchvision's DeepLabV3,
// LR-ASPP and FCN (aux classifiers off) and Hugging Face's SegFormer-B0
// (segformer.cpp). Constant names follow the state_dict keys.
#include <kiln/builder.h>
#include <kiln/error.h>

#include "src/zoo/backbones.h"
#include "src/zoo/dense_prediction.h"
#include "src/zoo/layers.h"
#include "src/zoo/zoo.h"

#include <array>

namespace kiln::models {

namespace {

using Value = Builder::Value;

constexpr std::int64_t kVocClasses = 21;
// torchvision's MobileNetV3 segmentation taps (stage_indices[-4], [-1]).
constexpr std::size_t kMobileNetLowTap = 4;    // features.4: 40 channels, stride 8
constexpr std::size_t kMobileNetHighTap = 16;  // features.16: 960 channels, stride 16 (dilated)
constexpr ConvInit kClassifierInit{.weight_std = std::nullopt, .bias_std = 0.01};

// Conv (no bias) + BatchNorm + ReLU named "<name>.0", "<name>.1".
Value conv_bn_relu(LayerWriter& w, const std::string& name, Value x, const ConvSpec& spec) {
  LayerWriter::Scope scope(w, name);
  x = w.conv("0", x, spec);
  return w.builder().relu(w.batch_norm("1", x, spec.out_channels));
}

// torchvision's ASPP(in_channels, [12, 24, 36]) with 256 output channels.
Value aspp(LayerWriter& w, Value x, std::int64_t in_channels) {
  Builder& b = w.builder();
  constexpr std::int64_t channels = 256;
  constexpr std::array<std::int64_t, 3> rates{12, 24, 36};
  const Shape shape = b.shape(x);
  std::vector<Value> branches;
  {
    LayerWriter::Scope convs(w, "convs");
    branches.push_back(conv_bn_relu(w, "0", x, {.in_channels = in_channels, .out_channels = channels}));
    for (std::size_t i = 0; i < rates.size(); ++i)
      branches.push_back(conv_bn_relu(w, std::to_string(i + 1), x,
                                      {.in_channels = in_channels, .out_channels = channels, .kernel = 3,
                                       .padding = rates[i], .dilation = rates[i]}));
    // ASPPPooling: AdaptiveAvgPool2d(1), conv, BN, ReLU, then back to h x w.
    LayerWriter::Scope pooling(w, std::to_string(rates.size() + 1));
    Value pooled = b.global_avg_pool(x);
    pooled = w.conv("1", pooled, {.in_channels = in_channels, .out_channels = channels});
    pooled = b.relu(w.batch_norm("2", pooled, channels));
    branches.push_back(upsample_bilinear(b, pooled, shape[2], shape[3]));
  }
  const auto branch_count = static_cast<std::int64_t>(branches.size());
  // project: conv, BN, ReLU, Dropout (identity at inference).
  return conv_bn_relu(w, "project", b.concat(branches, 1),
                      {.in_channels = branch_count * channels, .out_channels = channels});
}

// DeepLabHead ("classifier"): ASPP, 3x3 conv + BN + ReLU, 1x1 classifier.
Value deeplab_head(LayerWriter& w, Value x, std::int64_t in_channels, std::int64_t classes) {
  Builder& b = w.builder();
  LayerWriter::Scope classifier(w, "classifier");
  {
    LayerWriter::Scope head(w, "0");
    x = aspp(w, x, in_channels);
  }
  x = w.conv("1", x, {.in_channels = 256, .out_channels = 256, .kernel = 3, .padding = 1});
  x = b.relu(w.batch_norm("2", x, 256));
  return w.conv("4", x, {.in_channels = 256, .out_channels = classes, .init = kClassifierInit});
}

// LRASPPHead ("classifier"): a pooled sigmoid gate on the high features,
// upsampled to the low features' size; one classifier on each, summed.
Value lraspp_head(LayerWriter& w, Value low, Value high, std::int64_t classes) {
  Builder& b = w.builder();
  const std::int64_t low_channels = b.shape(low)[1];
  const std::int64_t high_channels = b.shape(high)[1];
  constexpr std::int64_t inter = 128;
  LayerWriter::Scope head(w, "classifier");
  Value x = conv_bn_relu(w, "cbr", high, {.in_channels = high_channels, .out_channels = inter});
  Value gate;
  {
    LayerWriter::Scope scale(w, "scale");
    gate = b.global_avg_pool(high);
    gate = b.sigmoid(w.conv("1", gate, {.in_channels = high_channels, .out_channels = inter}));
  }
  x = b.mul(x, gate);
  const Shape low_shape = b.shape(low);
  x = upsample_bilinear(b, x, low_shape[2], low_shape[3]);
  Value low_logits =
      w.conv("low_classifier", low, {.in_channels = low_channels, .out_channels = classes, .init = kClassifierInit});
  Value high_logits =
      w.conv("high_classifier", x, {.in_channels = inter, .out_channels = classes, .init = kClassifierInit});
  return b.add(low_logits, high_logits);
}

// FCNHead ("classifier"): 3x3 conv to in/4 + BN + ReLU, Dropout, 1x1 classifier.
Value fcn_head(LayerWriter& w, Value x, std::int64_t classes) {
  Builder& b = w.builder();
  LayerWriter::Scope classifier(w, "classifier");
  const std::int64_t in_channels = b.shape(x)[1];
  const std::int64_t inter = in_channels / 4;
  x = w.conv("0", x, {.in_channels = in_channels, .out_channels = inter, .kernel = 3, .padding = 1});
  x = b.relu(w.batch_norm("1", x, inter));
  return w.conv("4", x, {.in_channels = inter, .out_channels = classes, .init = kClassifierInit});
}

// Input "input" [batch, 3, S, S]; returns the builder's input value.
Value image_input(Builder& b, const ModelOptions& options) {
  return b.input("input", DType::f32, {options.batch, 3, options.image_size, options.image_size});
}

Model finish_segmentation(Builder& b, Value logits, const ModelOptions& options) {
  Value out = upsample_bilinear(b, logits, options.image_size, options.image_size);
  b.set_name(out, "out");
  return b.build({out}).with_task("segmentation");
}

}  // namespace

Model deeplabv3_mobilenet_v3_large(const ModelOptions& options) {
  const std::int64_t classes = check_dense_options("deeplabv3_mobilenet_v3_large", options, 1, kVocClasses);
  Builder b("deeplabv3_mobilenet_v3_large");
  LayerWriter w(b, options.seed);
  Value x = image_input(b, options);
  {
    LayerWriter::Scope backbone(w, "backbone");
    x = mobilenet_v3_large_features(w, x, /*dilated=*/true);
  }
  const std::int64_t in_channels = b.shape(x)[1];
  x = deeplab_head(w, x, in_channels, classes);
  return finish_segmentation(b, x, options);
}

Model lraspp_mobilenet_v3_large(const ModelOptions& options) {
  const std::int64_t classes = check_dense_options("lraspp_mobilenet_v3_large", options, 1, kVocClasses);
  Builder b("lraspp_mobilenet_v3_large");
  LayerWriter w(b, options.seed);
  std::vector<Value> features;
  {
    LayerWriter::Scope backbone(w, "backbone");
    mobilenet_v3_large_features(w, image_input(b, options), /*dilated=*/true, &features);
  }
  Value logits = lraspp_head(w, features.at(kMobileNetLowTap), features.at(kMobileNetHighTap), classes);
  return finish_segmentation(b, logits, options);
}

Model fcn_resnet50(const ModelOptions& options) {
  const std::int64_t classes = check_dense_options("fcn_resnet50", options, 1, kVocClasses);
  Builder b("fcn_resnet50");
  Value x = image_input(b, options);
  b.push_scope("backbone");
  x = resnet50_trunk(b, options.seed, x, /*dilate_layer3=*/true, /*dilate_layer4=*/true);
  b.pop_scope();
  LayerWriter w(b, options.seed);
  return finish_segmentation(b, fcn_head(w, x, classes), options);
}

namespace {

constexpr std::array kSegmentationModels{
    ModelEntry{"deeplabv3_mobilenet_v3_large", &deeplabv3_mobilenet_v3_large},
    ModelEntry{"lraspp_mobilenet_v3_large", &lraspp_mobilenet_v3_large},
    ModelEntry{"fcn_resnet50", &fcn_resnet50},
    ModelEntry{"segformer_b0", &segformer_b0},
};

}  // namespace

std::span<const ModelEntry> segmentation_models() { return kSegmentationModels; }

}  // namespace kiln::models

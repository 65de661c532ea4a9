// torchvision's MobileNetV2 (width 1.0): inverted residual blocks with ReLU6,
// which torch.onnx.export writes as Clip(0, 6).
#include <kiln/builder.h>
#include <kiln/models.h>

#include "src/zoo/classification.h"
#include "src/zoo/layers.h"

namespace kiln::models {

namespace {

using Value = Builder::Value;

// Conv2dNormActivation: "<name>.0" conv (no bias), "<name>.1" BN, then ReLU6.
Value conv_bn_relu6(LayerWriter& w, const std::string& name, Value x, const ConvSpec& spec) {
  LayerWriter::Scope scope(w, name);
  x = w.conv("0", x, spec);
  x = w.batch_norm("1", x, spec.out_channels);
  return w.builder().clip(x, 0.0f, 6.0f);
}

// InvertedResidual: optional 1x1 expansion, 3x3 depthwise, linear 1x1 projection.
Value inverted_residual(LayerWriter& w, const std::string& name, Value x, std::int64_t in_channels,
                        std::int64_t out_channels, std::int64_t stride, std::int64_t expand_ratio) {
  LayerWriter::Scope scope(w, name);
  LayerWriter::Scope conv_scope(w, "conv");
  const std::int64_t hidden = in_channels * expand_ratio;
  int index = 0;
  Value y = x;
  if (expand_ratio != 1)
    y = conv_bn_relu6(w, std::to_string(index++), y, {.in_channels = in_channels, .out_channels = hidden});
  y = conv_bn_relu6(w, std::to_string(index++), y,
                    {.in_channels = hidden, .out_channels = hidden, .kernel = 3, .stride = stride, .padding = 1,
                     .groups = hidden});
  y = w.conv(std::to_string(index++), y, {.in_channels = hidden, .out_channels = out_channels});
  y = w.batch_norm(std::to_string(index), y, out_channels);
  const bool residual = stride == 1 && in_channels == out_channels;
  return residual ? w.builder().add(x, y) : y;
}

}  // namespace

Model mobilenet_v2(const ModelOptions& options) {
  const ClassifierShape shape = check_classifier_options("mobilenet_v2", options);
  Builder b("mobilenet_v2");
  LayerWriter w(b, options.seed);
  Value x = b.input("input", DType::f32, {options.batch, 3, options.image_size, options.image_size});

  struct Stage {
    std::int64_t expand_ratio;
    std::int64_t channels;
    int blocks;
    std::int64_t stride;
  };
  constexpr Stage kStages[] = {{1, 16, 1, 1},  {6, 24, 2, 2},  {6, 32, 3, 2},  {6, 64, 4, 2},
                               {6, 96, 3, 1},  {6, 160, 3, 2}, {6, 320, 1, 1}};
  constexpr std::int64_t kStemChannels = 32;
  constexpr std::int64_t kLastChannels = 1280;
  {
    LayerWriter::Scope features(w, "features");
    x = conv_bn_relu6(w, "0", x,
                      {.in_channels = 3, .out_channels = kStemChannels, .kernel = 3, .stride = 2, .padding = 1});
    std::int64_t in_channels = kStemChannels;
    int index = 1;
    for (const Stage& s : kStages) {
      for (int i = 0; i < s.blocks; ++i) {
        x = inverted_residual(w, std::to_string(index++), x, in_channels, s.channels, i == 0 ? s.stride : 1,
                              s.expand_ratio);
        in_channels = s.channels;
      }
    }
    x = conv_bn_relu6(w, std::to_string(index), x, {.in_channels = in_channels, .out_channels = kLastChannels});
  }
  x = b.flatten(b.global_avg_pool(x), 1);
  Value logits;
  {
    LayerWriter::Scope classifier(w, "classifier");  // "classifier.0" is Dropout: nothing at inference
    logits = w.linear("1", x, kLastChannels, shape.num_classes,
                      {.kind = LinearInit::Kind::Normal, .weight_scale = 0.01, .bias_scale = 0.01});
  }
  b.set_name(logits, "logits");
  return b.build({logits}).with_task("classification");
}

}  // namespace kiln::models

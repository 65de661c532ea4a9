// torchvision's EfficientNet-B0: MBConv blocks with squeeze-and-excitation
// and SiLU, which torch.onnx.export writes as x * Sigmoid(x).
#include <kiln/builder.h>
#include <kiln/models.h>

#include "src/zoo/classification.h"
#include "src/zoo/layers.h"

#include <algorithm>
#include <cmath>

namespace kiln::models {

namespace {

using Value = Builder::Value;

// Conv2dNormActivation: "<name>.0" conv (no bias), "<name>.1" BN, then SiLU if asked.
Value conv_bn(LayerWriter& w, const std::string& name, Value x, const ConvSpec& spec, bool silu) {
  LayerWriter::Scope scope(w, name);
  x = w.conv("0", x, spec);
  x = w.batch_norm("1", x, spec.out_channels);
  return silu ? w.silu(x) : x;
}

// SqueezeExcitation: x * Sigmoid(fc2(SiLU(fc1(avgpool(x))))), fc1/fc2 are 1x1 convs with bias.
Value squeeze_excitation(LayerWriter& w, const std::string& name, Value x, std::int64_t channels,
                         std::int64_t squeeze_channels) {
  Builder& b = w.builder();
  LayerWriter::Scope scope(w, name);
  // torchvision zero-initialises these biases; small random ones test the bias path.
  const ConvInit init = {.weight_std = std::nullopt, .bias_std = 0.1};
  Value s = b.global_avg_pool(x);
  s = w.silu(w.conv("fc1", s, {.in_channels = channels, .out_channels = squeeze_channels, .init = init}));
  s = b.sigmoid(w.conv("fc2", s, {.in_channels = squeeze_channels, .out_channels = channels, .init = init}));
  return b.mul(s, x);
}

struct MBConvConfig {
  std::int64_t expand_ratio;
  std::int64_t kernel;
  std::int64_t stride;
  std::int64_t in_channels;
  std::int64_t out_channels;
  int blocks;
};

Value mbconv(LayerWriter& w, const std::string& name, Value x, const MBConvConfig& c) {
  LayerWriter::Scope scope(w, name);
  LayerWriter::Scope block(w, "block");
  const std::int64_t expanded = c.in_channels * c.expand_ratio;
  int index = 0;
  Value y = x;
  if (expanded != c.in_channels)
    y = conv_bn(w, std::to_string(index++), y, {.in_channels = c.in_channels, .out_channels = expanded}, true);
  y = conv_bn(w, std::to_string(index++), y,
              {.in_channels = expanded, .out_channels = expanded, .kernel = c.kernel, .stride = c.stride,
               .padding = (c.kernel - 1) / 2, .groups = expanded},
              true);
  y = squeeze_excitation(w, std::to_string(index++), y, expanded, std::max<std::int64_t>(1, c.in_channels / 4));
  y = conv_bn(w, std::to_string(index), y, {.in_channels = expanded, .out_channels = c.out_channels}, false);
  // Stochastic depth is the identity at inference.
  const bool residual = c.stride == 1 && c.in_channels == c.out_channels;
  return residual ? w.builder().add(y, x) : y;
}

}  // namespace

Model efficientnet_b0(const ModelOptions& options) {
  const ClassifierShape shape = check_classifier_options("efficientnet_b0", options);
  Builder b("efficientnet_b0");
  LayerWriter w(b, options.seed);
  Value x = b.input("input", DType::f32, {options.batch, 3, options.image_size, options.image_size});

  constexpr MBConvConfig kStages[] = {{1, 3, 1, 32, 16, 1},  {6, 3, 2, 16, 24, 2},   {6, 5, 2, 24, 40, 2},
                                      {6, 3, 2, 40, 80, 3},  {6, 5, 1, 80, 112, 3},  {6, 5, 2, 112, 192, 4},
                                      {6, 3, 1, 192, 320, 1}};
  constexpr std::int64_t kLastChannels = 4 * 320;
  {
    LayerWriter::Scope features(w, "features");
    x = conv_bn(w, "0", x, {.in_channels = 3, .out_channels = 32, .kernel = 3, .stride = 2, .padding = 1}, true);
    int index = 1;
    for (const MBConvConfig& stage : kStages) {
      LayerWriter::Scope stage_scope(w, std::to_string(index++));
      for (int i = 0; i < stage.blocks; ++i) {
        MBConvConfig block = stage;
        if (i > 0) {
          block.in_channels = stage.out_channels;
          block.stride = 1;
        }
        x = mbconv(w, std::to_string(i), x, block);
      }
    }
    x = conv_bn(w, std::to_string(index), x, {.in_channels = 320, .out_channels = kLastChannels}, true);
  }
  {
    LayerWriter::Scope pool(w, "avgpool");
    x = b.global_avg_pool(x);
  }
  x = b.flatten(x, 1);
  Value logits;
  {
    LayerWriter::Scope classifier(w, "classifier");  // "classifier.0" is Dropout: nothing at inference
    const double bound = 1.0 / std::sqrt(static_cast<double>(shape.num_classes));
    logits = w.linear("1", x, kLastChannels, shape.num_classes,
                      {.kind = LinearInit::Kind::Uniform, .weight_scale = bound, .bias_scale = 0.01});
  }
  b.set_name(logits, "logits");
  return b.build({logits}).with_task("classification");
}

}  // namespace kiln::models

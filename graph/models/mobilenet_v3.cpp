// torchvision's MobileNetV3-Large feature extractor (model.features), with the
// dilated last stage its segmentation models use.
#include <kiln/builder.h>
#include <kiln/error.h>

#include "graph/ir.h"
#include "graph/models/backbones.h"
#include "graph/models/layers.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string>

namespace kiln::models {

namespace {

using Value = Builder::Value;

// torchvision's MobileNetV3 BatchNorm: nn.BatchNorm2d(eps=0.001).
constexpr float kBatchNormEpsilon = 1e-3f;

enum class Activation { Relu, HardSwish };

// One row of torchvision's inverted_residual_setting (bneck_conf).
struct BlockConfig {
  std::int64_t in_channels;
  std::int64_t kernel;
  std::int64_t expanded;
  std::int64_t out_channels;
  bool squeeze_excite;
  Activation activation;
  std::int64_t stride;
  bool last_stage;  // dilated (stride becomes 1, dilation 2) when the backbone is dilated
};

// torchvision's spelling in the table below.
constexpr auto RE = Activation::Relu;
constexpr auto HS = Activation::HardSwish;

constexpr std::array<BlockConfig, 15> kLargeBlocks{{
    {16, 3, 16, 16, false, RE, 1, false},
    {16, 3, 64, 24, false, RE, 2, false},
    {24, 3, 72, 24, false, RE, 1, false},
    {24, 5, 72, 40, true, RE, 2, false},
    {40, 5, 120, 40, true, RE, 1, false},
    {40, 5, 120, 40, true, RE, 1, false},
    {40, 3, 240, 80, false, HS, 2, false},
    {80, 3, 200, 80, false, HS, 1, false},
    {80, 3, 184, 80, false, HS, 1, false},
    {80, 3, 184, 80, false, HS, 1, false},
    {80, 3, 480, 112, true, HS, 1, false},
    {112, 3, 672, 112, true, HS, 1, false},
    {112, 5, 672, 160, true, HS, 2, true},
    {160, 5, 960, 160, true, HS, 1, true},
    {160, 5, 960, 160, true, HS, 1, true},
}};

// torchvision's _make_divisible(v, 8): round to the nearest multiple of 8,
// never going below 90% of v.
std::int64_t make_divisible(std::int64_t v) {
  constexpr std::int64_t divisor = 8;
  std::int64_t rounded = std::max(divisor, (v + divisor / 2) / divisor * divisor);
  if (10 * rounded < 9 * v) rounded += divisor;
  return rounded;
}

Value activate(Builder& b, Value x, Activation activation) {
  if (activation == Activation::Relu) return b.relu(x);
  return b.op("HardSwish", {x}, {}).at(0);
}

// nn.Hardsigmoid as torch.onnx.export writes it: HardSigmoid(alpha=1/6, beta=0.5).
Value hard_sigmoid(Builder& b, Value x) {
  graph::Attributes attrs;
  attrs.set("alpha", 1.0 / 6.0);
  attrs.set("beta", 0.5);
  return b.op("HardSigmoid", {x}, attrs).at(0);
}

// Conv2dNormActivation: conv (no bias), BatchNorm, optional activation; named
// "<name>.0" and "<name>.1".
Value conv_bn(LayerWriter& w, const std::string& name, Value x, const ConvSpec& spec,
              std::optional<Activation> activation) {
  LayerWriter::Scope scope(w, name);
  x = w.conv("0", x, spec);
  x = w.batch_norm("1", x, spec.out_channels, kBatchNormEpsilon);
  return activation ? activate(w.builder(), x, *activation) : x;
}

// SqueezeExcitation: global pool, fc1 (1x1 conv) + ReLU, fc2 + HardSigmoid, scale.
Value squeeze_excitation(LayerWriter& w, const std::string& name, Value x, std::int64_t channels) {
  Builder& b = w.builder();
  LayerWriter::Scope scope(w, name);
  const std::int64_t squeezed = make_divisible(channels / 4);
  const ConvInit init{.weight_std = std::nullopt, .bias_std = 0.1};
  Value s = b.global_avg_pool(x);
  s = b.relu(w.conv("fc1", s, {.in_channels = channels, .out_channels = squeezed, .init = init}));
  s = hard_sigmoid(b, w.conv("fc2", s, {.in_channels = squeezed, .out_channels = channels, .init = init}));
  return b.mul(s, x);
}

// InvertedResidual: [expand 1x1] -> depthwise kxk -> [SE] -> project 1x1 (+ x).
Value inverted_residual(LayerWriter& w, const std::string& name, Value x, const BlockConfig& c, bool dilated) {
  LayerWriter::Scope scope(w, name);
  LayerWriter::Scope block(w, "block");
  const std::int64_t dilation = dilated && c.last_stage ? 2 : 1;
  const std::int64_t stride = dilation > 1 ? 1 : c.stride;
  int layer = 0;
  Value y = x;
  if (c.expanded != c.in_channels)
    y = conv_bn(w, std::to_string(layer++), y, {.in_channels = c.in_channels, .out_channels = c.expanded},
                c.activation);
  y = conv_bn(w, std::to_string(layer++), y,
              {.in_channels = c.expanded, .out_channels = c.expanded, .kernel = c.kernel, .stride = stride,
               .padding = (c.kernel - 1) / 2 * dilation, .dilation = dilation, .groups = c.expanded},
              c.activation);
  if (c.squeeze_excite) y = squeeze_excitation(w, std::to_string(layer++), y, c.expanded);
  y = conv_bn(w, std::to_string(layer++), y, {.in_channels = c.expanded, .out_channels = c.out_channels},
              std::nullopt);
  const bool residual = stride == 1 && c.in_channels == c.out_channels;
  return residual ? w.builder().add(y, x) : y;
}

}  // namespace

Value mobilenet_v3_large_features(LayerWriter& w, Value x, bool dilated, std::vector<Value>* feature_outputs) {
  KILN_CHECK(w.builder().shape(x).size() == 4 && w.builder().shape(x)[1] == 3, ErrorKind::ShapeMismatch,
             "mobilenet_v3_large_features: expected an input [N, 3, H, W], got " + shape_str(w.builder().shape(x)));
  auto record = [&](Value v) {
    if (feature_outputs) feature_outputs->push_back(v);
    return v;
  };
  int index = 0;
  x = record(conv_bn(w, std::to_string(index++), x,
                     {.in_channels = 3, .out_channels = 16, .kernel = 3, .stride = 2, .padding = 1},
                     Activation::HardSwish));
  for (const BlockConfig& config : kLargeBlocks)
    x = record(inverted_residual(w, std::to_string(index++), x, config, dilated));
  constexpr std::int64_t last_in = kLargeBlocks.back().out_channels;
  return record(conv_bn(w, std::to_string(index), x, {.in_channels = last_in, .out_channels = 6 * last_in},
                        Activation::HardSwish));
}

}  // namespace kiln::models

// torchvision's MobileNetV3-Large feature extractor (model.features), with the
// dilated last stage its segmentation models use, and the split at a layer's
// expansion (with the reduced tail) that SSDLite's feature extractor makes.
#include <kiln/builder.h>
#include <kiln/error.h>

#include "src/base/check.h"
#include "src/zoo/backbones.h"
#include "src/zoo/layers.h"

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

// mobilenet_v3_large(reduced_tail=True): the last stage with 160 // 2 and 960 // 2.
constexpr std::array<BlockConfig, 3> kReducedTail{{
    {112, 5, 672, 80, true, HS, 2, true},
    {80, 5, 480, 80, true, HS, 1, true},
    {80, 5, 480, 80, true, HS, 1, true},
}};

constexpr int kBlockCount = static_cast<int>(kLargeBlocks.size());  // features.1 .. features.15

// The configuration of the inverted residual features.<layer> (1..15).
const BlockConfig& block_config(int layer, bool reduced_tail) {
  KILN_ASSERT(layer >= 1 && layer <= kBlockCount);
  const int tail_start = kBlockCount - static_cast<int>(kReducedTail.size()) + 1;
  if (reduced_tail && layer >= tail_start) return kReducedTail[static_cast<std::size_t>(layer - tail_start)];
  return kLargeBlocks[static_cast<std::size_t>(layer - 1)];
}

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
  Attributes attrs;
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

// Dilation of a block's depthwise conv: the last stage dilates by 2 in a dilated backbone.
std::int64_t dilation_of(const BlockConfig& c, bool dilated) { return dilated && c.last_stage ? 2 : 1; }
std::int64_t stride_of(const BlockConfig& c, bool dilated) { return dilation_of(c, dilated) > 1 ? 1 : c.stride; }
bool has_expansion(const BlockConfig& c) { return c.expanded != c.in_channels; }
bool has_residual(const BlockConfig& c, bool dilated) {
  return stride_of(c, dilated) == 1 && c.in_channels == c.out_channels;
}

// An inverted residual's expansion: 1x1 conv to c.expanded, BatchNorm, activation.
Value expansion(LayerWriter& w, const std::string& name, Value x, const BlockConfig& c) {
  return conv_bn(w, name, x, {.in_channels = c.in_channels, .out_channels = c.expanded}, c.activation);
}

// The rest of an inverted residual after its expansion: depthwise kxk, [SE],
// project 1x1; layers named from `first_index` in the current scope.
Value depthwise_to_projection(LayerWriter& w, Value y, const BlockConfig& c, bool dilated, int first_index) {
  const std::int64_t dilation = dilation_of(c, dilated);
  int layer = first_index;
  y = conv_bn(w, std::to_string(layer++), y,
              {.in_channels = c.expanded, .out_channels = c.expanded, .kernel = c.kernel,
               .stride = stride_of(c, dilated), .padding = (c.kernel - 1) / 2 * dilation, .dilation = dilation,
               .groups = c.expanded},
              c.activation);
  if (c.squeeze_excite) y = squeeze_excitation(w, std::to_string(layer++), y, c.expanded);
  return conv_bn(w, std::to_string(layer), y, {.in_channels = c.expanded, .out_channels = c.out_channels},
                 std::nullopt);
}

// InvertedResidual: [expand 1x1] -> depthwise kxk -> [SE] -> project 1x1 (+ x).
Value inverted_residual(LayerWriter& w, const std::string& name, Value x, const BlockConfig& c, bool dilated) {
  LayerWriter::Scope scope(w, name);
  LayerWriter::Scope block(w, "block");
  Value y = has_expansion(c) ? expansion(w, "0", x, c) : x;
  y = depthwise_to_projection(w, y, c, dilated, has_expansion(c) ? 1 : 0);
  return has_residual(c, dilated) ? w.builder().add(y, x) : y;
}

// features.0: 3x3 stride-2 conv to 16 channels, BatchNorm, HardSwish.
Value stem(LayerWriter& w, const std::string& name, Value x) {
  return conv_bn(w, name, x, {.in_channels = 3, .out_channels = 16, .kernel = 3, .stride = 2, .padding = 1},
                 Activation::HardSwish);
}

// features.16: 1x1 conv widening 6x, BatchNorm, HardSwish.
Value last_conv(LayerWriter& w, const std::string& name, Value x, std::int64_t in_channels) {
  return conv_bn(w, name, x, {.in_channels = in_channels, .out_channels = 6 * in_channels}, Activation::HardSwish);
}

void check_image_input(Builder& b, Value x, const char* function) {
  KILN_CHECK(b.shape(x).size() == 4 && b.shape(x)[1] == 3, ErrorKind::ShapeMismatch,
             std::string(function) + ": expected an input [N, 3, H, W], got " + shape_str(b.shape(x)));
}

}  // namespace

Value mobilenet_v3_large_features(LayerWriter& w, Value x, bool dilated, std::vector<Value>* feature_outputs) {
  check_image_input(w.builder(), x, "mobilenet_v3_large_features");
  auto record = [&](Value v) {
    if (feature_outputs) feature_outputs->push_back(v);
    return v;
  };
  x = record(stem(w, "0", x));
  for (int layer = 1; layer <= kBlockCount; ++layer)
    x = record(inverted_residual(w, std::to_string(layer), x, block_config(layer, false), dilated));
  return record(last_conv(w, std::to_string(kBlockCount + 1), x, block_config(kBlockCount, false).out_channels));
}

MobileNetV3LargeSplit mobilenet_v3_large_split_features(LayerWriter& w, Value x, int split, bool reduced_tail) {
  check_image_input(w.builder(), x, "mobilenet_v3_large_split_features");
  KILN_CHECK(split >= 1 && split <= kBlockCount, ErrorKind::InvalidArgument,
             "mobilenet_v3_large_split_features: split must name an inverted residual (1.." +
                 std::to_string(kBlockCount) + "), got " + std::to_string(split));
  const BlockConfig& cut = block_config(split, reduced_tail);
  // torchvision refuses these too: the expansion must exist, and no residual may cross the cut.
  KILN_CHECK(has_expansion(cut) && !has_residual(cut, false), ErrorKind::InvalidArgument,
             "mobilenet_v3_large_split_features: features." + std::to_string(split) +
                 (has_expansion(cut) ? " has a residual connection across the split"
                                     : " has no expansion conv to split at"));
  MobileNetV3LargeSplit parts{};
  {
    LayerWriter::Scope first(w, "0");
    x = stem(w, "0", x);
    for (int layer = 1; layer < split; ++layer)
      x = inverted_residual(w, std::to_string(layer), x, block_config(layer, reduced_tail), false);
    parts.expansion = expansion(w, std::to_string(split), x, cut);
  }
  LayerWriter::Scope second(w, "1");
  {
    LayerWriter::Scope rest_of_cut(w, "0");
    x = depthwise_to_projection(w, parts.expansion, cut, false, 1);
  }
  int name = 1;
  for (int layer = split + 1; layer <= kBlockCount; ++layer)
    x = inverted_residual(w, std::to_string(name++), x, block_config(layer, reduced_tail), false);
  parts.last = last_conv(w, std::to_string(name), x, block_config(kBlockCount, reduced_tail).out_channels);
  return parts;
}

}  // namespace kiln::models

// torchvision's ResNet-50 (Bottleneck blocks, expansion 4) and its trunk,
// which segmentation and detection models share (src/zoo/backbones.h).
#include <kiln/builder.h>
#include <kiln/error.h>
#include <kiln/models.h>

#include "src/zoo/backbones.h"
#include "src/zoo/classification.h"
#include "src/zoo/layers.h"

namespace kiln::models {

namespace {

using Value = Builder::Value;

constexpr std::int64_t kExpansion = 4;

// Bottleneck: 1x1 reduce, 3x3 (carries stride and dilation), 1x1 expand.
Value bottleneck(LayerWriter& w, const std::string& name, Value x, std::int64_t in_channels, std::int64_t planes,
                 std::int64_t stride, std::int64_t dilation, bool downsample) {
  Builder& b = w.builder();
  LayerWriter::Scope scope(w, name);
  const std::int64_t out_channels = planes * kExpansion;
  Value y = w.conv("conv1", x, {.in_channels = in_channels, .out_channels = planes});
  y = b.relu(w.batch_norm("bn1", y, planes));
  y = w.conv("conv2", y,
             {.in_channels = planes, .out_channels = planes, .kernel = 3, .stride = stride, .padding = dilation,
              .dilation = dilation});
  y = b.relu(w.batch_norm("bn2", y, planes));
  y = w.conv("conv3", y, {.in_channels = planes, .out_channels = out_channels});
  y = w.batch_norm("bn3", y, out_channels);
  Value identity = x;
  if (downsample) {
    LayerWriter::Scope ds(w, "downsample");
    identity = w.conv("0", x, {.in_channels = in_channels, .out_channels = out_channels, .stride = stride});
    identity = w.batch_norm("1", identity, out_channels);
  }
  return b.relu(b.add(y, identity));
}

// Tracks torchvision's ResNet._make_layer state (inplanes, dilation).
class ResNet50Trunk {
 public:
  explicit ResNet50Trunk(LayerWriter& w) : w_(w) {}

  Value stem(Value x) {
    Builder& b = w_.builder();
    x = w_.conv("conv1", x, {.in_channels = 3, .out_channels = 64, .kernel = 7, .stride = 2, .padding = 3});
    x = b.relu(w_.batch_norm("bn1", x, 64));
    LayerWriter::Scope pool(w_, "maxpool");
    return b.max_pool2d(x, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1, 1, 1}});
  }

  // With `dilate`, the stage keeps its resolution and dilates instead; its
  // first block still uses the previous dilation, as torchvision does.
  Value layer(const std::string& name, Value x, std::int64_t planes, int blocks, std::int64_t stride, bool dilate) {
    LayerWriter::Scope scope(w_, name);
    const std::int64_t previous_dilation = dilation_;
    if (dilate) {
      dilation_ *= stride;
      stride = 1;
    }
    const bool downsample = stride != 1 || in_channels_ != planes * kExpansion;
    x = bottleneck(w_, "0", x, in_channels_, planes, stride, previous_dilation, downsample);
    in_channels_ = planes * kExpansion;
    for (int i = 1; i < blocks; ++i)
      x = bottleneck(w_, std::to_string(i), x, in_channels_, planes, 1, dilation_, false);
    return x;
  }

 private:
  LayerWriter& w_;
  std::int64_t in_channels_ = 64;
  std::int64_t dilation_ = 1;
};

}  // namespace

Value resnet50_trunk(Builder& b, std::uint64_t seed, Value x, bool dilate_layer3, bool dilate_layer4,
                     std::vector<Value>* stage_outputs) {
  LayerWriter w(b, seed);
  ResNet50Trunk trunk(w);
  x = trunk.stem(x);
  struct Stage {
    const char* name;
    std::int64_t planes;
    int blocks;
    std::int64_t stride;
    bool dilate;
  };
  const Stage stages[] = {{"layer1", 64, 3, 1, false},
                          {"layer2", 128, 4, 2, false},
                          {"layer3", 256, 6, 2, dilate_layer3},
                          {"layer4", 512, 3, 2, dilate_layer4}};
  for (const Stage& s : stages) {
    x = trunk.layer(s.name, x, s.planes, s.blocks, s.stride, s.dilate);
    if (stage_outputs) stage_outputs->push_back(x);
  }
  return x;
}

Model resnet50(const ModelOptions& options) {
  const ClassifierShape shape = check_classifier_options("resnet50", options);
  Builder b("resnet50");
  Value x = b.input("input", DType::f32, {options.batch, 3, options.image_size, options.image_size});
  x = resnet50_trunk(b, options.seed, x, false, false);
  LayerWriter w(b, options.seed);
  {
    LayerWriter::Scope pool(w, "avgpool");
    x = b.global_avg_pool(x);
  }
  x = b.flatten(x, 1);
  Value logits = w.linear("fc", x, 512 * kExpansion, shape.num_classes);
  b.set_name(logits, "logits");
  return b.build({logits}).with_task("classification");
}

}  // namespace kiln::models

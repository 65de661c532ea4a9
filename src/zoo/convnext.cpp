// torchvision's ConvNeXt-Tiny. LayerNorm2d is written as torch.onnx.export
// writes it: Transpose to channels-last, LayerNormalization, Transpose back;
// the block's Linear layers act on channels-last tensors (MatMul + Add).
#include <kiln/builder.h>
#include <kiln/models.h>

#include "src/zoo/classification.h"
#include "src/zoo/init.h"
#include "src/zoo/layers.h"

namespace kiln::models {

namespace {

using Value = Builder::Value;

constexpr float kConvNextNormEpsilon = 1e-6f;
constexpr double kWeightStd = 0.02;  // torchvision: trunc_normal_(std=0.02), bias 0
// torchvision zero-initialises biases; small random ones test the bias path.
constexpr double kBiasStd = 0.02;
const std::vector<std::int64_t> kToChannelsLast = {0, 2, 3, 1};
const std::vector<std::int64_t> kToChannelsFirst = {0, 3, 1, 2};

Value layer_norm_2d(LayerWriter& w, const std::string& name, Value x, std::int64_t channels) {
  Builder& b = w.builder();
  x = b.transpose(x, kToChannelsLast);
  x = w.layer_norm(name, x, channels, kConvNextNormEpsilon);
  return b.transpose(x, kToChannelsFirst);
}

ConvSpec conv_spec(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride,
                   std::int64_t padding, std::int64_t groups) {
  return {.in_channels = in, .out_channels = out, .kernel = kernel, .stride = stride, .padding = padding,
          .groups = groups, .init = {.weight_std = kWeightStd, .bias_std = kBiasStd}};
}

const LinearInit kConvNextLinearInit = {.kind = LinearInit::Kind::Normal, .weight_scale = kWeightStd,
                                .bias_scale = kBiasStd};

// CNBlock: depthwise 7x7, LayerNorm, Linear 4x, GELU, Linear, layer scale, residual.
Value cn_block(LayerWriter& w, const std::string& name, Value x, std::int64_t dim) {
  Builder& b = w.builder();
  LayerWriter::Scope scope(w, name);
  Value layer_scale;
  Value y;
  {
    LayerWriter::Scope block(w, "block");
    y = w.conv("0", x, conv_spec(dim, dim, 7, 1, 3, dim));
    y = b.transpose(y, kToChannelsLast);  // "block.1" Permute
    y = w.layer_norm("2", y, dim, kConvNextNormEpsilon);
    y = w.linear("3", y, dim, 4 * dim, kConvNextLinearInit);
    y = b.gelu(y);
    y = w.linear("5", y, 4 * dim, dim, kConvNextLinearInit);
    y = b.transpose(y, kToChannelsFirst);  // "block.6" Permute
  }
  // torchvision starts the layer scale at 1e-6, which would make every block
  // nearly the identity; a larger random scale keeps the blocks visible in tests.
  layer_scale = w.constant("layer_scale", init::uniform({dim, 1, 1}, 0.05, 0.3, w.seed("layer_scale")));
  // Stochastic depth is the identity at inference.
  return b.add(b.mul(layer_scale, y), x);
}

}  // namespace

Model convnext_tiny(const ModelOptions& options) {
  const ClassifierShape shape = check_classifier_options("convnext_tiny", options, 32);
  Builder b("convnext_tiny");
  LayerWriter w(b, options.seed);
  Value x = b.input("input", DType::f32, {options.batch, 3, options.image_size, options.image_size});

  constexpr std::int64_t kDims[] = {96, 192, 384, 768};
  constexpr int kBlocks[] = {3, 3, 9, 3};
  {
    LayerWriter::Scope features(w, "features");
    {
      LayerWriter::Scope stem(w, "0");
      x = w.conv("0", x, conv_spec(3, kDims[0], 4, 4, 0, 1));
      x = layer_norm_2d(w, "1", x, kDims[0]);
    }
    int index = 1;
    for (int stage = 0; stage < 4; ++stage) {
      {
        LayerWriter::Scope blocks(w, std::to_string(index++));
        for (int i = 0; i < kBlocks[stage]; ++i) x = cn_block(w, std::to_string(i), x, kDims[stage]);
      }
      if (stage == 3) break;
      LayerWriter::Scope downsample(w, std::to_string(index++));
      x = layer_norm_2d(w, "0", x, kDims[stage]);
      x = w.conv("1", x, conv_spec(kDims[stage], kDims[stage + 1], 2, 2, 0, 1));
    }
  }
  {
    LayerWriter::Scope pool(w, "avgpool");
    x = b.global_avg_pool(x);
  }
  Value logits;
  {
    LayerWriter::Scope classifier(w, "classifier");
    x = layer_norm_2d(w, "0", x, kDims[3]);
    x = b.flatten(x, 1);  // "classifier.1"
    logits = w.linear("2", x, kDims[3], shape.num_classes, kConvNextLinearInit);
  }
  b.set_name(logits, "logits");
  return b.build({logits}).with_task("classification");
}

}  // namespace kiln::models

// Hugging Face's SegformerForSemanticSegmentation with the nvidia/mit-b0
// configuration: a Mix Transformer encoder (overlapping patch embeddings,
// efficient self-attention with spatial reduction, Mix-FFN with a depthwise
// conv) and the all-MLP decode head. Constant names follow HF's state_dict.
#include <kiln/builder.h>
#include <kiln/error.h>

#include "src/zoo/attention.h"
#include "src/zoo/dense_prediction.h"
#include "src/zoo/layers.h"

#include <array>

namespace kiln::models {

namespace {

using Value = Builder::Value;

constexpr std::int64_t kAde20kClasses = 150;
constexpr std::int64_t kDecoderChannels = 256;
constexpr std::int64_t kMlpRatio = 4;

struct StageConfig {
  std::int64_t channels;
  int depth;
  std::int64_t heads;
  std::int64_t reduction;  // sr_ratio: keys and values come from a map this much coarser
  std::int64_t patch;      // patch embedding kernel
  std::int64_t stride;     // patch embedding stride
};

constexpr std::array<StageConfig, 4> kMitB0{{
    {32, 2, 1, 8, 7, 4},
    {64, 2, 2, 4, 3, 2},
    {160, 2, 5, 2, 3, 2},
    {256, 2, 8, 1, 3, 2},
}};

// HF initialises Linear and LayerNorm-free weights with N(0, 0.02).
constexpr LinearInit kLinearInit{.kind = LinearInit::Kind::Normal, .weight_scale = 0.02, .bias_scale = 0.02};

// A feature map [B, C, H, W] with its spatial size at hand.
struct Map {
  Value tokens;  // [B, H*W, C]
  std::int64_t height;
  std::int64_t width;
};

// SegformerEfficientSelfAttention + SegformerSelfOutput, "attention.*".
Value efficient_attention(LayerWriter& w, const Map& x, const StageConfig& stage) {
  Builder& b = w.builder();
  LayerWriter::Scope attention(w, "attention");
  Value context;
  {
    LayerWriter::Scope self(w, "self");
    Value q = w.linear("query", x.tokens, stage.channels, stage.channels, kLinearInit);
    Value kv_source = x.tokens;
    if (stage.reduction > 1) {
      Value map = map_from_tokens(b, x.tokens, x.height, x.width);
      map = w.conv("sr", map,
                   {.in_channels = stage.channels, .out_channels = stage.channels, .kernel = stage.reduction,
                    .stride = stage.reduction, .init = {.weight_std = 0.02, .bias_std = 0.02}});
      kv_source = w.layer_norm("layer_norm", tokens_from_map(b, map), stage.channels);
    }
    Value k = w.linear("key", kv_source, stage.channels, stage.channels, kLinearInit);
    Value v = w.linear("value", kv_source, stage.channels, stage.channels, kLinearInit);
    context = scaled_dot_product_attention(w, q, k, v, stage.heads);
  }
  LayerWriter::Scope output(w, "output");
  return w.linear("dense", context, stage.channels, stage.channels, kLinearInit);
}

// SegformerMixFFN: dense1, depthwise 3x3 conv on the map, GELU, dense2.
Value mix_ffn(LayerWriter& w, const Map& x, std::int64_t channels) {
  Builder& b = w.builder();
  LayerWriter::Scope mlp(w, "mlp");
  const std::int64_t hidden = channels * kMlpRatio;
  Value h = w.linear("dense1", x.tokens, channels, hidden, kLinearInit);
  {
    LayerWriter::Scope dwconv(w, "dwconv");
    Value map = map_from_tokens(b, h, x.height, x.width);
    map = w.conv("dwconv", map,
                 {.in_channels = hidden, .out_channels = hidden, .kernel = 3, .padding = 1, .groups = hidden,
                  .init = {.weight_std = 0.1, .bias_std = 0.02}});
    h = tokens_from_map(b, map);
  }
  h = b.gelu(h);
  return w.linear("dense2", h, hidden, channels, kLinearInit);
}

// SegformerLayer: pre-norm attention and Mix-FFN, each with a residual.
Value transformer_layer(LayerWriter& w, const std::string& name, const Map& x, const StageConfig& stage) {
  Builder& b = w.builder();
  LayerWriter::Scope scope(w, name);
  Map normed = x;
  normed.tokens = w.layer_norm("layer_norm_1", x.tokens, stage.channels);
  Value tokens = b.add(efficient_attention(w, normed, stage), x.tokens);
  normed.tokens = w.layer_norm("layer_norm_2", tokens, stage.channels);
  return b.add(mix_ffn(w, normed, stage.channels), tokens);
}

// SegformerMixTransformerEncoder: returns each stage's output map [B, C, H, W].
std::vector<Value> mix_transformer(LayerWriter& w, Value image) {
  Builder& b = w.builder();
  LayerWriter::Scope encoder(w, "encoder");
  std::vector<Value> maps;
  Value x = image;
  std::int64_t in_channels = b.shape(image)[1];
  for (std::size_t i = 0; i < kMitB0.size(); ++i) {
    const StageConfig& stage = kMitB0[i];
    const std::string index = std::to_string(i);
    Map map{};
    {
      // SegformerOverlapPatchEmbeddings: strided conv, tokens, LayerNorm.
      LayerWriter::Scope embeddings(w, "patch_embeddings");
      LayerWriter::Scope scope(w, index);
      x = w.conv("proj", x,
                 {.in_channels = in_channels, .out_channels = stage.channels, .kernel = stage.patch,
                  .stride = stage.stride, .padding = stage.patch / 2, .init = {.weight_std = 0.1, .bias_std = 0.02}});
      map = {.tokens = tokens_from_map(b, x), .height = b.shape(x)[2], .width = b.shape(x)[3]};
      map.tokens = w.layer_norm("layer_norm", map.tokens, stage.channels);
    }
    {
      LayerWriter::Scope block(w, "block");
      LayerWriter::Scope scope(w, index);
      for (int j = 0; j < stage.depth; ++j) map.tokens = transformer_layer(w, std::to_string(j), map, stage);
    }
    {
      LayerWriter::Scope norms(w, "layer_norm");
      map.tokens = w.layer_norm(index, map.tokens, stage.channels);
    }
    x = map_from_tokens(b, map.tokens, map.height, map.width);
    maps.push_back(x);
    in_channels = stage.channels;
  }
  return maps;
}

// SegformerDecodeHead: per-stage Linear to 256 channels, upsampled to the
// first stage's size, concatenated deepest first, fused, classified.
Value decode_head(LayerWriter& w, const std::vector<Value>& maps, std::int64_t classes) {
  Builder& b = w.builder();
  LayerWriter::Scope head(w, "decode_head");
  const Shape finest = b.shape(maps.front());
  std::vector<Value> projected;
  {
    LayerWriter::Scope linear_c(w, "linear_c");
    for (std::size_t i = 0; i < maps.size(); ++i) {
      LayerWriter::Scope scope(w, std::to_string(i));
      const Shape s = b.shape(maps[i]);
      Value tokens = w.linear("proj", tokens_from_map(b, maps[i]), s[1], kDecoderChannels, kLinearInit);
      Value map = map_from_tokens(b, tokens, s[2], s[3]);
      projected.push_back(upsample_bilinear(b, map, finest[2], finest[3]));
    }
  }
  const std::vector<Value> deepest_first(projected.rbegin(), projected.rend());
  const auto fused_channels = static_cast<std::int64_t>(projected.size()) * kDecoderChannels;
  Value x = w.conv("linear_fuse", b.concat(deepest_first, 1),
                   {.in_channels = fused_channels, .out_channels = kDecoderChannels});
  x = b.relu(w.batch_norm("batch_norm", x, kDecoderChannels));
  return w.conv("classifier", x,
                {.in_channels = kDecoderChannels, .out_channels = classes,
                 .init = {.weight_std = std::nullopt, .bias_std = 0.01}});
}

}  // namespace

Model segformer_b0(const ModelOptions& options) {
  // Four stride-2-or-more patch embeddings: 32 pixels keep every map >= 1x1.
  const std::int64_t classes = check_dense_options("segformer_b0", options, 32, kAde20kClasses);
  Builder b("segformer_b0");
  LayerWriter w(b, options.seed);
  Value image = b.input("input", DType::f32, {options.batch, 3, options.image_size, options.image_size});
  std::vector<Value> maps;
  {
    LayerWriter::Scope model(w, "segformer");
    maps = mix_transformer(w, image);
  }
  Value logits = decode_head(w, maps, classes);
  b.set_name(logits, "logits");
  return b.build({logits}).with_task("segmentation");
}

}  // namespace kiln::models

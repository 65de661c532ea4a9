// DETR (Carion et al. 2020) as Hugging Face's DetrForObjectDetection writes
// it: ResNet-50 backbone, 1x1 projection to 256 channels, fixed sine position
// embedding, 6 post-norm encoder and 6 decoder layers over 100 learned object
// queries, a class head (classes + "no object") and a 3-layer box MLP.
// Constant names follow HF's state_dict ("model.decoder.layers.0.fc1.weight").
#include <kiln/builder.h>
#include <kiln/error.h>

#include "src/zoo/attention.h"
#include "src/zoo/backbones.h"
#include "src/zoo/dense_prediction.h"
#include "src/zoo/init.h"
#include "src/zoo/layers.h"

#include <cmath>
#include <numbers>

namespace kiln::models {

namespace {

using Value = Builder::Value;

constexpr std::int64_t kDetrCocoClasses = 91;
constexpr std::int64_t kModelDim = 256;
constexpr std::int64_t kHeads = 8;
constexpr std::int64_t kFeedForward = 2048;
constexpr std::int64_t kQueries = 100;
constexpr int kEncoderLayers = 6;
constexpr int kDecoderLayers = 6;

constexpr LinearInit kDetrLinearInit{.kind = LinearInit::Kind::XavierUniform, .bias_scale = 0.02};

// DetrSinePositionEmbedding(normalize=True) for an unpadded h x w map, as
// tokens [1, h*w, 256]: channels 0..127 encode y, 128..255 encode x, each as
// interleaved sin/cos of position * 2pi / extent / 10000^(2i/128).
Tensor sine_position_embedding(std::int64_t height, std::int64_t width) {
  constexpr std::int64_t features = kModelDim / 2;
  constexpr double temperature = 10000.0;
  constexpr double epsilon = 1e-6;
  constexpr double scale = 2.0 * std::numbers::pi;
  Tensor t(DType::f32, {1, height * width, kModelDim});
  std::span<float> out = t.values<float>();
  for (std::int64_t y = 0; y < height; ++y) {
    for (std::int64_t x = 0; x < width; ++x) {
      // The cumulative sum of an all-ones mask is the 1-based position.
      const double y_embed = static_cast<double>(y + 1) / (static_cast<double>(height) + epsilon) * scale;
      const double x_embed = static_cast<double>(x + 1) / (static_cast<double>(width) + epsilon) * scale;
      float* token = &out[static_cast<std::size_t>((y * width + x) * kModelDim)];
      for (std::int64_t i = 0; i < features; ++i) {
        const double dim_t = std::pow(temperature, static_cast<double>(2 * (i / 2)) / static_cast<double>(features));
        const bool even = i % 2 == 0;
        token[i] = static_cast<float>(even ? std::sin(y_embed / dim_t) : std::cos(y_embed / dim_t));
        token[features + i] = static_cast<float>(even ? std::sin(x_embed / dim_t) : std::cos(x_embed / dim_t));
      }
    }
  }
  return t;
}

// DetrAttention: q and k see the position embeddings, v does not. Self-
// attention (keys == queries) adds the embedding once, as HF does.
Value detr_attention(LayerWriter& w, const std::string& name, Value queries, Value query_pos, Value keys,
                     Value key_pos) {
  Builder& b = w.builder();
  LayerWriter::Scope scope(w, name);
  const bool self_attention = queries.id == keys.id;
  Value positioned_queries = b.add(queries, query_pos);
  Value positioned_keys = self_attention ? positioned_queries : b.add(keys, key_pos);
  Value q = w.linear("q_proj", positioned_queries, kModelDim, kModelDim, kDetrLinearInit);
  Value k = w.linear("k_proj", positioned_keys, kModelDim, kModelDim, kDetrLinearInit);
  Value v = w.linear("v_proj", keys, kModelDim, kModelDim, kDetrLinearInit);
  return w.linear("out_proj", scaled_dot_product_attention(w, q, k, v, kHeads), kModelDim, kModelDim, kDetrLinearInit);
}

// fc1, ReLU, fc2, residual, final_layer_norm.
Value feed_forward(LayerWriter& w, Value x) {
  Builder& b = w.builder();
  Value h = b.relu(w.linear("fc1", x, kModelDim, kFeedForward, kDetrLinearInit));
  h = w.linear("fc2", h, kFeedForward, kModelDim, kDetrLinearInit);
  return w.layer_norm("final_layer_norm", b.add(x, h), kModelDim);
}

Value encoder_layer(LayerWriter& w, const std::string& name, Value x, Value pos) {
  Builder& b = w.builder();
  LayerWriter::Scope scope(w, name);
  x = w.layer_norm("self_attn_layer_norm", b.add(x, detr_attention(w, "self_attn", x, pos, x, pos)), kModelDim);
  return feed_forward(w, x);
}

Value decoder_layer(LayerWriter& w, const std::string& name, Value x, Value query_pos, Value memory,
                    Value memory_pos) {
  Builder& b = w.builder();
  LayerWriter::Scope scope(w, name);
  x = w.layer_norm("self_attn_layer_norm", b.add(x, detr_attention(w, "self_attn", x, query_pos, x, query_pos)),
                   kModelDim);
  x = w.layer_norm("encoder_attn_layer_norm",
                   b.add(x, detr_attention(w, "encoder_attn", x, query_pos, memory, memory_pos)), kModelDim);
  return feed_forward(w, x);
}

// The projection, encoder and decoder ("model.*" but the backbone): returns
// the decoder's output [B, 100, 256] for the backbone's features.
Value detr_transformer(LayerWriter& w, Value features) {
  Builder& b = w.builder();
  LayerWriter::Scope model(w, "model");
  const Shape feature_shape = b.shape(features);
  Value memory = tokens_from_map(
      b, w.conv("input_projection", features,
                {.in_channels = feature_shape[1], .out_channels = kModelDim, .init = {.weight_std = std::nullopt, .bias_std = 0.02}}));
  Value memory_pos =
      w.constant("position_embeddings", sine_position_embedding(feature_shape[2], feature_shape[3]));
  {
    LayerWriter::Scope encoder(w, "encoder");
    LayerWriter::Scope layers(w, "layers");
    for (int i = 0; i < kEncoderLayers; ++i) memory = encoder_layer(w, std::to_string(i), memory, memory_pos);
  }
  Value query_pos = w.constant("query_position_embeddings.weight",
                               init::normal({kQueries, kModelDim}, 0.0, 1.0, w.seed("query_position_embeddings")));
  // The decoder starts from zeros; the queries differ only by their position.
  Value x = w.constant("queries", Tensor(DType::f32, {feature_shape[0], kQueries, kModelDim}));
  LayerWriter::Scope decoder(w, "decoder");
  {
    LayerWriter::Scope layers(w, "layers");
    for (int i = 0; i < kDecoderLayers; ++i) x = decoder_layer(w, std::to_string(i), x, query_pos, memory, memory_pos);
  }
  return w.layer_norm("layernorm", x, kModelDim);
}

// DetrMLPPredictionHead(256, 256, 4, 3) with the sigmoid DETR applies.
Value box_predictor(LayerWriter& w, Value x) {
  Builder& b = w.builder();
  LayerWriter::Scope predictor(w, "bbox_predictor");
  LayerWriter::Scope layers(w, "layers");
  x = b.relu(w.linear("0", x, kModelDim, kModelDim, kDetrLinearInit));
  x = b.relu(w.linear("1", x, kModelDim, kModelDim, kDetrLinearInit));
  return b.sigmoid(w.linear("2", x, kModelDim, 4, kDetrLinearInit));
}

}  // namespace

Model detr_resnet50(const ModelOptions& options) {
  // ResNet-50 downsamples by 32: smaller images leave no feature map.
  const std::int64_t classes = check_dense_options("detr_resnet50", options, 32, kDetrCocoClasses);
  Builder b("detr_resnet50");
  Value image = b.input("input", DType::f32, {options.batch, 3, options.image_size, options.image_size});
  // HF keeps the timm ResNet-50 at DetrModel.backbone (DetrConvModel)
  // .conv_encoder (DetrConvEncoder).model: "model.backbone.conv_encoder.model.conv1.weight".
  for (const char* scope : {"model", "backbone", "conv_encoder", "model"}) b.push_scope(scope);
  Value features = resnet50_trunk(b, options.seed, image, false, false);
  for (int i = 0; i < 4; ++i) b.pop_scope();
  LayerWriter w(b, options.seed);
  Value decoded = detr_transformer(w, features);
  Value logits = w.linear("class_labels_classifier", decoded, kModelDim, classes + 1, kDetrLinearInit);
  Value boxes = box_predictor(w, decoded);
  b.set_name(logits, "logits");
  b.set_name(boxes, "boxes");
  return b.build({logits, boxes}).with_task("detection");
}

}  // namespace kiln::models

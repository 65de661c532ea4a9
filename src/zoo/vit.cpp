// torchvision's ViT-B/16. Attention is written the way torch.onnx.export
// writes nn.MultiheadAttention: one packed input projection, q/k/v picked out
// with Gather, MatMul/Softmax/MatMul per head, then the output projection.
#include <kiln/builder.h>
#include <kiln/error.h>
#include <kiln/models.h>

#include "src/base/check.h"
#include "src/zoo/classification.h"
#include "src/zoo/init.h"
#include "src/zoo/layers.h"

#include <cmath>

namespace kiln::models {

namespace {

using Value = Builder::Value;

constexpr std::int64_t kPatch = 16;
constexpr std::int64_t kHidden = 768;
constexpr std::int64_t kHeads = 12;
constexpr std::int64_t kHeadDim = kHidden / kHeads;
constexpr std::int64_t kMlpDim = 3072;
constexpr int kLayers = 12;
constexpr float kVitNormEpsilon = 1e-6f;

// x[index] along `axis`, dropping that axis: Gather with constant indices.
Value take(Builder& b, Value x, std::int64_t axis, std::int64_t index) {
  Attributes attrs;
  attrs.set("axis", axis);
  attrs.set("indices", std::vector<std::int64_t>{index});
  attrs.set("indices_shape", std::vector<std::int64_t>{});
  return b.op("Gather", {x}, attrs).at(0);
}

// nn.MultiheadAttention(x, x, x) on [N, T, hidden].
Value self_attention(LayerWriter& w, Value x, std::int64_t batch, std::int64_t tokens) {
  Builder& b = w.builder();
  LayerWriter::Scope scope(w, "self_attention");
  // in_proj_weight [3 * hidden, hidden]: xavier_uniform, as torch initialises it.
  const double bound = std::sqrt(6.0 / static_cast<double>(kHidden + 3 * kHidden));
  Tensor in_proj = init::uniform({3 * kHidden, kHidden}, -bound, bound, w.seed("in_proj_weight"));
  // Stored transposed [hidden, 3 * hidden], as the export stores it for MatMul.
  Value weight = w.constant("in_proj_weight", transposed_2d(in_proj));
  // torch zero-initialises this bias; small random values test the bias path.
  Value bias = w.constant("in_proj_bias", init::normal({3 * kHidden}, 0.0, 0.02, w.seed("in_proj_bias")));
  Value qkv = b.add(b.matmul(x, weight), bias);
  // [N, T, 3, heads, head_dim] -> [3, N, heads, T, head_dim]
  qkv = b.transpose(b.reshape(qkv, {batch, tokens, 3, kHeads, kHeadDim}), {2, 0, 3, 1, 4});
  Value q = take(b, qkv, 0, 0);
  Value k = take(b, qkv, 0, 1);
  Value v = take(b, qkv, 0, 2);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  q = b.mul(q, w.scalar("scale", scale));
  Value attention = b.softmax(b.matmul(q, b.transpose(k, {0, 1, 3, 2})), -1);
  Value y = b.matmul(attention, v);  // [N, heads, T, head_dim]
  y = b.reshape(b.transpose(y, {0, 2, 1, 3}), {batch, tokens, kHidden});
  const double out_bound = 1.0 / std::sqrt(static_cast<double>(kHidden));
  return w.linear("out_proj", y, kHidden, kHidden,
                  {.kind = LinearInit::Kind::Uniform, .weight_scale = out_bound, .bias_scale = 0.02});
}

// EncoderBlock: pre-norm attention and MLP, each with a residual.
Value encoder_block(LayerWriter& w, const std::string& name, Value x, std::int64_t batch, std::int64_t tokens) {
  Builder& b = w.builder();
  LayerWriter::Scope scope(w, name);
  Value y = w.layer_norm("ln_1", x, kHidden, kVitNormEpsilon);
  x = b.add(self_attention(w, y, batch, tokens), x);
  y = w.layer_norm("ln_2", x, kHidden, kVitNormEpsilon);
  {
    LayerWriter::Scope mlp(w, "mlp");
    const LinearInit init = {.kind = LinearInit::Kind::XavierUniform, .bias_scale = 1e-6};
    y = w.linear("0", y, kHidden, kMlpDim, init);
    y = b.gelu(y);
    y = w.linear("3", y, kMlpDim, kHidden, init);
  }
  return b.add(x, y);
}

}  // namespace

Model vit_b_16(const ModelOptions& options) {
  const ClassifierShape shape = check_classifier_options("vit_b_16", options, kPatch);
  KILN_CHECK(options.image_size % kPatch == 0, ErrorKind::InvalidArgument,
             "vit_b_16: image_size must be a multiple of 16, got " + std::to_string(options.image_size));
  const std::int64_t batch = options.batch;
  const std::int64_t grid = options.image_size / kPatch;
  const std::int64_t tokens = grid * grid + 1;

  Builder b("vit_b_16");
  LayerWriter w(b, options.seed);
  Value x = b.input("input", DType::f32, {batch, 3, options.image_size, options.image_size});
  // Patch embedding: trunc_normal_(std = sqrt(1 / fan_in)) in torchvision.
  const double fan_in = 3.0 * kPatch * kPatch;
  x = w.conv("conv_proj", x,
             {.in_channels = 3, .out_channels = kHidden, .kernel = kPatch, .stride = kPatch,
              .init = {.weight_std = std::sqrt(1.0 / fan_in), .bias_std = 0.02}});
  x = b.transpose(b.reshape(x, {batch, kHidden, grid * grid}), {0, 2, 1});  // [N, patches, hidden]

  // torchvision starts the class token at zero; a random one tests its path.
  // It is expanded to the batch, as class_token.expand(n, -1, -1) exports.
  Value class_token = w.constant("class_token", init::normal({1, 1, kHidden}, 0.0, 0.02, w.seed("class_token")));
  Attributes expand;
  expand.set("shape", std::vector<std::int64_t>{batch, 1, kHidden});
  class_token = b.op("Expand", {class_token}, expand).at(0);
  x = b.concat({class_token, x}, 1);
  {
    LayerWriter::Scope encoder(w, "encoder");
    Value position = w.constant("pos_embedding",
                                init::normal({1, tokens, kHidden}, 0.0, 0.02, w.seed("pos_embedding")));
    x = b.add(x, position);
    {
      LayerWriter::Scope layers(w, "layers");
      for (int i = 0; i < kLayers; ++i) x = encoder_block(w, "encoder_layer_" + std::to_string(i), x, batch, tokens);
    }
    x = w.layer_norm("ln", x, kHidden, kVitNormEpsilon);
  }
  x = take(b, x, 1, 0);  // the class token: [N, hidden]
  Value logits;
  {
    // torchvision zero-initialises the head; random weights make the logits informative.
    LayerWriter::Scope heads(w, "heads");
    logits = w.linear("head", x, kHidden, shape.num_classes,
                      {.kind = LinearInit::Kind::Normal, .weight_scale = 0.02, .bias_scale = 0.02});
  }
  b.set_name(logits, "logits");
  return b.build({logits}).with_task("classification");
}

}  // namespace kiln::models

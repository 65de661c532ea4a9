// torchvision's SSDLite320 with a MobileNetV3-Large backbone, and its
// detection post-processing expressed with the data-dependent host ops
// (NonZero, TopK, NonMaxSuppression): the network compiles, the
// post-processing runs as graph breaks between compiled segments.
#include "src/zoo/ssdlite.h"

#include "src/base/check.h"
#include "src/zoo/backbones.h"
#include "src/zoo/layers.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

namespace kiln::models {

namespace {

using Value = Builder::Value;

constexpr std::int64_t kSsdCocoClasses = 91;  // with background (label 0)
constexpr int kC4Layer = 13;  // torchvision's c4_pos: the last stage's first (strided) block
constexpr std::int64_t kAnchorsPerLocation = 6;  // DefaultBoxGenerator([[2, 3]] * 6): 2 + 2 * 2
constexpr float kBatchNormEpsilon = 1e-3f;
constexpr double kScoreThreshold = 0.001;
constexpr std::int64_t kTopkCandidates = 300;
constexpr double kNmsThreshold = 0.55;
constexpr std::int64_t kDetectionsPerImage = 300;
// BoxCoder(weights=(10, 10, 5, 5)) and its clamp of exp() arguments: log(1000 / 16).
constexpr std::array<float, 4> kBoxCoderWeights = {10.0f, 10.0f, 5.0f, 5.0f};
const double kBoxScaleClamp = std::log(1000.0 / 16.0);

Attributes attrs_of(std::initializer_list<std::pair<std::string, Attribute>> list) {
  Attributes attrs;
  for (const auto& [name, value] : list) attrs.set(name, value);
  return attrs;
}

// Conv2dNormActivation with ReLU6 (Clip 0..6), as SSDLite's extra layers and heads use.
Value conv_bn_relu6(LayerWriter& w, const std::string& name, Value x, const ConvSpec& spec) {
  LayerWriter::Scope scope(w, name);
  x = w.conv("0", x, spec);
  x = w.batch_norm("1", x, spec.out_channels, kBatchNormEpsilon);
  return w.builder().clip(x, 0.0f, 6.0f);
}

// _extra_block: 1x1 to out/2, depthwise 3x3 stride 2, 1x1 to out.
Value extra_block(LayerWriter& w, const std::string& name, Value x, std::int64_t in, std::int64_t out) {
  LayerWriter::Scope scope(w, name);
  const std::int64_t mid = out / 2;
  x = conv_bn_relu6(w, "0", x, {.in_channels = in, .out_channels = mid});
  x = conv_bn_relu6(w, "1", x,
                    {.in_channels = mid, .out_channels = mid, .kernel = 3, .stride = 2, .padding = 1, .groups = mid});
  return conv_bn_relu6(w, "2", x, {.in_channels = mid, .out_channels = out});
}

// _prediction_block (depthwise 3x3 + ReLU6, then a 1x1 conv with bias) and
// the head's reshape: [N, A*K, H, W] -> [N, H*W*A, K].
Value prediction(LayerWriter& w, const std::string& name, Value x, std::int64_t in, std::int64_t per_anchor) {
  Builder& b = w.builder();
  LayerWriter::Scope scope(w, name);
  x = conv_bn_relu6(w, "0", x, {.in_channels = in, .out_channels = in, .kernel = 3, .padding = 1, .groups = in});
  x = w.conv("1", x,
             {.in_channels = in, .out_channels = kAnchorsPerLocation * per_anchor,
              .init = {.weight_std = 0.03, .bias_std = 0.01}});
  const Shape shape = b.shape(x);
  x = b.reshape(x, {shape[0], kAnchorsPerLocation, per_anchor, shape[2], shape[3]});
  x = b.transpose(x, {0, 3, 4, 1, 2});
  return b.reshape(x, {shape[0], -1, per_anchor});
}

// DefaultBoxGenerator([[2, 3]] * 6, min_ratio 0.2, max_ratio 0.95, clip) for
// the feature map sizes, in pixels as (x1, y1, x2, y2): [anchors, 4].
Tensor default_boxes(const std::vector<std::pair<std::int64_t, std::int64_t>>& grids, std::int64_t image_size) {
  const std::size_t maps = grids.size();
  std::vector<double> scales;
  for (std::size_t k = 0; k < maps; ++k) scales.push_back(0.2 + (0.95 - 0.2) * k / (maps - 1.0));
  scales.push_back(1.0);
  std::vector<float> boxes;
  for (std::size_t k = 0; k < maps; ++k) {
    const double s = scales[k], s_next = std::sqrt(scales[k] * scales[k + 1]);
    std::vector<std::pair<double, double>> wh = {{s, s}, {s_next, s_next}};
    for (double ratio : {2.0, 3.0}) {
      const double r = std::sqrt(ratio);
      wh.push_back({s * r, s / r});
      wh.push_back({s / r, s * r});
    }
    const auto [rows, cols] = grids[k];
    for (std::int64_t y = 0; y < rows; ++y)
      for (std::int64_t x = 0; x < cols; ++x)
        for (const auto& [bw, bh] : wh) {
          const double cx = (x + 0.5) / cols, cy = (y + 0.5) / rows;
          const double w = std::clamp(bw, 0.0, 1.0) * image_size, h = std::clamp(bh, 0.0, 1.0) * image_size;
          for (double v : {cx * image_size - 0.5 * w, cy * image_size - 0.5 * h, cx * image_size + 0.5 * w,
                           cy * image_size + 0.5 * h})
            boxes.push_back(static_cast<float>(v));
        }
  }
  const auto count = static_cast<std::int64_t>(boxes.size() / 4);
  return Tensor::from_f32({count, 4}, std::move(boxes));
}

// Column `c` of a [rows, 4] tensor as [rows, 1].
Value column(Builder& b, Value x, std::int64_t c) {
  return b.op("Slice", {x}, attrs_of({{"starts", std::vector<std::int64_t>{c}},
                                      {"ends", std::vector<std::int64_t>{c + 1}},
                                      {"axes", std::vector<std::int64_t>{1}}}))
      .at(0);
}

// BoxCoder.decode_single of regression [A, 4] against anchors [A, 4], then
// clip_boxes_to_image: [A, 4] (x1, y1, x2, y2).
Value decode_boxes(Builder& b, Value regression, Value anchors, std::int64_t image_size) {
  auto scalar = [&](const std::string& name, float v) { return b.constant(name, Tensor::from_f32({1}, {v})); };
  Value widths = b.sub(column(b, anchors, 2), column(b, anchors, 0));
  Value heights = b.sub(column(b, anchors, 3), column(b, anchors, 1));
  Value half = scalar("half", 0.5f);
  Value ctr_x = b.add(column(b, anchors, 0), b.mul(half, widths));
  Value ctr_y = b.add(column(b, anchors, 1), b.mul(half, heights));
  Value dx = b.div(column(b, regression, 0), scalar("weight_x", kBoxCoderWeights[0]));
  Value dy = b.div(column(b, regression, 1), scalar("weight_y", kBoxCoderWeights[1]));
  Value dw = b.div(column(b, regression, 2), scalar("weight_w", kBoxCoderWeights[2]));
  Value dh = b.div(column(b, regression, 3), scalar("weight_h", kBoxCoderWeights[3]));
  const auto clamp = static_cast<float>(kBoxScaleClamp);
  dw = b.clip(dw, -INFINITY, clamp);
  dh = b.clip(dh, -INFINITY, clamp);
  Value pred_x = b.add(b.mul(dx, widths), ctr_x);
  Value pred_y = b.add(b.mul(dy, heights), ctr_y);
  Value half_w = b.mul(half, b.mul(b.op("Exp", {dw}, {}).at(0), widths));
  Value half_h = b.mul(half, b.mul(b.op("Exp", {dh}, {}).at(0), heights));
  const auto size = static_cast<float>(image_size);
  auto clip = [&](Value v) { return b.clip(v, 0.0f, size); };
  return b.concat({clip(b.sub(pred_x, half_w)), clip(b.sub(pred_y, half_h)), clip(b.add(pred_x, half_w)),
                   clip(b.add(pred_y, half_h))},
                  1);
}

Value gather(Builder& b, Value data, Value indices, std::int64_t axis = 0) {
  return b.op("Gather", {data, indices}, attrs_of({{"axis", axis}})).at(0);
}

struct Detections {
  Value boxes, scores, labels;
};

// SSD.postprocess_detections for one image: per class, scores above the
// threshold (NonZero), the top 300 (TopK), then NMS over all classes at once
// with each class's boxes offset apart (batched_nms), best 300 kept.
Detections postprocess(Builder& b, Value logits, Value boxes, std::int64_t classes, std::int64_t image_size) {
  Value scores = b.softmax(logits, -1);  // [A, classes]
  Value threshold = b.constant("score_threshold", Tensor::from_f32({1}, {static_cast<float>(kScoreThreshold)}));
  Value zero = b.constant("zero", Tensor::from_f32({1}, {0.0f}));
  std::vector<Value> all_boxes, all_scores, all_labels;
  for (std::int64_t label = 1; label < classes; ++label) {
    b.push_scope("class" + std::to_string(label));
    Value score = b.op("Gather", {scores},
                       attrs_of({{"axis", std::int64_t{1}},
                                 {"indices", std::vector<std::int64_t>{label}},
                                 {"indices_shape", std::vector<std::int64_t>{}}}))
                      .at(0);  // [A]
    Value keep = b.op("NonZero", {b.op("Greater", {score, threshold}, {}).at(0)}, {}).at(0);  // [1, ?]
    keep = b.reshape(keep, {-1});
    Value kept_scores = gather(b, score, keep);
    Value kept_boxes = gather(b, boxes, keep);
    // clamp_k: fewer than 300 candidates above the threshold give them all (torchvision's min(k, n)).
    auto top = b.op("TopK", {kept_scores},
                    attrs_of({{"k", kTopkCandidates}, {"axis", std::int64_t{0}}, {"clamp_k", std::int64_t{1}}}));
    all_scores.push_back(top[0]);
    all_boxes.push_back(gather(b, kept_boxes, top[1]));
    Value label_value = b.constant("label", Tensor::from_f32({1}, {static_cast<float>(label)}));
    all_labels.push_back(b.add(b.mul(top[0], zero), label_value));
    b.pop_scope();
  }
  b.push_scope("nms");
  Value cat_boxes = b.concat(all_boxes, 0);
  Value cat_scores = b.concat(all_scores, 0);
  Value cat_labels = b.concat(all_labels, 0);
  // Boxes lie within [0, image_size]: an offset of label * (image_size + 1)
  // keeps classes apart, as batched_nms's offset by the largest coordinate does.
  Value offset = b.mul(cat_labels, b.constant("class_offset", Tensor::from_f32({1}, {image_size + 1.0f})));
  Value shifted = b.add(cat_boxes, b.reshape(offset, {-1, 1}));
  Value selected = b.op("NonMaxSuppression", {b.reshape(shifted, {1, -1, 4}), b.reshape(cat_scores, {1, 1, -1})},
                        attrs_of({{"max_output_boxes_per_class", std::int64_t{1} << 40},
                                  {"iou_threshold", kNmsThreshold}}))
                       .at(0);  // [?, 3], best first
  Value keep = b.op("Gather", {selected},
                    attrs_of({{"axis", std::int64_t{1}},
                              {"indices", std::vector<std::int64_t>{2}},
                              {"indices_shape", std::vector<std::int64_t>{}}}))
                   .at(0);
  keep = b.op("Slice", {keep}, attrs_of({{"starts", std::vector<std::int64_t>{0}},
                                         {"ends", std::vector<std::int64_t>{kDetectionsPerImage}},
                                         {"axes", std::vector<std::int64_t>{0}}}))
             .at(0);
  Detections d;
  d.boxes = gather(b, cat_boxes, keep);
  d.scores = gather(b, cat_scores, keep);
  d.labels = b.op("Cast", {gather(b, cat_labels, keep)}, attrs_of({{"to", std::int64_t{7}}})).at(0);
  b.pop_scope();
  return d;
}

}  // namespace

Model ssdlite320_mobilenet_v3_large(const ModelOptions& options) {
  KILN_CHECK(options.batch == 1, ErrorKind::Unsupported,
             "ssdlite320_mobilenet_v3_large: the post-processing handles one image; got batch " +
                 std::to_string(options.batch));
  KILN_CHECK(options.image_size >= 32, ErrorKind::InvalidArgument,
             "ssdlite320_mobilenet_v3_large: image_size must be at least 32, got " +
                 std::to_string(options.image_size));
  const std::int64_t classes = options.num_classes > 0 ? options.num_classes : kSsdCocoClasses;
  KILN_CHECK(classes >= 2, ErrorKind::InvalidArgument,
             "ssdlite320_mobilenet_v3_large: needs at least 2 classes (with background), got " +
                 std::to_string(classes));
  Builder b("ssdlite320_mobilenet_v3_large");
  LayerWriter w(b, options.seed);
  Value image = b.input("input", DType::f32, {1, 3, options.image_size, options.image_size});

  std::vector<Value> maps;
  std::vector<std::int64_t> channels;
  {
    // SSDLiteFeatureExtractorMobileNet: MobileNetV3-Large with the reduced
    // tail (torchvision builds it so when no ImageNet backbone is loaded, as
    // for its COCO weights), cut at features.13's expansion (C4): the first
    // feature map is that 672-channel expansion, the second the last conv's.
    LayerWriter::Scope backbone(w, "backbone");
    const MobileNetV3LargeSplit parts = [&] {
      LayerWriter::Scope features(w, "features");
      return mobilenet_v3_large_split_features(w, image, kC4Layer, /*reduced_tail=*/true);
    }();
    maps = {parts.expansion, parts.last};
    for (Value map : maps) channels.push_back(b.shape(map)[1]);
    LayerWriter::Scope extra(w, "extra");
    const std::array<std::int64_t, 4> depths = {512, 256, 256, 128};
    for (std::size_t i = 0; i < depths.size(); ++i) {
      maps.push_back(extra_block(w, std::to_string(i), maps.back(), channels.back(), depths[i]));
      channels.push_back(depths[i]);
    }
  }

  std::vector<Value> class_parts, box_parts;
  std::vector<std::pair<std::int64_t, std::int64_t>> grids;
  {
    LayerWriter::Scope head(w, "head");
    for (std::size_t i = 0; i < maps.size(); ++i) {
      const Shape shape = b.shape(maps[i]);
      grids.push_back({shape[2], shape[3]});
      {
        LayerWriter::Scope cls(w, "classification_head");
        LayerWriter::Scope list(w, "module_list");
        class_parts.push_back(prediction(w, std::to_string(i), maps[i], channels[i], classes));
      }
      LayerWriter::Scope reg(w, "regression_head");
      LayerWriter::Scope list(w, "module_list");
      box_parts.push_back(prediction(w, std::to_string(i), maps[i], channels[i], 4));
    }
  }
  Value logits = b.reshape(b.concat(class_parts, 1), {-1, classes});     // [A, classes]
  Value regression = b.reshape(b.concat(box_parts, 1), {-1, 4});         // [A, 4]
  b.push_scope("postprocess");
  Value anchors = b.constant("anchors", default_boxes(grids, options.image_size));
  Value boxes = decode_boxes(b, regression, anchors, options.image_size);
  Detections d = postprocess(b, logits, boxes, classes, options.image_size);
  b.pop_scope();
  b.set_name(d.boxes, "boxes");
  b.set_name(d.scores, "scores");
  b.set_name(d.labels, "labels");
  return b.build({d.boxes, d.scores, d.labels}).with_task("detection");
}

}  // namespace kiln::models

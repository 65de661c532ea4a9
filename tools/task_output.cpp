#include "task_output.h"

#include "bench/agreement.h"
#include "image.h"
#include "output_files.h"
#include "src/base/atomic_write.h"
#include "src/base/check.h"

#include <kiln/error.h>

#include <stb_image_write.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <optional>
#include <span>
#include <string_view>

namespace kiln::tools {
namespace {

// Pascal VOC's 21 classes (torchvision's segmentation models).
constexpr std::array<std::string_view, 21> kVocNames{
    "background", "aeroplane", "bicycle", "bird",  "boat",        "bottle", "bus",
    "car",        "cat",       "chair",   "cow",   "diningtable", "dog",    "horse",
    "motorbike",  "person",    "pottedplant", "sheep", "sofa",    "train",  "tvmonitor"};

// ADE20k's 150 scene-parsing classes (SegFormer's id2label).
constexpr std::array<std::string_view, 150> kAde20kNames{
    "wall", "building", "sky", "floor", "tree", "ceiling", "road", "bed", "windowpane", "grass", "cabinet",
    "sidewalk", "person", "earth", "door", "table", "mountain", "plant", "curtain", "chair", "car", "water",
    "painting", "sofa", "shelf", "house", "sea", "mirror", "rug", "field", "armchair", "seat", "fence", "desk",
    "rock", "wardrobe", "lamp", "bathtub", "railing", "cushion", "base", "box", "column", "signboard",
    "chest of drawers", "counter", "sand", "sink", "skyscraper", "fireplace", "refrigerator", "grandstand", "path",
    "stairs", "runway", "case", "pool table", "pillow", "screen door", "stairway", "river", "bridge", "bookcase",
    "blind", "coffee table", "toilet", "flower", "book", "hill", "bench", "countertop", "stove", "palm",
    "kitchen island", "computer", "swivel chair", "boat", "bar", "arcade machine", "hovel", "bus", "towel",
    "light", "truck", "tower", "chandelier", "awning", "streetlight", "booth", "television receiver", "airplane",
    "dirt track", "apparel", "pole", "land", "bannister", "escalator", "ottoman", "bottle", "buffet", "poster",
    "stage", "van", "ship", "fountain", "conveyer belt", "canopy", "washer", "plaything", "swimming pool",
    "stool", "barrel", "basket", "waterfall", "tent", "bag", "minibike", "cradle", "oven", "ball", "food",
    "step", "tank", "trade name", "microwave", "pot", "animal", "bicycle", "lake", "dishwasher", "screen",
    "blanket", "sculpture", "hood", "sconce", "vase", "traffic light", "tray", "ashcan", "fan", "pier",
    "crt screen", "plate", "monitor", "bulletin board", "shower", "radiator", "glass", "clock", "flag"};

// COCO's 91 category ids as DETR and torchvision's detectors number them
// (ids without a category are "N/A").
constexpr std::array<std::string_view, 91> kCocoNames{
    "N/A", "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat",
    "traffic light", "fire hydrant", "N/A", "stop sign", "parking meter", "bench", "bird", "cat", "dog", "horse",
    "sheep", "cow", "elephant", "bear", "zebra", "giraffe", "N/A", "backpack", "umbrella", "N/A", "N/A",
    "handbag", "tie", "suitcase", "frisbee", "skis", "snowboard", "sports ball", "kite", "baseball bat",
    "baseball glove", "skateboard", "surfboard", "tennis racket", "bottle", "N/A", "wine glass", "cup", "fork",
    "knife", "spoon", "bowl", "banana", "apple", "sandwich", "orange", "broccoli", "carrot", "hot dog", "pizza",
    "donut", "cake", "chair", "couch", "potted plant", "bed", "N/A", "dining table", "N/A", "N/A", "toilet",
    "N/A", "tv", "laptop", "mouse", "remote", "keyboard", "cell phone", "microwave", "oven", "toaster", "sink",
    "refrigerator", "N/A", "book", "clock", "vase", "scissors", "teddy bear", "hair drier", "toothbrush"};

constexpr float kDetectionThreshold = 0.5f;
constexpr std::size_t kShownEntries = 5;

// The name of class `index` when the model has `classes` classes: a dataset's
// names when the count identifies it, else "class <index>".
std::string class_name(std::int64_t classes, std::int64_t index) {
  auto pick = [&](auto& names) -> std::string {
    return classes == static_cast<std::int64_t>(names.size()) ? std::string(names[static_cast<std::size_t>(index)])
                                                              : "";
  };
  for (const std::string& name : {pick(kVocNames), pick(kAde20kNames), pick(kCocoNames)})
    if (!name.empty()) return name;
  return "class " + std::to_string(index);
}

using Rgb = std::array<unsigned char, 3>;

// Pascal VOC's colour map: the bits of the class index spread over R, G, B
// from the most significant bit down, so neighbouring classes differ clearly.
Rgb class_colour(std::int64_t index) {
  Rgb colour{0, 0, 0};
  auto bits = static_cast<std::uint64_t>(index);
  for (int shift = 7; shift >= 0 && bits != 0; --shift, bits >>= 3)
    for (int channel = 0; channel < 3; ++channel)
      colour[static_cast<std::size_t>(channel)] |= static_cast<unsigned char>(((bits >> channel) & 1u) << shift);
  return colour;
}

// DIR/<model><suffix>, or the current folder without --output-dir; the
// model's name (from a file) made safe as a file name.
std::filesystem::path picture_path(const std::string& output_dir, const Model& model, const std::string& suffix) {
  const std::string file_name = file_stem_for(model.name()) + suffix;
  return output_dir.empty() ? std::filesystem::path(file_name) : std::filesystem::path(output_dir) / file_name;
}

void append_bytes(void* context, void* data, int size) {
  static_cast<std::string*>(context)->append(static_cast<const char*>(data), static_cast<std::size_t>(size));
}

// Encodes an RGB PNG in memory and writes it atomically; returns the absolute
// path written, for the message.
std::filesystem::path write_png(const std::filesystem::path& path, int width, int height, std::span<const unsigned char> rgb) {
  KILN_ASSERT(rgb.size() == static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * 3);
  std::string png;
  KILN_CHECK(stbi_write_png_to_func(append_bytes, &png, width, height, 3, rgb.data(), width * 3) != 0,
             ErrorKind::Internal, "stb_image_write could not encode the picture for '" + path.string() + "'");
  base::write_file_atomically(path, png);
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  return ec ? path : absolute;
}

std::vector<std::size_t> order_by(std::span<const double> keys) {
  std::vector<std::size_t> order(keys.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return keys[a] > keys[b]; });
  return order;
}

void report_segmentation(const Model& model, const Tensor& logits, const std::string& output_dir) {
  const Shape& shape = logits.shape();
  KILN_CHECK(logits.dtype() == DType::f32 && shape.size() == 4 && shape[0] >= 1 && shape[1] >= 1,
             ErrorKind::ShapeMismatch,
             model.name() + ": a segmentation output must be f32 logits [N, classes, H, W], got " + shape_str(shape));
  const std::int64_t classes = shape[1];
  const std::int64_t pixels = shape[2] * shape[3];
  std::span<const float> values = logits.values<float>();  // the first image
  std::vector<std::int64_t> mask(static_cast<std::size_t>(pixels), 0);
  std::vector<double> share(static_cast<std::size_t>(classes), 0.0);
  for (std::int64_t p = 0; p < pixels; ++p) {
    std::int64_t best = 0;
    for (std::int64_t c = 1; c < classes; ++c)
      if (values[static_cast<std::size_t>(c * pixels + p)] > values[static_cast<std::size_t>(best * pixels + p)])
        best = c;
    mask[static_cast<std::size_t>(p)] = best;
    share[static_cast<std::size_t>(best)] += 1.0 / static_cast<double>(pixels);
  }
  std::printf("segmentation mask %lldx%lld, %lld classes; largest by area:\n", static_cast<long long>(shape[3]),
              static_cast<long long>(shape[2]), static_cast<long long>(classes));
  const std::vector<std::size_t> order = order_by(share);
  for (std::size_t r = 0; r < std::min(kShownEntries, order.size()) && share[order[r]] > 0; ++r) {
    const auto c = static_cast<std::int64_t>(order[r]);
    std::printf("  %zu. %-24s (class %3lld)  %5.1f%% of pixels\n", r + 1, class_name(classes, c).c_str(),
                static_cast<long long>(c), 100.0 * share[order[r]]);
  }
  std::vector<unsigned char> rgb(static_cast<std::size_t>(pixels) * 3);
  for (std::size_t p = 0; p < mask.size(); ++p) std::copy_n(class_colour(mask[p]).begin(), 3, &rgb[p * 3]);
  const std::filesystem::path written =
      write_png(picture_path(output_dir, model, "_mask.png"), static_cast<int>(shape[3]), static_cast<int>(shape[2]), rgb);
  std::printf("mask written to %s (VOC colour map)\n", written.string().c_str());
}

struct Detection {
  std::int64_t label = 0;
  float score = 0;
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // pixels of the original image
};

// From normalised model-input coordinates ([0, 1] of its width and height)
// to the photograph's pixels, through the geometry load_image_tensor
// reported (the identity without a photograph: the input's own pixels).
struct CropGeometry {
  ImageGeometry geometry;
  double width = 1, height = 1;  // the model input's

  double x(double normalised) const { return (normalised * width + geometry.offset_x) * geometry.scale_x; }
  double y(double normalised) const { return (normalised * height + geometry.offset_y) * geometry.scale_y; }
};

std::optional<std::size_t> find_output(const Model& model, const std::string& name) {
  const std::vector<TensorSpec> specs = model.outputs();
  for (std::size_t i = 0; i < specs.size(); ++i)
    if (specs[i].name == name) return i;
  return std::nullopt;
}

// A detection model gives either per-query predictions (DETR: logits and
// boxes) or a post-processed detection list (SSD: boxes, scores, labels, as
// kiln bench finds and compares it).
struct DetectionOutputs {
  std::optional<std::size_t> logits, boxes;  // per-query form
  std::optional<bench::DetectionList> list;  // list form
};

DetectionOutputs detection_outputs(const Model& model) {
  DetectionOutputs found{find_output(model, "logits"), find_output(model, "boxes"), std::nullopt};
  if (found.logits && found.boxes) return found;
  found.list = bench::find_detection_list(model.task(), model.outputs());
  KILN_CHECK(found.list.has_value(), ErrorKind::InvalidArgument,
             model.name() + ": a detection model needs outputs named 'logits' and 'boxes' (per-query predictions) or " +
                 "'boxes', 'scores' and 'labels' (a detection list)");
  return found;
}

// Per query: softmax over classes + no-object, best real class and its probability.
std::vector<Detection> decode_detections(const Model& model, const Tensor& logits, const Tensor& boxes,
                                         const CropGeometry& crop) {
  const Shape& ls = logits.shape();
  const Shape& bs = boxes.shape();
  KILN_CHECK(ls.size() == 3 && bs.size() == 3 && ls[0] >= 1 && ls[2] >= 2 && bs[0] == ls[0] && bs[1] == ls[1] &&
                 bs[2] == 4,
             ErrorKind::ShapeMismatch,
             model.name() + ": expected logits [N, queries, classes + 1] and boxes [N, queries, 4], got " +
                 shape_str(ls) + " and " + shape_str(bs));
  const std::int64_t classes = ls[2] - 1;
  std::span<const float> lv = logits.values<float>();
  std::span<const float> bv = boxes.values<float>();
  std::vector<Detection> detections;
  for (std::int64_t q = 0; q < ls[1]; ++q) {
    std::span<const float> row = lv.subspan(static_cast<std::size_t>(q * ls[2]), static_cast<std::size_t>(ls[2]));
    const float top = *std::max_element(row.begin(), row.end());
    double sum = 0;
    for (float v : row) sum += std::exp(static_cast<double>(v - top));
    const auto best = std::max_element(row.begin(), row.begin() + classes);
    const float* box = &bv[static_cast<std::size_t>(q * 4)];
    const double cx = box[0], cy = box[1], w = box[2], h = box[3];
    detections.push_back({.label = best - row.begin(),
                          .score = static_cast<float>(std::exp(static_cast<double>(*best - top)) / sum),
                          .x0 = crop.x(cx - w / 2),
                          .y0 = crop.y(cy - h / 2),
                          .x1 = crop.x(cx + w / 2),
                          .y1 = crop.y(cy + h / 2)});
  }
  std::stable_sort(detections.begin(), detections.end(),
                   [](const Detection& a, const Detection& b) { return a.score > b.score; });
  return detections;
}

// A detection list: boxes [n, 4] as (x1, y1, x2, y2) in the model input's
// pixels, scores [n], labels [n] (COCO category ids for torchvision's models).
std::vector<Detection> read_detection_list(const Model& model, const std::vector<Tensor>& outputs,
                                           const bench::DetectionList& list, const CropGeometry& crop) {
  const std::string problem = bench::detection_list_problem(outputs, list, model.name().c_str());
  KILN_CHECK(problem.empty(), ErrorKind::ShapeMismatch, problem);
  std::vector<Detection> detections;
  for (const bench::ListedDetection& d : bench::read_detections(outputs, list))
    detections.push_back({.label = d.label,
                          .score = d.score,
                          .x0 = crop.x(d.box[0] / crop.width),
                          .y0 = crop.y(d.box[1] / crop.height),
                          .x1 = crop.x(d.box[2] / crop.width),
                          .y1 = crop.y(d.box[3] / crop.height)});
  std::stable_sort(detections.begin(), detections.end(),
                   [](const Detection& a, const Detection& b) { return a.score > b.score; });
  return detections;
}

// Draws a rectangle outline `thickness` pixels wide, clipped to the image.
void draw_box(std::span<unsigned char> rgb, int width, int height, const Detection& d, Rgb colour, int thickness) {
  const auto clamp_x = [&](double v) { return std::clamp(static_cast<int>(std::lround(v)), 0, width - 1); };
  const auto clamp_y = [&](double v) { return std::clamp(static_cast<int>(std::lround(v)), 0, height - 1); };
  const int x0 = clamp_x(d.x0), x1 = clamp_x(d.x1), y0 = clamp_y(d.y0), y1 = clamp_y(d.y1);
  for (int y = y0; y <= y1; ++y)
    for (int x = x0; x <= x1; ++x) {
      const bool edge = x - x0 < thickness || x1 - x < thickness || y - y0 < thickness || y1 - y < thickness;
      if (edge) std::copy_n(colour.begin(), 3, &rgb[(static_cast<std::size_t>(y) * width + x) * 3]);
    }
}

void report_detection(const Model& model, const std::vector<Tensor>& outputs, const std::string& image_path,
                      const std::string& output_dir, const ImageGeometry& geometry) {
  const DetectionOutputs which = detection_outputs(model);
  const std::vector<TensorSpec> inputs = model.inputs();
  KILN_CHECK(!inputs.empty() && inputs[0].shape.size() == 4, ErrorKind::ShapeMismatch,
             model.name() + ": a detection model needs an image input [N, 3, S, S]");
  const std::int64_t input_height = inputs[0].shape[2], input_width = inputs[0].shape[3];
  // The photograph, read with the same limits as the input image was.
  std::optional<RgbImage> photo;
  if (!image_path.empty()) photo = read_rgb_image(image_path);
  if (!photo) {
    // Inputs given as tensors: report in the model input's pixels, draw nothing.
    std::printf("(no image: the input came from a file; boxes are in the model input's %lldx%lld pixels, none drawn)\n",
                static_cast<long long>(input_width), static_cast<long long>(input_height));
  }
  const CropGeometry crop{photo ? geometry : ImageGeometry{}, static_cast<double>(input_width),
                          static_cast<double>(input_height)};
  const std::vector<Detection> detections =
      which.list ? read_detection_list(model, outputs, *which.list, crop)
                 : decode_detections(model, outputs.at(*which.logits), outputs.at(*which.boxes), crop);

  std::size_t shown = 0;
  while (shown < detections.size() && detections[shown].score >= kDetectionThreshold) ++shown;
  if (detections.empty()) {
    std::printf("no detections (the model's detection list is empty)\n");
    return;
  }
  if (shown == 0) {
    shown = std::min(kShownEntries, detections.size());
    std::printf("no detection scores >= %.2f; the best %zu, BELOW the threshold:\n",
                static_cast<double>(kDetectionThreshold), shown);
  } else {
    std::printf("%zu detections with score >= %.2f:\n", shown, static_cast<double>(kDetectionThreshold));
  }
  // Per-query logits carry a no-object column; a list's labels are COCO ids.
  const std::int64_t classes = which.list ? static_cast<std::int64_t>(std::size(kCocoNames))
                                          : outputs.at(*which.logits).shape()[2] - 1;
  for (std::size_t i = 0; i < shown; ++i) {
    const Detection& d = detections[i];
    std::printf("  %2zu. %-16s (class %2lld)  score %.3f  box x %.0f..%.0f, y %.0f..%.0f px\n", i + 1,
                class_name(classes, d.label).c_str(), static_cast<long long>(d.label), static_cast<double>(d.score),
                d.x0, d.x1, d.y0, d.y1);
  }
  if (!photo) return;
  const int width = photo->info.width, height = photo->info.height;
  std::vector<unsigned char>& rgb = photo->rgb;
  const int thickness = std::max(2, std::min(width, height) / 200);
  for (std::size_t i = 0; i < shown; ++i)
    draw_box(rgb, width, height, detections[i], class_colour(detections[i].label + 1), thickness);
  const std::filesystem::path written = write_png(picture_path(output_dir, model, "_detections.png"), width, height, rgb);
  std::printf("boxes drawn on %s\n", written.string().c_str());
}

}  // namespace

void report_task_outputs(const Model& model, const std::vector<Tensor>& outputs, const std::string& image_path,
                         const std::string& output_dir, const ImageGeometry& geometry) {
  if (model.task() == "segmentation") {
    KILN_CHECK(!outputs.empty(), ErrorKind::InvalidArgument, model.name() + ": no outputs to present");
    report_segmentation(model, outputs.front(), output_dir);
  } else if (model.task() == "detection") {
    report_detection(model, outputs, image_path, output_dir, geometry);
  }
}

}  // namespace kiln::tools

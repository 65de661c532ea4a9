// `kiln run`: a model (built-in or ONNX) on a photograph or .npy inputs, eager
// and compiled, side by side; outputs optionally written as .npy files.
#include "bench/agreement.h"
#include "commands.h"
#include "image.h"
#include "labels.h"
#include "model_args.h"
#include "output_files.h"
#include "src/base/check.h"
#if __has_include("task_output.h")
#include "task_output.h"
#define KILN_HAVE_TASK_OUTPUT 1
#else
#define KILN_HAVE_TASK_OUTPUT 0
#endif

#include <kiln/kiln.h>
#include <kiln/npy.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <filesystem>
#include <numeric>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kiln::tools {
namespace {


struct Timing {
  double first_ms = 0;
  double median_ms = 0;
};

template <class Fn> Timing time_calls(Fn&& call, int iters, std::vector<Tensor>& out) {
  using Clock = std::chrono::steady_clock;
  Timing t;
  auto start = Clock::now();
  out = call();
  t.first_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  std::vector<double> times;
  for (int i = 0; i < iters; ++i) {
    start = Clock::now();
    out = call();
    times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  if (!times.empty()) {
    std::sort(times.begin(), times.end());
    t.median_ms = times[times.size() / 2];
  }
  return t;
}

void print_top(const Tensor& logits, int k) {
  const auto values = logits.values<float>();
  const std::size_t classes = static_cast<std::size_t>(logits.shape().back());
  // Softmax over the first image's logits, in double for a stable sum.
  const float top = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(classes));
  double sum = 0;
  for (std::size_t i = 0; i < classes; ++i) sum += std::exp(static_cast<double>(values[i] - top));
  std::vector<std::size_t> order(classes);
  std::iota(order.begin(), order.end(), 0);
  const std::size_t shown = std::min<std::size_t>(static_cast<std::size_t>(k), classes);
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(shown), order.end(),
                    [&](std::size_t a, std::size_t b) { return values[a] > values[b]; });
  const auto& labels = imagenet_labels();
  for (std::size_t r = 0; r < shown; ++r) {
    const std::size_t c = order[r];
    const std::string label = (classes == labels.size()) ? labels[c] : "class " + std::to_string(c);
    std::printf("  %zu. %-28s (class %4zu)  p = %.4f  logit = %.4f\n", r + 1, label.c_str(), c,
                std::exp(static_cast<double>(values[c] - top)) / sum, static_cast<double>(values[c]));
  }
}


// Spreads of the values of every output, for models without a task-specific report.
void print_output_summary(const std::vector<TensorSpec>& specs, const std::vector<Tensor>& outputs) {
  for (std::size_t i = 0; i < outputs.size() && i < specs.size(); ++i) {
    const Tensor& t = outputs[i];
    std::printf("  %s: %s%s", specs[i].name.c_str(), std::string(dtype_name(t.dtype())).c_str(), shape_str(t.shape()).c_str());
    if (t.dtype() == DType::f32 && t.numel() > 0) {
      const auto v = t.values<float>();
      const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
      double sum = 0;
      for (float x : v) sum += static_cast<double>(x);
      std::printf("  min %.4g  max %.4g  mean %.4g", static_cast<double>(*lo), static_cast<double>(*hi),
                  sum / static_cast<double>(v.size()));
    }
    std::printf("\n");
  }
}

// The input image's place: the single [N, 3, H, W] f32 input no --input names.
struct ImageSlot {
  std::size_t index = 0;
  std::int64_t batch = 1, height = 224, width = 224;
};

// Three comma-separated numbers (--mean, --std), or nullopt when not given.
std::optional<std::array<float, 3>> parse_triple(const std::string& text, const std::string& option) {
  if (text.empty()) return std::nullopt;
  std::vector<std::string> parts(1);
  for (char c : text) {
    if (c == ',') parts.emplace_back();
    else parts.back().push_back(c);
  }
  KILN_CHECK(parts.size() == 3, ErrorKind::InvalidArgument,
             option + " takes three comma-separated numbers (R,G,B), got '" + text + "'");
  std::array<float, 3> values{};
  for (std::size_t i = 0; i < 3; ++i) {
    char* stop = nullptr;
    values[i] = std::strtof(parts[i].c_str(), &stop);
    KILN_CHECK(!parts[i].empty() && stop == parts[i].c_str() + parts[i].size() && std::isfinite(values[i]),
               ErrorKind::InvalidArgument, option + ": '" + parts[i] + "' is not a number (in '" + text + "')");
  }
  return values;
}

// Whether an input takes this shape: its own, or (a model with symbolic
// dims) any extents of the symbolic dims; the model compiles for them.
bool admits(const TensorSpec& spec, const Shape& shape) {
  if (shape.size() != spec.shape.size()) return false;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    const bool symbolic = d < spec.symbolic_dims.size() && !spec.symbolic_dims[d].empty();
    if (!symbolic && shape[d] != spec.shape[d]) return false;
  }
  return true;
}

// " (dims 0, 2, 3 symbolic: batch, height, width)", or "" when none is.
std::string symbolic_text(const TensorSpec& spec) {
  std::string dims, names;
  for (std::size_t d = 0; d < spec.symbolic_dims.size(); ++d) {
    if (spec.symbolic_dims[d].empty()) continue;
    dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    names += (names.empty() ? "" : ", ") + spec.symbolic_dims[d];
  }
  return dims.empty() ? "" : " (dims " + dims + " symbolic: " + names + ")";
}

// One --input name=file.npy, read.
struct InputFile {
  std::string name, path;
  Tensor tensor;
};

// Reads every --input file before the model is loaded, so that an ONNX file
// is imported at their shapes.
std::vector<InputFile> read_input_files(const std::vector<std::string>& specs) {
  std::vector<InputFile> files;
  for (const std::string& spec : specs) {
    const std::size_t eq = spec.find('=');
    KILN_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < spec.size(), ErrorKind::InvalidArgument,
               "--input '" + spec + "' must look like name=file.npy");
    const std::string name = spec.substr(0, eq), path = spec.substr(eq + 1);
    for (const InputFile& f : files)
      KILN_CHECK(f.name != name, ErrorKind::InvalidArgument, "--input '" + name + "' is given twice");
    files.push_back({name, path, load_npy(path)});
  }
  return files;
}

// Builds the model's inputs from --input name=file.npy and, for the input they
// leave open, the image. Each .npy must have its input's dtype, and its shape
// or, where the model's dims are symbolic, any extents there.
std::vector<Tensor> gather_inputs(const Model& model, std::vector<InputFile> files,
                                  std::optional<ImageSlot>& image_slot, const ModelArgs& args) {
  const std::vector<TensorSpec> wanted = model.inputs();
  std::vector<std::optional<Tensor>> given(wanted.size());
  std::string names;
  for (const TensorSpec& w : wanted) names += (names.empty() ? "" : ", ") + w.name;
  for (InputFile& file : files) {
    const std::string& name = file.name;
    auto it = std::find_if(wanted.begin(), wanted.end(), [&](const TensorSpec& w) { return w.name == name; });
    KILN_CHECK(it != wanted.end(), ErrorKind::InvalidArgument,
               "--input '" + name + "': the model has no input of that name (its inputs: " + names + ")");
    const auto i = static_cast<std::size_t>(it - wanted.begin());
    Tensor& t = file.tensor;
    KILN_CHECK(t.dtype() == it->dtype && admits(*it, t.shape()), ErrorKind::ShapeMismatch,
               "--input '" + name + "': the model expects " + std::string(dtype_name(it->dtype)) + shape_str(it->shape) +
                   symbolic_text(*it) + ", " + file.path + " holds " + std::string(dtype_name(t.dtype())) +
                   shape_str(t.shape()));
    given[i] = std::move(t);
  }

  std::vector<std::size_t> open;
  for (std::size_t i = 0; i < wanted.size(); ++i)
    if (!given[i]) open.push_back(i);
  if (open.size() == 1) {
    const TensorSpec& w = wanted[open[0]];
    const std::int64_t usual = args.from_file() ? 0 : args.effective_image_size();
    ImageSlot slot{open[0], args.batch, usual, usual};
    if (args.from_file()) {
      // An ONNX model fixes the image size and batch itself.
      KILN_CHECK(w.dtype == DType::f32 && w.shape.size() == 4 && w.shape[1] == 3, ErrorKind::InvalidArgument,
                 "input '" + w.name + "' (" + std::string(dtype_name(w.dtype)) + shape_str(w.shape) +
                     ") cannot take an image (that needs f32[N, 3, H, W]); give it with --input " + w.name + "=file.npy");
      slot.batch = w.shape[0];
      slot.height = w.shape[2];
      slot.width = w.shape[3];
    }
    image_slot = slot;
  } else if (!open.empty()) {
    std::string missing;
    for (std::size_t i : open) missing += (missing.empty() ? "" : ", ") + wanted[i].name;
    throw_error(ErrorKind::InvalidArgument, "the model has several inputs without --input name=file.npy: " + missing);
  }
  std::vector<Tensor> inputs;
  for (auto& t : given) inputs.push_back(t ? std::move(*t) : Tensor());
  return inputs;
}

// Writes each output to its file (distinct_file_names, computed before the
// run); a file whose name differs from its output's name says which output it holds.
void write_outputs(const std::string& dir, const std::vector<TensorSpec>& specs, const std::vector<std::string>& files,
                   const std::vector<Tensor>& outputs) {
  for (std::size_t i = 0; i < outputs.size() && i < specs.size(); ++i) {
    const std::string path = (std::filesystem::path(dir) / files[i]).string();
    save_npy(path, outputs[i]);
    const bool renamed = files[i] != specs[i].name + ".npy";
    std::printf("wrote %s (%s%s)%s\n", path.c_str(), std::string(dtype_name(outputs[i].dtype())).c_str(),
                shape_str(outputs[i].shape()).c_str(), renamed ? (" for output '" + specs[i].name + "'").c_str() : "");
  }
}

std::vector<std::string> names_of(const std::vector<TensorSpec>& specs) {
  std::vector<std::string> names;
  for (const TensorSpec& spec : specs) names.push_back(spec.name);
  return names;
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "run a model (built-in, an ONNX file, or a compiled-model file from `kiln compile`) on an image or on .npy inputs, eagerly "
                                        "and compiled; print the results, the eager/compiled difference and both timings");
  auto args = std::make_shared<ModelArgs>();
  auto image = std::make_shared<std::string>();
  auto preprocess = std::make_shared<std::string>("imagenet");
  auto mean = std::make_shared<std::string>();
  auto stddev = std::make_shared<std::string>();
  auto iters = std::make_shared<int>(3);
  auto top = std::make_shared<int>(5);
  auto input_specs = std::make_shared<std::vector<std::string>>();
  auto output_dir = std::make_shared<std::string>();
  args->add_to(*cmd);
  const std::string default_image = default_image_path();
  cmd->add_option("--image", *image,
                  "a PNG, JPEG, BMP or binary PPM/PGM file for the model's image input; at most 67108864 pixels "
                  "(8192x8192) and 32768 pixels a side (default: " +
                      (default_image.empty() ? std::string("none found") : default_image) + ")");
  cmd->add_option("--preprocess", *preprocess,
                  "how the image becomes the input: imagenet (torchvision's classifiers: shorter side resized, centre "
                  "crop, ImageNet mean and std), unit (resized to the input, [0, 1]) or letterbox (YOLO-style "
                  "detectors: resized keeping the aspect ratio, grey padding, [0, 1]); kiln run prints which it applied")
      ->capture_default_str()
      ->check(CLI::IsMember({"imagenet", "unit", "letterbox"}));
  cmd->add_option("--mean", *mean, "R,G,B: the mean subtracted from the [0, 1] pixels (replaces --preprocess's)");
  cmd->add_option("--std", *stddev, "R,G,B: the standard deviation they are divided by (replaces --preprocess's)");
  cmd->add_option("--input", *input_specs, "name=file.npy: a model input from a NumPy file (repeatable; dtype and shape "
                                           "must match the model's input, symbolic dims at any extent)");
  cmd->add_option("--output-dir", *output_dir,
                  "write every output as DIR/<output name>.npy (characters other than letters, digits, '.', '-', '_' "
                  "become '_'; names that then clash get _2, _3, ...) and a segmentation mask or detection picture as "
                  "DIR/<model>_mask.png or DIR/<model>_detections.png (without --output-dir: in the current folder); "
                  "DIR is created and checked for writing before the model runs");
  cmd->add_option("--iters", *iters, "timed calls after the first one (median reported)")
      ->capture_default_str()->check(CLI::Range(0, 100000));
  cmd->add_option("--top", *top, "how many classes to print")->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->callback([args, image, preprocess, mean, stddev, iters, top, input_specs, output_dir] {
    // A compiled-model file brings its own plan (its graph after passes is
    // what eager runs here, op by op); anything else is compiled now.
    std::optional<CompiledModel> loaded;
    KILN_CHECK(!args->compiled_file() || args->dtype == "model", ErrorKind::InvalidArgument,
               "--dtype converts a model before it compiles; the compiled-model file '" + args->model_file +
                   "' keeps the types it was compiled with (give --dtype to `kiln compile`)");
    if (args->compiled_file())
      loaded = load(args->model_file, {.backend = args->backend, .device = args->device, .cache_dir = args->cache_dir});
    std::vector<InputFile> input_files = read_input_files(*input_specs);
    // An ONNX file is imported at the input files' shapes (symbolic dims
    // they leave open take --input-shape, --image-size and --batch).
    Model model = loaded ? loaded->model() : args->load();
    // A file holding several shape sets: the one the input files' shapes pick.
    if (loaded && !input_files.empty()) {
      std::vector<Shape> shapes;
      for (const TensorSpec& spec : model.inputs()) {
        shapes.push_back(spec.shape);
        for (const InputFile& file : input_files)
          if (file.name == spec.name) shapes.back() = file.tensor.shape();
      }
      model = loaded->model_for(shapes);
    }
    // A model with symbolic dims is imported again at the input files'
    // shapes, so that import-time folding and checks see the real extents
    // (a file that breaks what the model fixes is refused by gather_inputs).
    if (!loaded && model.has_symbolic_dims()) {
      std::map<std::string, Shape> known;
      bool differs = model.import_pending();
      for (const TensorSpec& spec : model.inputs())
        for (const InputFile& file : input_files)
          if (file.name == spec.name && admits(spec, file.tensor.shape())) {
            known.emplace(file.name, file.tensor.shape());
            differs = differs || file.tensor.shape() != spec.shape;
          }
      if (differs) model = args->load(known);
    }
    // The output folder is checked (and the file names chosen) before anything
    // runs: an unwritable folder fails now, not after the inference.
    std::vector<std::string> output_files;
    if (!output_dir->empty()) {
      prepare_output_dir(*output_dir);
      output_files = distinct_file_names(names_of(model.outputs()), ".npy");
    }
    std::optional<ImageSlot> slot;
    std::vector<Tensor> inputs = gather_inputs(model, std::move(input_files), slot, *args);
    ImageInfo info;
    ImageGeometry geometry;
    const ImagePreparation preparation{*parse_preprocess(*preprocess), parse_triple(*mean, "--mean"),
                                       parse_triple(*stddev, "--std")};
    if (preparation.std)
      for (float v : *preparation.std)
        KILN_CHECK(v != 0.0f, ErrorKind::InvalidArgument, "--std '" + *stddev + "' divides by zero");
    if (slot) {
      if (image->empty()) *image = default_image_path();
      KILN_CHECK(!image->empty(), ErrorKind::InvalidArgument,
                 "the model takes an image and no --image was given (kiln's sample photograph is not installed "
                 "beside this program)");
      inputs[slot->index] =
          load_image_tensor(*image, slot->height, slot->width, slot->batch, preparation, &info, &geometry);
    }
    const CompileOptions options = loaded ? loaded->options() : args->compile_options();

    EagerModel eager_model = eager(model, {.backend = options.backend, .device = options.device});
    CompiledModel compiled = loaded ? *loaded : compile(model, options);

    if (slot) {
      std::printf("kiln run: %s, batch %lld, on %s (%dx%d, %d channels) as a %lldx%lld input\n", model.name().c_str(),
                  static_cast<long long>(slot->batch), image->c_str(), info.width, info.height, info.channels,
                  static_cast<long long>(slot->width), static_cast<long long>(slot->height));
      std::printf("preprocessing: %s (--preprocess, --mean, --std)\n",
                  describe(preparation, slot->height, slot->width).c_str());
    } else {
      std::printf("kiln run: %s on %zu input file(s)\n", model.name().c_str(), input_specs->size());
    }
    std::vector<Tensor> eager_out, compiled_out;
    Timing te = time_calls([&] { return eager_model(inputs); }, *iters, eager_out);
    Timing tc = time_calls([&] { return compiled(inputs); }, *iters, compiled_out);

    if (args->from_file()) {
      std::printf("backend %s, mode %s; model from %s\n", options.backend.c_str(),
                  std::string(mode_name(options.mode)).c_str(), args->model_file.c_str());
    } else {
      std::printf("backend %s, mode %s; weights are seeded (seed %llu), not trained, so the classes show the pipeline "
                  "working, not a real prediction\n",
                  options.backend.c_str(), std::string(mode_name(options.mode)).c_str(),
                  static_cast<unsigned long long>(args->seed));
    }
    const std::vector<TensorSpec> output_specs = model.outputs();
    if (model.task() == "classification") {
      std::printf("top-%d (compiled):\n", *top);
      print_top(compiled_out.at(0), *top);
    } else if (model.task() == "segmentation" || model.task() == "detection") {
#if KILN_HAVE_TASK_OUTPUT
      // The photograph only when the input came from it (not from --input files).
      report_task_outputs(model, compiled_out, slot ? *image : std::string(), *output_dir, geometry);
#else
      print_output_summary(output_specs, compiled_out);
#endif
    } else {
      std::printf("outputs (compiled):\n");
      print_output_summary(output_specs, compiled_out);
    }

    // Compared as kiln bench compares: element by element, and a detection
    // list as a set (which of two tied boxes NMS keeps, and their order, may
    // differ with rounding).
    const std::optional<bench::DetectionList> detection_list = bench::find_detection_list(model.task(), output_specs);
    // Allowed max |compiled - eager| relative to the largest |eager output|: kiln bench's default.
    const double tolerance = bench::default_tolerance(args->dtype);
    const bench::Agreement agreement =
        bench::compare_outputs(eager_out, compiled_out, tolerance, detection_list);
    std::printf("max |eager - compiled| = %.3g (largest |output| %.3g)\n", agreement.max_abs_diff, agreement.scale);
    if (agreement.matches && agreement.tied_detections > 0)
      std::printf("detection lists: the same detections (%d near-tied ones kept by one mode only)\n",
                  agreement.tied_detections);
    else if (agreement.matches && detection_list)
      std::printf("detection lists: the same detections\n");
    if (!agreement.matches)
      std::printf("WARNING: compiled and eager outputs differ beyond tolerance %.0e: %s\n", tolerance,
                  agreement.problem.c_str());
    if (!output_dir->empty()) write_outputs(*output_dir, output_specs, output_files, compiled_out);
    const auto& es = eager_model.stats();
    const auto& cs = compiled.stats();
    std::printf("timings (first call includes compiling; then the median of %d calls):\n", *iters);
    std::printf("  %-10s first %9.1f ms   median %9.1f ms   %4d dispatches   %7.1f MiB on device\n", "eager",
                te.first_ms, te.median_ms, es.dispatches_per_run, static_cast<double>(es.peak_device_bytes) / 1048576.0);
    std::printf("  %-10s first %9.1f ms   median %9.1f ms   %4d dispatches   %7.1f MiB on device\n", "compiled",
                tc.first_ms, tc.median_ms, cs.dispatches_per_run, static_cast<double>(cs.peak_device_bytes) / 1048576.0);
    std::printf("  compiled first call: plan %.0f ms (%s), kernels %.0f ms (%d compiled, %d from the disk cache, %d "
                "from the file; summed over kernels: compiler %.0f ms, pipeline creation %.0f ms), weights upload "
                "%.0f ms (beside the kernels), the rest %.0f ms\n",
                cs.plan_ms,
                loaded                ? "read from the file"
                : cs.plan_from_cache ? "from the plan cache"
                : cs.tuning_ms > 0   ? (std::to_string(cs.graph_passes_run) + " graph passes, " +
                                      std::to_string(static_cast<long long>(cs.tuning_ms)) + " ms of it tuning")
                                         .c_str()
                                      : (std::to_string(cs.graph_passes_run) + " graph passes").c_str(),
                cs.kernels_ms, cs.kernel_cache_misses, cs.kernel_cache_hits, cs.kernels_from_file,
                cs.kernel_compile_ms, cs.pipeline_ms, cs.upload_ms,
                tc.first_ms - cs.compile_ms);
    if (*iters > 0 && tc.median_ms > 0 && loaded)
      std::printf("  compiled is %.2fx the speed of eager (loaded in %.0f ms: %d graph passes run, %d kernels from the "
                  "file, %d compiled)\n",
                  te.median_ms / tc.median_ms, cs.compile_ms, cs.graph_passes_run, cs.kernels_from_file,
                  cs.kernel_cache_misses);
    else if (*iters > 0 && tc.median_ms > 0)
      std::printf("  compiled is %.2fx the speed of eager (compile: %.0f ms, %d kernels compiled, %d from the disk cache)\n",
                  te.median_ms / tc.median_ms, cs.compile_ms, cs.kernel_cache_misses, cs.kernel_cache_hits);
    if (cs.tuning_in_background)
      std::printf("  tune=background: tuning was still running, so these timings are of the plan on records; the "
                  "sites it finished are recorded for the next process\n");
  });
}

}  // namespace kiln::tools

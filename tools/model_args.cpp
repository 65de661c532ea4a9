#include "model_args.h"

#include "src/base/check.h"

#include <charconv>
#include <fstream>
#include <string_view>

#include <kiln/onnx.h>

namespace kiln::tools {

SettingOverrides parse_settings(const std::vector<std::string>& settings) {
  SettingOverrides overrides;
  for (const std::string& setting : settings) {
    const std::size_t eq = setting.find('=');
    KILN_CHECK(eq != std::string::npos && eq > 0, ErrorKind::InvalidArgument,
               "--set takes NAME=VALUE, got '" + setting + "'");
    overrides.emplace_back(setting.substr(0, eq), setting.substr(eq + 1));
  }
  return overrides;
}

std::map<std::string, Shape> parse_input_shapes(const std::vector<std::string>& specs, const std::string& option) {
  std::map<std::string, Shape> shapes;
  for (const std::string& spec : specs) {
    const std::size_t eq = spec.find('=');
    const std::string what = option + " '" + spec + "'";
    KILN_CHECK(eq != std::string::npos && eq > 0, ErrorKind::InvalidArgument,
               what + " must look like NAME=DIMS, for example images=1x3x640x640");
    Shape shape;
    const std::string dims = spec.substr(eq + 1);
    std::size_t start = 0;
    while (start <= dims.size() && !dims.empty()) {
      std::size_t end = dims.find_first_of("x,", start);
      if (end == std::string::npos) end = dims.size();
      const std::string text = dims.substr(start, end - start);
      std::int64_t value = -1;
      const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
      KILN_CHECK(!text.empty() && ec == std::errc() && ptr == text.data() + text.size() && value >= 0,
                 ErrorKind::InvalidArgument, what + ": '" + text + "' is not a dimension (a whole number, 0 or more)");
      shape.push_back(value);
      start = end + 1;
    }
    KILN_CHECK(shapes.emplace(spec.substr(0, eq), shape).second, ErrorKind::InvalidArgument,
               option + " names '" + spec.substr(0, eq) + "' twice");
  }
  return shapes;
}

std::map<std::string, Shape> parse_shape_set(const std::string& spec) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = spec.find(';', start);
    parts.push_back(spec.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return parse_input_shapes(parts, "--shape-set");
}

void ModelArgs::add_to(CLI::App& command) {
  std::string names;
  for (const auto& n : models::names()) names += (names.empty() ? "" : ", ") + n;
  command.add_option("model_file", model_file, "an ONNX model file (.onnx), or where the command takes one, a compiled-model file (.kiln, from `kiln compile`); replaces --model");
  command.add_option("--model", model, "built-in model (" + names + ")")->capture_default_str();
  command.add_option("--image-size", image_size, "input height and width (default: the built-in model's usual size: 224, "
                                                "320 for SSDLite320); for an ONNX file, the size of symbolic ones "
                                                "(default 224)")
      ->check(CLI::Range(32, 1024));
  command.add_option("--batch", batch, "batch size (for an ONNX file, the size of its other symbolic dims)")
      ->capture_default_str()->check(CLI::Range(1, 256));
  command.add_option("--input-shape", input_shapes,
                     "NAME=DIMS (e.g. images=1x3x640x640): an ONNX file's input imported at this shape (repeatable); "
                     "symbolic dims not given so take --image-size and --batch");
  command.add_option("--seed", seed, "seed of the built-in model's weights")->capture_default_str();
  command.add_option("--backend", backend, "vulkan, cuda, hip, cpu or null (see `kiln devices`)")->capture_default_str();
  command.add_option("--device", device, "device index or part of its name (default: the first)");
  command.add_option("--mode", mode, "compile mode: default, reduce-overhead, max-autotune")->capture_default_str();
  command.add_flag("--fullgraph", fullgraph, "fail if the model has graph breaks instead of running them eagerly");
  command.add_option("--dtype", dtype, "run the model's f32 tensors as f16 or bf16, eagerly and compiled, as PyTorch's "
                                       "model.half() would (kernels compute in f32; inputs and outputs keep their types)")
      ->check(CLI::IsMember({"model", "f16", "bf16"}))
      ->capture_default_str();
  command.add_option("--set", settings, "a compiler setting, NAME=VALUE (repeatable; `kiln settings` lists them)");
  command.add_option("--cache-dir", cache_dir, "compiled-kernel cache directory ('off' disables; default $KILN_CACHE_DIR or ~/.cache/kiln)");
  command.add_option("--db", tune_db, "the tuning database max-autotune reads (default: tuning.db beside the kernel cache; "
                                      "the same as --set tune_db=FILE)");
}

bool ModelArgs::compiled_file() const {
  if (model_file.empty()) return false;
  std::ifstream in(model_file, std::ios::binary);
  char magic[8] = {};
  in.read(magic, sizeof magic);
  return in.gcount() == sizeof magic && std::string_view(magic, sizeof magic) == "KILNMODL";
}

std::int64_t ModelArgs::effective_image_size() const {
  return image_size > 0 ? image_size : models::usual_image_size(model);
}

Model ModelArgs::load(const std::map<std::string, Shape>& known) const {
  const Model loaded = load_declared(known);
  if (dtype == "model") return loaded;
  return loaded.with_float_type(dtype == "f16" ? DType::f16 : DType::bf16);
}

Model ModelArgs::load_declared(const std::map<std::string, Shape>& known) const {
  KILN_CHECK(!compiled_file(), ErrorKind::InvalidArgument,
             "'" + model_file + "' is a compiled-model file: `kiln run` takes it; this command needs the model itself "
             "(an ONNX file or --model)");
  KILN_CHECK(input_shapes.empty() || from_file(), ErrorKind::InvalidArgument,
             "--input-shape is for an ONNX file; a built-in model takes --batch and --image-size");
  if (from_file()) {
    OnnxOptions onnx;
    onnx.input_shapes = parse_input_shapes(input_shapes);
    for (const auto& [name, shape] : known) {
      const auto [it, added] = onnx.input_shapes.emplace(name, shape);
      KILN_CHECK(added || it->second == shape, ErrorKind::InvalidArgument,
                 "--input-shape " + name + "=" + shape_str(it->second) + " disagrees with the shape of its input file, " +
                     shape_str(shape));
    }
    onnx.default_dim = batch;
    // Symbolic height and width: --image-size, else the usual 224.
    onnx.image_size = image_size > 0 ? image_size : 224;
    return load_onnx(model_file, onnx);
  }
  models::ModelOptions options;
  options.batch = batch;
  options.image_size = effective_image_size();
  options.seed = seed;
  return models::build(model, options);
}

CompileOptions ModelArgs::compile_options() const {
  CompileOptions options;
  options.backend = backend;
  options.device = device;
  options.mode = parse_mode(mode);
  options.fullgraph = fullgraph;
  options.cache_dir = cache_dir;
  options.settings = parse_settings(settings);
  if (!tune_db.empty()) options.settings.emplace_back("tune_db", tune_db);
  return options;
}

Settings ModelArgs::resolved_settings() const {
  const CompileOptions options = compile_options();
  return Settings::resolve(options.mode, options.settings);
}

}  // namespace kiln::tools

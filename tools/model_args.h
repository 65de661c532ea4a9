// Options shared by the commands that load a model and pick a device.
#pragma once

#include <kiln/kiln.h>

#include <CLI/CLI.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln::tools {

// "NAME=VALUE" options (--set) as compiler setting overrides; throws
// InvalidArgument for one without a name or an '='.
SettingOverrides parse_settings(const std::vector<std::string>& settings);
// "NAME=DIMS" options (--input-shape: "images=1x3x640x640", or with commas) as
// input shapes by name; throws InvalidArgument naming a malformed one.
std::map<std::string, Shape> parse_input_shapes(const std::vector<std::string>& specs,
                                                const std::string& option = "--input-shape");
// A --shape-set: "NAME=DIMS" of one or more inputs joined by ';'
// ("input_ids=1x16;attention_mask=1x16").
std::map<std::string, Shape> parse_shape_set(const std::string& spec);

struct ModelArgs {
  std::string model_file;  // an ONNX file or a compiled-model file (.kiln); when given it replaces --model
  std::string model = "resnet18";
  std::int64_t image_size = 0;  // 0: the built-in model's usual size (models::usual_image_size)
  std::int64_t batch = 1;
  std::uint64_t seed = 0;
  std::string backend = "vulkan";
  std::string device;
  std::string mode = "default";
  bool fullgraph = false;
  std::string cache_dir;
  std::vector<std::string> settings;  // NAME=VALUE, repeatable
  std::string tune_db;                // --db: the tuning database (the tune_db setting)
  std::vector<std::string> input_shapes;  // --input-shape NAME=DIMS, repeatable (ONNX files)
  std::string dtype = "model";            // --dtype: model (its own types), f16 or bf16 (Model::with_float_type)

  void add_to(CLI::App& command);
  // The ONNX file if one was given (symbolic dims take --input-shape, the
  // shapes of `known` inputs, --image-size and --batch), else the built-in model.
  // With --dtype f16 or bf16, the model's f32 computation in that type.
  Model load(const std::map<std::string, Shape>& known = {}) const;
  // load() before --dtype: the model as declared.
  Model load_declared(const std::map<std::string, Shape>& known = {}) const;
  // --image-size, else the built-in model's usual size.
  std::int64_t effective_image_size() const;
  bool from_file() const { return !model_file.empty(); }
  // Whether the model file is a compiled-model file (kiln compile's .kiln), by its header.
  bool compiled_file() const;
  CompileOptions compile_options() const;
  // The settings --mode and --set give (the environment's included), as compile() resolves them.
  Settings resolved_settings() const;
};

}  // namespace kiln::tools

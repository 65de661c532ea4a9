// A model from an ONNX file ("*.onnx") or, by name, one of kiln's built-in
// models (their weights are seeded, not trained: the pipeline runs, the
// answers mean nothing).
#pragma once

#include <kiln/kiln.h>
#include <kiln/onnx.h>

#include <stdexcept>
#include <string>

namespace examples {

// "--size 224"'s value: a whole number of pixels.
inline int size_argument(const std::string& text) {
  std::size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value < 8 || value > 4096)
    throw kiln::Error(kiln::ErrorKind::InvalidArgument, "--size takes a whole number of pixels (8 to 4096), not '" + text + "'");
  return value;
}

inline bool is_compiled_model_file(const std::string& name) {
  return name.size() > 5 && name.compare(name.size() - 5, 5, ".kiln") == 0;
}

inline bool is_onnx_file(const std::string& name) {
  return name.size() > 5 && name.compare(name.size() - 5, 5, ".onnx") == 0;
}

// A built-in model takes `size` as its input's height and width; an ONNX
// file keeps the input shape it declares.
inline kiln::Model load_model(const std::string& name, int size) {
  if (is_onnx_file(name)) return kiln::load_onnx(name);
  return kiln::models::build(name, {.image_size = size});
}

// The square image size an NCHW image model takes.
inline int input_size(const kiln::Model& model) {
  const kiln::Shape shape = model.inputs().at(0).shape;  // a copy: inputs() returns a temporary
  if (shape.size() != 4 || shape[1] != 3 || shape[2] != shape[3])
    throw kiln::Error(kiln::ErrorKind::InvalidArgument,
                      model.name() + ": expected one square RGB image input [N, 3, S, S], got " + kiln::shape_str(shape));
  return static_cast<int>(shape[2]);
}

}  // namespace examples

// The PyTorch exports of tests/fixtures/pytorch, made runnable: make_fixtures.py
// exports each architecture without its weights (graph inputs named by their
// state_dict names) and computes PyTorch's outputs with weights from a
// counter-based generator; generated_tensor makes the same values bit for
// bit, and generate_weights puts them back into the graph as initializers.
// Used by the pytorch_fixtures suite and the soak program.
#pragma once

#include <kiln/model.h>
#include <kiln/tensor.h>

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace pytorch_exports {

// make_fixtures.py's `fill`: a tensor's values from its name.
kiln::Tensor generated_tensor(const std::string& name, const kiln::Shape& shape);

// Every graph input of `proto` that `is_data` does not claim holds a weight:
// it becomes an initializer made by the generator. Returns those weights' shapes.
std::map<std::string, kiln::Shape> generate_weights(onnx::ModelProto& proto,
                                                   const std::function<bool(const std::string&)>& is_data);

// tests/fixtures/pytorch/<file> with its weights generated (the inputs named
// in `data` stay inputs), loaded as kiln::load_onnx_bytes loads it. Throws
// kiln::Error (NotFound) when the file cannot be read.
kiln::Model load_with_weights(const std::string& fixture_folder, const std::string& file,
                              const std::function<bool(const std::string&)>& is_data);

}  // namespace pytorch_exports

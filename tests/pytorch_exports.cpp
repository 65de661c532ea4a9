#include "pytorch_exports.h"

#include <kiln/error.h>
#include <kiln/onnx.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace pytorch_exports {
namespace {

std::uint64_t name_seed(const std::string& name) {
  std::uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a 64
  for (unsigned char byte : name) h = (h ^ byte) * 0x100000001B3ull;
  return h;
}

// The i-th (from 0) uniform float in [0, 1) of `seed`'s stream: splitmix64 of
// seed + (i + 1) * golden, top 24 bits (exact in f32).
float uniform01(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * 0x1p-24f;
}

}  // namespace

kiln::Tensor generated_tensor(const std::string& name, const kiln::Shape& shape) {
  kiln::Tensor t(kiln::DType::f32, shape);
  auto values = t.values<float>();
  const std::uint64_t seed = name_seed(name);
  std::int64_t fan_in = 1;
  for (std::size_t d = 1; d < shape.size(); ++d) fan_in *= shape[d];
  const float he_scale = static_cast<float>(std::sqrt(6.0 / static_cast<double>(fan_in)));
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float u = uniform01(seed, i);
    const float signed_u = 2.0f * u - 1.0f;
    float v;
    if (name.ends_with("running_var")) v = 0.5f + u;
    else if (name.ends_with("running_mean")) v = 0.2f * signed_u;
    else if (shape.size() <= 1 && name.ends_with("weight")) v = 1.0f + 0.2f * signed_u;
    else if (shape.size() <= 1) v = 0.2f * signed_u;
    else v = he_scale * signed_u;
    values[i] = v;
  }
  return t;
}

std::map<std::string, kiln::Shape> generate_weights(onnx::ModelProto& proto,
                                                   const std::function<bool(const std::string&)>& is_data) {
  onnx::GraphProto& graph = *proto.mutable_graph();
  std::map<std::string, kiln::Shape> parameters;
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> inputs;
  for (const onnx::ValueInfoProto& input : graph.input()) {
    if (is_data(input.name())) {
      *inputs.Add() = input;
      continue;
    }
    kiln::Shape shape;
    for (const auto& dim : input.type().tensor_type().shape().dim()) shape.push_back(dim.dim_value());
    parameters[input.name()] = shape;
    const kiln::Tensor value = generated_tensor(input.name(), shape);
    onnx::TensorProto& init = *graph.add_initializer();
    init.set_name(input.name());
    init.set_data_type(onnx::TensorProto_DataType_FLOAT);
    for (std::int64_t d : shape) init.add_dims(d);
    const auto values = value.values<float>();
    init.set_raw_data(values.data(), values.size() * sizeof(float));
  }
  graph.mutable_input()->Swap(&inputs);
  return parameters;
}

kiln::Model load_with_weights(const std::string& fixture_folder, const std::string& file,
                              const std::function<bool(const std::string&)>& is_data) {
  const std::filesystem::path path = std::filesystem::path(fixture_folder) / file;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw kiln::Error(kiln::ErrorKind::NotFound, "cannot read " + path.string() + " (run make_fixtures.py)");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  onnx::ModelProto proto;
  if (!proto.ParseFromString(bytes.str())) throw kiln::Error(kiln::ErrorKind::Corrupt, path.string() + " is no ONNX model");
  generate_weights(proto, is_data);
  return kiln::load_onnx_bytes(proto.SerializeAsString(), file, "", {});
}

}  // namespace pytorch_exports

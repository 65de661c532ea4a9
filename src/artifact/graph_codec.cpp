#include "src/artifact/graph_codec.h"
#include "src/base/json_number.h"

#include "src/base/check.h"

#include <kiln/error.h>

#include <cstdint>
#include <cstring>

namespace kiln::artifact {
namespace {

using nlohmann::json;

// Attribute kinds, by the variant's index: the tag stored beside each value.
constexpr const char* kAttributeTags[] = {"int", "float", "string", "ints", "floats"};

json encode_attribute(const graph::Attribute& a) {
  json value;
  std::visit([&](const auto& v) { value = v; }, a);
  return {{"t", kAttributeTags[a.index()]}, {"v", std::move(value)}};
}

graph::Attribute decode_attribute(const json& j) {
  const std::string tag = j.at("t").get<std::string>();
  const json& v = j.at("v");
  if (tag == "int") return base::json_number<std::int64_t>(v);
  if (tag == "float") return base::json_number<double>(v);
  if (tag == "string") return v.get<std::string>();
  if (tag == "ints") return base::json_numbers<std::int64_t>(v);
  if (tag == "floats") return base::json_numbers<double>(v);
  throw_error(ErrorKind::Corrupt, "unknown attribute kind '" + tag + "'");
}

json encode_type(const graph::TensorType& t) {
  return {{"dtype", std::string(dtype_name(t.dtype))}, {"shape", Shape(t.shape)}, {"dynamic", t.dynamic}};
}

graph::TensorType decode_type(const json& j) {
  graph::TensorType t;
  t.dtype = parse_dtype_name(j.at("dtype").get<std::string>());
  t.shape = Shape(base::json_numbers<std::int64_t>(j.at("shape")));
  t.dynamic = base::json_number<bool>(j.at("dynamic"));
  return t;
}

}  // namespace

DType parse_dtype_name(std::string_view name) {
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8, DType::boolean})
    if (dtype_name(d) == name) return d;
  throw_error(ErrorKind::Corrupt, "unknown element type '" + std::string(name) + "'");
}

json encode_tensor(const Tensor& tensor, BlobWriter& blobs) {
  return {{"dtype", std::string(dtype_name(tensor.dtype()))},
          {"shape", tensor.shape()},
          {"blob", blobs.add(tensor.bytes())}};
}

Tensor decode_tensor(const json& j, const Container& file) {
  const DType dtype = parse_dtype_name(j.at("dtype").get<std::string>());
  const Shape shape = Shape(base::json_numbers<std::int64_t>(j.at("shape")));
  for (std::int64_t extent : shape)
    KILN_CHECK(extent >= 0 && extent <= (std::int64_t{1} << 40), ErrorKind::Corrupt,
               "'" + file.path() + "': a tensor has extent " + std::to_string(extent));
  const std::span<const std::byte> bytes = file.blob(base::json_number<std::uint64_t>(j.at("blob")), "a tensor");
  // Checked before allocating: the blob's size bounds the tensor's.
  std::uint64_t elements = 1;
  for (std::int64_t extent : shape) {
    KILN_CHECK(extent == 0 || elements <= bytes.size() / static_cast<std::uint64_t>(extent), ErrorKind::Corrupt,
               "'" + file.path() + "': a tensor of shape " + shape_str(shape) + " is larger than its blob");
    elements *= static_cast<std::uint64_t>(extent);
  }
  KILN_CHECK(elements * dtype_size(dtype) == bytes.size(), ErrorKind::Corrupt,
             "'" + file.path() + "': a tensor of " + std::string(dtype_name(dtype)) + shape_str(shape) + " has " +
                 std::to_string(bytes.size()) + " bytes");
  // Weights stay where they lie in the read file (its blobs are aligned), so
  // a warm start writes them into new memory once fewer; a blob at an odd
  // offset (a file kiln did not write) is copied.
  if (reinterpret_cast<std::uintptr_t>(bytes.data()) % dtype_size(dtype) == 0)
    return Tensor::wrap(dtype, shape, file.shared_blob(base::json_number<std::uint64_t>(j.at("blob")), "a tensor"), bytes.size());
  Tensor t(dtype, shape);
  if (!bytes.empty()) std::memcpy(t.bytes().data(), bytes.data(), bytes.size());
  return t;
}

json encode_graph(const graph::Graph& g, BlobWriter& blobs) {
  json values = json::array();
  for (const graph::Value& v : g.values()) {
    json value = {{"name", v.name}, {"type", encode_type(v.type)}, {"producer", v.producer}};
    if (v.constant) value["constant"] = encode_tensor(*v.constant, blobs);
    values.push_back(std::move(value));
  }
  json nodes = json::array();
  for (const graph::Node& n : g.nodes()) {
    json attrs = json::object();
    for (const auto& [name, a] : n.attrs.all()) attrs[name] = encode_attribute(a);
    json node = {{"op", n.op}, {"name", n.name}, {"inputs", n.inputs}, {"outputs", n.outputs}, {"attrs", attrs}};
    if (!n.subgraphs.empty()) {
      json subgraphs = json::array();
      for (const auto& sub : n.subgraphs) subgraphs.push_back(encode_graph(*sub, blobs));
      node["subgraphs"] = std::move(subgraphs);
    }
    nodes.push_back(std::move(node));
  }
  return {{"values", std::move(values)}, {"nodes", std::move(nodes)}, {"inputs", g.inputs()}, {"outputs", g.outputs()}};
}

namespace {

// Subgraphs (If branches) nest no deeper than an import makes them.
constexpr int kMaxSubgraphDepth = 8;

std::shared_ptr<const graph::Graph> decode_graph_at(const json& j, const Container& file, int depth) {
  KILN_CHECK(depth <= kMaxSubgraphDepth, ErrorKind::Corrupt,
             "'" + file.path() + "' nests subgraphs more than " + std::to_string(kMaxSubgraphDepth) + " deep");
  std::vector<graph::Value> values;
  for (const json& jv : j.at("values")) {
    graph::Value& v = values.emplace_back();
    v.id = static_cast<graph::ValueId>(values.size() - 1);
    v.name = jv.at("name").get<std::string>();
    v.type = decode_type(jv.at("type"));
    v.producer = base::json_number<graph::NodeId>(jv.at("producer"));
    if (auto c = jv.find("constant"); c != jv.end()) v.constant = decode_tensor(*c, file);
  }
  std::vector<graph::Node> nodes;
  for (const json& jn : j.at("nodes")) {
    graph::Node& n = nodes.emplace_back();
    n.id = static_cast<graph::NodeId>(nodes.size() - 1);
    n.op = jn.at("op").get<std::string>();
    n.name = jn.at("name").get<std::string>();
    n.inputs = base::json_numbers<graph::ValueId>(jn.at("inputs"));
    n.outputs = base::json_numbers<graph::ValueId>(jn.at("outputs"));
    for (const auto& [name, a] : jn.at("attrs").items()) n.attrs.set(name, decode_attribute(a));
    if (auto subgraphs = jn.find("subgraphs"); subgraphs != jn.end())
      for (const json& sub : *subgraphs) n.subgraphs.push_back(decode_graph_at(sub, file, depth + 1));
  }
  try {
    return std::make_shared<const graph::Graph>(graph::Graph::from_parts(
        std::move(values), std::move(nodes), base::json_numbers<graph::ValueId>(j.at("inputs")),
        base::json_numbers<graph::ValueId>(j.at("outputs"))));
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Internal) throw;
    throw_error(ErrorKind::Corrupt, "'" + file.path() + "' holds an invalid graph: " + e.what());
  }
}

}  // namespace

std::shared_ptr<const graph::Graph> decode_graph(const json& j, const Container& file) {
  return decode_graph_at(j, file, 0);
}

}  // namespace kiln::artifact

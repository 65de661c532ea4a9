// A graph as file metadata: values, nodes and attributes as JSON, constants'
// bytes as blobs. Reading rebuilds the graph through Graph::from_parts, which
// verifies it (ids, order, shape inference of every node), so a file that
// passes its checksum but does not describe a valid graph is still refused.
#pragma once

#include "graph/ir.h"
#include "src/artifact/container.h"

#include <nlohmann/json.hpp>

#include <memory>

namespace kiln::artifact {

nlohmann::json encode_tensor(const Tensor& tensor, BlobWriter& blobs);
Tensor decode_tensor(const nlohmann::json& j, const Container& file);

nlohmann::json encode_graph(const graph::Graph& graph, BlobWriter& blobs);
// Throws Corrupt naming the file and the problem.
std::shared_ptr<const graph::Graph> decode_graph(const nlohmann::json& j, const Container& file);

DType parse_dtype_name(std::string_view name);  // dtype_name()'s inverse; throws Corrupt

}  // namespace kiln::artifact

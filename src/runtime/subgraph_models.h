// The subgraphs of a model's control-flow nodes (If branches, Loop and Scan
// bodies), each run as a model of its own on the enclosing model's device:
// compiled with its options when it is compiled (fused kernels, its mode,
// its cache, shape sets and dynamic dims), eager when it is eager. The node
// itself stays a host step (a graph break): it reads the condition or the
// trip count on the host and calls the subgraph's model, which is made at
// the node's first run.
//
// A subgraph's inputs may be dynamic (data-dependent values of the enclosing
// graph, a loop's growing state): its model is made for the shapes of its
// first call, and other shapes are handled as for an ONNX model with
// symbolic dims (each dynamic extent a symbolic dim): compiled again and
// kept, or served by dynamic kernels (CompileOptions::automatic_dynamic), up
// to CompileOptions::recompile_limit. A subgraph of unknown input rank gets a
// model per rank.
#pragma once

#include <kiln/kiln.h>

#include "graph/op_registry.h"
#include "src/runtime/executor.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln::runtime {

class SubgraphModels {
 public:
  // `model_name` prefixes the subgraph models' names ("model/If_3/then").
  SubgraphModels(std::string model_name, const Executor::Options& options);
  ~SubgraphModels();

  // Runs `node`'s subgraphs through their models (OpSchema::run_with_subgraphs).
  graph::OpSchema::SubgraphRunner runner(const graph::Node& node);
  // One line per subgraph model made so far ("  'm/If_3/then': 4 kernels,
  // 2 shape sets, 7 calls"), for explain(); "" before any.
  std::string describe() const;

 private:
  struct Entry;
  std::vector<Tensor> run(const graph::Node& node, const graph::Graph& subgraph, std::span<const Tensor> inputs);

  std::string model_name_;
  Executor::Options options_;
  std::vector<std::unique_ptr<Entry>> entries_;
};

}  // namespace kiln::runtime

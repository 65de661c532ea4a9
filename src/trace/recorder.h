// Internal to src/trace: records fn's ops into a graph while running them
// eagerly on the example inputs, up to the first host read (graph break);
// after it, notes which recorded values the rest of fn still uses.
#pragma once

#include "src/trace/context.h"

#include <memory>
#include <set>
#include <utility>

namespace kiln::trace {

using OpOutput = std::pair<int, int>;  // (op index, output index)

// The result of one trace.
struct Trace {
  std::vector<graph::TensorType> input_types;
  std::vector<RecordedOp> ops;          // the compiled prefix (every op if there was no break)
  std::vector<Tensor> constants;        // captured tensors, by ValueRef::index
  std::vector<TraceBreak> breaks;       // every host read, in order
  std::vector<OpOutput> exported;       // prefix values the graph returns (with a break), in output order
  std::shared_ptr<graph::Graph> graph;  // has no outputs if a break comes before any kept value
  std::vector<graph::ValueId> op_nodes;  // graph node id of each op
  bool complete() const { return breaks.empty(); }
};

class Recorder : public Context {
 public:
  // `keep` lists prefix values to return from the graph even if this run does
  // not use them after the break (another path did).
  Recorder(const std::vector<Tensor>& inputs, std::set<OpOutput> keep);

  std::vector<Tensor> run_op(const std::string& op, const std::vector<Tensor>& inputs,
                             const graph::Attributes& attrs) override;
  void host_read(const Tensor& x, const SourceLocation& where, std::string_view what) override;
  // Ends the trace with fn's outputs and builds the graph.
  Trace finish(const std::vector<Tensor>& outputs);

 private:
  // The graph value of a tensor, capturing an unknown one as a constant.
  graph::ValueId value_of(const Tensor& t);
  void note_use(const Tensor& t);

  Trace trace_;
  std::shared_ptr<graph::Graph> graph_;
  std::map<TensorKey, std::pair<ValueRef, graph::ValueId>> known_;
  std::vector<Tensor> alive_;  // keeps recorded storage from being reused by new tensors
  std::set<OpOutput> keep_;
  bool broken_ = false;
};

}  // namespace kiln::trace

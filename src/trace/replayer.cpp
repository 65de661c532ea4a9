// Replaying a trace (src/trace/replayer.h).
#include "src/trace/replayer.h"

#include "src/base/check.h"

#include <algorithm>

namespace kiln::trace {

Replayer::Replayer(const Trace& trace, const std::vector<Tensor>& inputs, std::vector<Tensor> prefix_outputs)
    : trace_(trace), prefix_outputs_(std::move(prefix_outputs)) {
  KILN_ASSERT(prefix_outputs_.size() == trace_.exported.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    known_[key_of(inputs[i])] = ValueRef{ValueRef::Kind::input, static_cast<int>(i), 0};
    alive_.push_back(inputs[i]);
  }
}

std::optional<ValueRef> Replayer::ref_of(const Tensor& t) const {
  if (auto it = known_.find(key_of(t)); it != known_.end()) return it->second;
  return std::nullopt;
}

void Replayer::check_available(const Tensor& t) {
  auto it = placeholders_.find(key_of(t));
  if (it == placeholders_.end()) return;
  missing_ = it->second;
  const RecordedOp& op = trace_.ops[it->second.first];
  throw RetraceNeeded{"output " + std::to_string(it->second.second) + " of traced op #" +
                      std::to_string(it->second.first) + " (" + op.op +
                      ") is used after the graph break, but the compiled prefix did not keep it"};
}

std::vector<Tensor> Replayer::run_op(const std::string& op, const std::vector<Tensor>& inputs,
                                     const graph::Attributes& attrs) {
  if (broken_) {
    for (const Tensor& t : inputs) check_available(t);
    return run_eager(op, inputs, attrs);
  }
  const int index = next_op_++;
  const std::string where = "op #" + std::to_string(index) + " ";
  if (index >= static_cast<int>(trace_.ops.size()))
    throw RetraceNeeded{where + "(" + op + ") comes before the first host read, but the trace had " +
                        std::to_string(trace_.ops.size()) + " ops there"};
  const RecordedOp& recorded = trace_.ops[index];
  if (recorded.op != op || !(recorded.attrs == attrs) || recorded.inputs.size() != inputs.size())
    throw RetraceNeeded{where + "is " + op + ", the trace has " + recorded.op + " (or other attributes or inputs)"};
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const ValueRef& want = recorded.inputs[i];
    const std::optional<ValueRef> got = ref_of(inputs[i]);
    const bool same = want.kind == ValueRef::Kind::constant
                          ? !got && same_contents(inputs[i], trace_.constants[want.index])
                          : got && *got == want;
    if (!same)
      throw RetraceNeeded{where + "(" + op + "): input " + std::to_string(i) + " is another tensor than traced"};
  }
  std::vector<Tensor> outputs;
  for (int k = 0; k < recorded.num_outputs; ++k) {
    const OpOutput id{index, k};
    auto exported = std::find(trace_.exported.begin(), trace_.exported.end(), id);
    Tensor t;
    if (exported != trace_.exported.end()) {
      t = prefix_outputs_[exported - trace_.exported.begin()];
    } else {
      // Computed inside the compiled graph only: a stand-in that must not be used later.
      const graph::Value& v = trace_.graph->value(trace_.graph->node(trace_.op_nodes[index]).outputs[k]);
      t = Tensor(v.type.dtype, v.type.dynamic ? Shape{0} : Shape(v.type.shape));
      placeholders_[key_of(t)] = id;
    }
    known_[key_of(t)] = ValueRef{ValueRef::Kind::op_output, index, k};
    alive_.push_back(t);
    outputs.push_back(t);
  }
  return outputs;
}

void Replayer::host_read(const Tensor& x, const SourceLocation&, std::string_view) {
  if (!broken_ && next_op_ != static_cast<int>(trace_.ops.size()))
    throw RetraceNeeded{"the first host read comes after " + std::to_string(next_op_) + " ops, in the trace after " +
                        std::to_string(trace_.ops.size())};
  broken_ = true;
  check_available(x);
}

void Replayer::finish(const std::vector<Tensor>& outputs) {
  if (!broken_) throw RetraceNeeded{"fn returned without the host read the trace had"};
  for (const Tensor& t : outputs) check_available(t);
}

}  // namespace kiln::trace

// Recording a trace (src/trace/recorder.h).
#include "src/trace/recorder.h"

namespace kiln::trace {

Recorder::Recorder(const std::vector<Tensor>& inputs, std::set<OpOutput> keep)
    : graph_(std::make_shared<graph::Graph>()), keep_(std::move(keep)) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const graph::TensorType type{inputs[i].dtype(), inputs[i].shape()};
    trace_.input_types.push_back(type);
    const graph::ValueId id = graph_->add_input("input" + std::to_string(i), type);
    known_.emplace(key_of(inputs[i]), std::make_pair(ValueRef{ValueRef::Kind::input, static_cast<int>(i), 0}, id));
    alive_.push_back(inputs[i]);
  }
}

graph::ValueId Recorder::value_of(const Tensor& t) {
  if (auto it = known_.find(key_of(t)); it != known_.end()) return it->second.second;
  // A tensor made outside the traced ops (a weight): captured by value.
  const int index = static_cast<int>(trace_.constants.size());
  trace_.constants.push_back(t.clone());
  const graph::ValueId id = graph_->add_constant("constant" + std::to_string(index), trace_.constants.back());
  known_.emplace(key_of(t), std::make_pair(ValueRef{ValueRef::Kind::constant, index, 0}, id));
  alive_.push_back(t);
  return id;
}

void Recorder::note_use(const Tensor& t) {
  auto it = known_.find(key_of(t));
  if (it != known_.end() && it->second.first.kind == ValueRef::Kind::op_output)
    keep_.insert({it->second.first.index, it->second.first.output});
}

std::vector<Tensor> Recorder::run_op(const std::string& op, const std::vector<Tensor>& inputs,
                                     const graph::Attributes& attrs) {
  std::vector<Tensor> outputs = run_eager(op, inputs, attrs);
  if (broken_) {
    // After the break fn runs eagerly; it only tells which prefix values it needs.
    for (const Tensor& t : inputs) note_use(t);
    return outputs;
  }
  RecordedOp recorded{op, attrs, {}, static_cast<int>(outputs.size())};
  std::vector<graph::ValueId> ids;
  for (const Tensor& t : inputs) {
    ids.push_back(value_of(t));
    recorded.inputs.push_back(known_.at(key_of(t)).first);
  }
  const auto op_index = static_cast<int>(trace_.ops.size());
  const std::vector<graph::ValueId> out_ids = graph_->add_node(op, ids, attrs);
  trace_.op_nodes.push_back(graph_->value(out_ids[0]).producer);
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    known_[key_of(outputs[k])] = {ValueRef{ValueRef::Kind::op_output, op_index, static_cast<int>(k)}, out_ids[k]};
    alive_.push_back(outputs[k]);
  }
  trace_.ops.push_back(std::move(recorded));
  return outputs;
}

void Recorder::host_read(const Tensor& x, const SourceLocation& where, std::string_view what) {
  trace_.breaks.push_back({where.file_name(), where.line(), where.function_name(), std::string(what)});
  broken_ = true;
  note_use(x);
}

Trace Recorder::finish(const std::vector<Tensor>& outputs) {
  if (!broken_) {
    std::vector<graph::ValueId> ids;
    for (const Tensor& t : outputs) ids.push_back(value_of(t));
    graph_->set_outputs(ids);
    trace_.graph = graph_;
    return std::move(trace_);
  }
  for (const Tensor& t : outputs) note_use(t);
  std::vector<graph::ValueId> ids;
  for (const OpOutput& kept : keep_) {
    // Kept for another path whose prefix was longer: not in this graph.
    if (kept.first >= static_cast<int>(trace_.ops.size()) || kept.second >= trace_.ops[kept.first].num_outputs)
      continue;
    trace_.exported.push_back(kept);
    ids.push_back(graph_->node(trace_.op_nodes[kept.first]).outputs[kept.second]);
  }
  if (!ids.empty()) graph_->set_outputs(ids);
  trace_.graph = graph_;  // without outputs, only for the types of its values
  return std::move(trace_);
}

}  // namespace kiln::trace

#include "graph/passes/rewrite.h"

#include "src/base/check.h"

#include <algorithm>
#include <cstdlib>

namespace kiln::graph::passes {

Rewriter::Rewriter(const Graph& source, Constants constants, std::span<const TensorType> input_types)
    : source_(source), constants_(constants), map_(source.values().size(), -1) {
  KILN_ASSERT(input_types.empty() || input_types.size() == source.inputs().size());
  // Most passes keep most of the graph.
  target_.reserve(source.nodes().size(), source.values().size());
  for (std::size_t i = 0; i < source_.inputs().size(); ++i) {
    const ValueId input = source_.inputs()[i];
    const Value& v = source_.value(input);
    const TensorType& type = input_types.empty() ? v.type : input_types[i];
    KILN_CHECK(type_accepts(v.type, type) || type == v.type, ErrorKind::ShapeMismatch,
               "input '" + v.name + "' is " + type_str(v.type) + ", got " + type_str(type));
    map_[static_cast<std::size_t>(input)] = target_.add_subgraph_input(v.name, type);
    add_name(map_[static_cast<std::size_t>(input)]);
  }
  if (constants_ == Constants::keep_all) {
    for (const Value& v : source_.values())
      if (v.constant) copy_constant(v.id);
  }
}

ValueId Rewriter::copy_constant(ValueId source_value) {
  const Value& v = source_.value(source_value);
  ValueId id = target_.add_constant(unique_value_name(v.name), *v.constant);
  add_name(id);
  map_[static_cast<std::size_t>(source_value)] = id;
  return id;
}

ValueId Rewriter::map(ValueId source_value) {
  if (source_value < 0) return source_value;
  KILN_ASSERT(static_cast<std::size_t>(source_value) < map_.size());
  ValueId mapped = map_[static_cast<std::size_t>(source_value)];
  if (mapped >= 0) return mapped;
  KILN_CHECK(source_.value(source_value).constant.has_value(), ErrorKind::Internal,
             "graph rewrite: value '" + source_.value(source_value).name +
                 "' is used before the pass gave it a counterpart in the new graph");
  return copy_constant(source_value);
}

std::vector<ValueId> Rewriter::map(const std::vector<ValueId>& source_values) {
  std::vector<ValueId> mapped;
  mapped.reserve(source_values.size());
  for (ValueId v : source_values) mapped.push_back(map(v));
  return mapped;
}

void Rewriter::replace(ValueId source_value, ValueId target_value) {
  KILN_ASSERT(source_value >= 0 && static_cast<std::size_t>(source_value) < map_.size());
  KILN_ASSERT(target_value >= 0 && static_cast<std::size_t>(target_value) < target_.values().size());
  map_[static_cast<std::size_t>(source_value)] = target_value;
}

const Tensor* Rewriter::constant(ValueId target_value) const {
  if (target_value < 0) return nullptr;
  const Value& v = target_.value(target_value);
  return v.constant ? &*v.constant : nullptr;
}

std::vector<ValueId> Rewriter::copy_node(const Node& node) {
  return copy_node(node, map(node.inputs), node.attrs);
}

std::vector<ValueId> Rewriter::copy_node(const Node& node, std::vector<ValueId> target_inputs,
                                         Attributes attrs) {
  std::vector<ValueId> outputs =
      target_.add_node(node.op, std::move(target_inputs), std::move(attrs), node.name, node.subgraphs);
  if (names_indexed_) node_names_.insert(node.name);
  KILN_ASSERT(outputs.size() == node.outputs.size());
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    // Keep the source's value names so that names stay stable across passes.
    target_.rename_value(outputs[k], unique_value_name(source_.value(node.outputs[k]).name));
    add_name(outputs[k]);
    map_[static_cast<std::size_t>(node.outputs[k])] = outputs[k];
  }
  return outputs;
}

std::vector<ValueId> Rewriter::add_node(const std::string& op, std::vector<ValueId> target_inputs, Attributes attrs,
                                        const std::string& base_name) {
  index_names();
  std::string name = base_name;
  for (int k = 1; node_names_.count(name) != 0; ++k) name = base_name + "_" + std::to_string(k);
  std::vector<ValueId> outputs = target_.add_node(op, std::move(target_inputs), std::move(attrs), name);
  node_names_.insert(name);
  for (ValueId out : outputs) {
    target_.rename_value(out, unique_value_name(target_.value(out).name));
    add_name(out);
  }
  return outputs;
}

ValueId Rewriter::add_constant(const std::string& base_name, Tensor value) {
  index_names();
  ValueId id = target_.add_constant(unique_value_name(base_name), std::move(value));
  add_name(id);
  return id;
}

Graph Rewriter::finish() {
  std::vector<ValueId> outputs;
  for (ValueId source_output : source_.outputs()) {
    const std::string& name = source_.value(source_output).name;
    ValueId out = map(source_output);
    if (target_.value(out).name == name) {
      outputs.push_back(out);
      continue;
    }
    index_names();
    bool is_input = std::find(target_.inputs().begin(), target_.inputs().end(), out) != target_.inputs().end();
    bool claimed = std::find(outputs.begin(), outputs.end(), out) != outputs.end();
    if (target_.value(out).name != name && (is_input || claimed)) {
      // A graph input (or a value already exported under another name) cannot
      // be renamed: an Identity carries the output's name instead.
      std::string node_name = name;
      for (int n = 1; node_names_.count(node_name) != 0; ++n) node_name = name + "_" + std::to_string(n);
      node_names_.insert(node_name);
      out = target_.add_node("Identity", {out}, {}, node_name)[0];
    }
    if (target_.value(out).name != name) {
      value_names_.erase(target_.value(out).name);
      KILN_CHECK(value_names_.count(name) == 0, ErrorKind::Internal,
                 "graph rewrite: output name '" + name + "' is already taken in the new graph");
      target_.rename_value(out, name);
      value_names_.insert(name);
    }
    outputs.push_back(out);
  }
  target_.set_outputs(std::move(outputs));
  return std::move(target_);
}

void Rewriter::index_names() {
  if (names_indexed_) return;
  names_indexed_ = true;
  value_names_.reserve(target_.values().size());
  for (const Value& v : target_.values()) value_names_.insert(v.name);
  node_names_.reserve(target_.nodes().size());
  for (const Node& n : target_.nodes()) node_names_.insert(n.name);
}

std::string Rewriter::unique_value_name(const std::string& base) const {
  if (!names_indexed_ || value_names_.count(base) == 0) return base;
  for (int n = 1;; ++n) {
    std::string candidate = base + "_" + std::to_string(n);
    if (value_names_.count(candidate) == 0) return candidate;
  }
}

void Rewriter::add_name(ValueId target_value) {
  if (names_indexed_) value_names_.insert(target_.value(target_value).name);
}

Graph with_input_types(const Graph& graph, std::span<const TensorType> input_types) {
  Rewriter rw(graph, Rewriter::Constants::keep_all, input_types);
  for (const Node& node : graph.nodes()) rw.copy_node(node);
  return rw.finish();
}

std::vector<std::vector<NodeId>> consumers(const Graph& graph) {
  std::vector<std::vector<NodeId>> users(graph.values().size());
  for (const Node& node : graph.nodes())
    for (ValueId input : node.inputs)
      if (input >= 0) users[static_cast<std::size_t>(input)].push_back(node.id);
  return users;
}

bool is_graph_output(const Graph& graph, ValueId value) {
  return std::find(graph.outputs().begin(), graph.outputs().end(), value) != graph.outputs().end();
}

const Node* Readers::single_use_producer(ValueId value, int uses) const {
  if (value < 0) return nullptr;
  const NodeId p = graph_.value(value).producer;
  if (p == kNoNode || uses_[static_cast<std::size_t>(value)] != uses) return nullptr;
  return &graph_.node(p);
}

const Node* Readers::single_consumer(ValueId value, const char* op) const {
  const auto v = static_cast<std::size_t>(value);
  if (uses_[v] != 1 || users_[v].size() != 1) return nullptr;
  const Node& node = graph_.node(users_[v][0]);
  return node.op == op ? &node : nullptr;
}

}  // namespace kiln::graph::passes

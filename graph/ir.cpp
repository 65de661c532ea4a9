// The graph IR (graph/ir.h): graph construction, verification and the text
// printer.
#include "graph/ir.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string_view>

#include "graph/op_registry.h"
#include "src/base/check.h"

namespace kiln::graph {

std::string type_str(const TensorType& type) {
  // Values as planned for, unguarded: a message is not a decision.
  const Shape shape = type.shape.hints();
  if (!type.dynamic) return std::string(dtype_name(type.dtype)) + shape_str(shape);
  if (type.shape.empty()) return std::string(dtype_name(type.dtype)) + "[?...]";
  std::string text = std::string(dtype_name(type.dtype)) + "[";
  const std::size_t listed = std::min(type.shape.size(), kMaxListedEntries);
  for (std::size_t i = 0; i < listed; ++i)
    text += (i ? ", " : "") + (shape[i] == kDynamicDim ? std::string("?") : std::to_string(shape[i]));
  if (listed < type.shape.size()) text += ", ... (" + std::to_string(type.shape.size() - listed) + " more)";
  return text + "]";
}

TensorType dynamic_type(DType dtype, Shape shape) { return TensorType{dtype, std::move(shape), true}; }

bool type_accepts(const TensorType& type, const TensorType& actual) {
  if (!type.dynamic) return type == actual;
  if (actual.dynamic || type.dtype != actual.dtype) return false;
  if (type.shape.empty()) return true;  // unknown rank
  if (type.shape.size() != actual.shape.size()) return false;
  for (std::size_t i = 0; i < type.shape.size(); ++i)
    if (type.shape[i] != kDynamicDim && type.shape[i] != actual.shape[i]) return false;
  return true;
}

// ---- construction ---------------------------------------------------------------

ValueId Graph::add_input(const std::string& name, TensorType type) {
  KILN_CHECK(!type.dynamic, ErrorKind::Unsupported,
             "graph input '" + name + "' is " + type_str(type) + ": graph inputs need static shapes");
  return add_subgraph_input(name, std::move(type));
}

ValueId Graph::add_subgraph_input(const std::string& name, TensorType type) {
  KILN_CHECK(!name.empty(), ErrorKind::InvalidArgument, "graph input needs a name");
  Value v;
  v.id = static_cast<ValueId>(values_.size());
  v.name = name;
  v.type = std::move(type);
  use_name(v.name);
  values_.push_back(std::move(v));
  inputs_.push_back(values_.back().id);
  return values_.back().id;
}

ValueId Graph::add_constant(const std::string& name, Tensor value) {
  KILN_CHECK(!name.empty(), ErrorKind::InvalidArgument, "constant needs a name");
  Value v;
  v.id = static_cast<ValueId>(values_.size());
  v.name = name;
  v.type = TensorType{value.dtype(), value.shape()};
  v.constant = std::move(value);
  use_name(v.name);
  values_.push_back(std::move(v));
  return values_.back().id;
}

bool Graph::name_taken(const std::string& name) {
  if (!names_indexed_) {
    names_indexed_ = true;
    name_uses_.reserve(nodes_.size() + values_.size());
    for (const Node& n : nodes_) use_name(n.name);
    for (const Value& v : values_) use_name(v.name);
  }
  return name_uses_.contains(name);
}

void Graph::release_name(const std::string& name) {
  if (!names_indexed_) return;
  auto it = name_uses_.find(name);
  KILN_ASSERT(it != name_uses_.end());
  if (--it->second == 0) name_uses_.erase(it);
}

void Graph::rename_value(ValueId id, const std::string& name) {
  Value& v = value(id);
  if (v.name == name) return;
  release_name(v.name);
  v.name = name;
  use_name(v.name);
}

std::vector<ValueId> Graph::add_node(const std::string& op, std::vector<ValueId> inputs, Attributes attrs,
                                     const std::string& name, std::vector<std::shared_ptr<const Graph>> subgraphs) {
  Node node;
  node.id = static_cast<NodeId>(nodes_.size());
  node.op = op;
  node.name = name;
  if (node.name.empty()) {
    // "<op>_<n>", skipping names already used by a node or value.
    for (std::size_t n = nodes_.size();; ++n) {
      node.name = op + "_" + std::to_string(n);
      if (!name_taken(node.name)) break;
    }
  }
  node.inputs = std::move(inputs);
  node.attrs = std::move(attrs);
  node.subgraphs = std::move(subgraphs);

  std::vector<TensorType> input_types;
  input_types.reserve(node.inputs.size());
  for (std::size_t i = 0; i < node.inputs.size(); ++i) {
    const ValueId id = node.inputs[i];
    KILN_CHECK(id == -1 || (id >= 0 && id < static_cast<ValueId>(values_.size())), ErrorKind::InvalidArgument,
               "node '" + node.name + "' (" + op + "): input " + std::to_string(i) + " refers to value " +
                   std::to_string(id) + ", which is not in the graph");
    input_types.push_back(id == -1 ? TensorType{} : values_[id].type);
  }
  std::vector<TensorType> output_types = infer_node_types(node, input_types);

  for (std::size_t i = 0; i < output_types.size(); ++i) {
    Value v;
    v.id = static_cast<ValueId>(values_.size());
    v.name = output_types.size() == 1 ? node.name : node.name + ":" + std::to_string(i);
    v.type = std::move(output_types[i]);
    v.producer = node.id;
    node.outputs.push_back(v.id);
    use_name(v.name);
    values_.push_back(std::move(v));
  }
  use_name(node.name);
  nodes_.push_back(std::move(node));
  return nodes_.back().outputs;
}

void Graph::set_outputs(std::vector<ValueId> outputs) {
  for (ValueId id : outputs)
    KILN_CHECK(id >= 0 && id < static_cast<ValueId>(values_.size()), ErrorKind::InvalidArgument,
               "graph output refers to value " + std::to_string(id) + ", which is not in the graph");
  outputs_ = std::move(outputs);
}

const Value& Graph::value(ValueId id) const {
  KILN_CHECK(id >= 0 && id < static_cast<ValueId>(values_.size()), ErrorKind::InvalidArgument,
             "no value with id " + std::to_string(id) + " (the graph has " + std::to_string(values_.size()) + ")");
  return values_[id];
}

Value& Graph::value(ValueId id) { return const_cast<Value&>(static_cast<const Graph&>(*this).value(id)); }

const Node& Graph::node(NodeId id) const {
  KILN_CHECK(id >= 0 && id < static_cast<NodeId>(nodes_.size()), ErrorKind::InvalidArgument,
             "no node with id " + std::to_string(id) + " (the graph has " + std::to_string(nodes_.size()) + ")");
  return nodes_[id];
}

std::vector<int> Graph::use_counts() const {
  std::vector<int> counts(values_.size(), 0);
  for (const Node& n : nodes_)
    for (ValueId id : n.inputs)
      if (id >= 0 && id < static_cast<ValueId>(counts.size())) ++counts[id];
  for (ValueId id : outputs_)
    if (id >= 0 && id < static_cast<ValueId>(counts.size())) ++counts[id];
  return counts;
}

// ---- verification ---------------------------------------------------------------

namespace {

// A name two of `items` (nodes or values) carry, if any: sorted views of the
// names, which allocate once for the whole graph instead of once per name.
template <class Item> std::optional<std::string_view> repeated_name(const std::vector<Item>& items) {
  std::vector<std::string_view> names;
  names.reserve(items.size());
  for (const Item& item : items) names.push_back(item.name);
  std::sort(names.begin(), names.end());
  const auto repeat = std::adjacent_find(names.begin(), names.end());
  if (repeat == names.end()) return std::nullopt;
  return *repeat;
}

}  // namespace

Graph Graph::from_parts(std::vector<Value> values, std::vector<Node> nodes, std::vector<ValueId> inputs,
                        std::vector<ValueId> outputs) {
  Graph g;
  g.values_ = std::move(values);
  g.nodes_ = std::move(nodes);
  g.inputs_ = std::move(inputs);
  g.outputs_ = std::move(outputs);
  g.verify();
  return g;
}

void Graph::verify() const {
  const auto num_values = static_cast<ValueId>(values_.size());
  auto fail = [](const std::string& message) { throw_error(ErrorKind::InvalidArgument, "invalid graph: " + message); };

  for (ValueId id = 0; id < num_values; ++id) {
    const Value& v = values_[id];
    if (v.id != id) fail("value at index " + std::to_string(id) + " has id " + std::to_string(v.id));
    if (v.name.empty()) fail("value %" + std::to_string(id) + " has no name");
    if (v.constant) {
      if (v.producer != kNoNode) fail("constant '" + v.name + "' also has a producer node");
      const TensorType actual{v.constant->dtype(), v.constant->shape()};
      if (actual != v.type)
        throw_error(ErrorKind::ShapeMismatch, "invalid graph: constant '" + v.name + "' is typed " + type_str(v.type) +
                                                  " but holds " + type_str(actual));
    }
    if (v.producer != kNoNode && (v.producer < 0 || v.producer >= static_cast<NodeId>(nodes_.size())))
      fail("value '" + v.name + "' names producer node " + std::to_string(v.producer) + ", which does not exist");
  }

  if (auto name = repeated_name(values_)) fail("two values are named '" + std::string(*name) + "'");

  // A value is defined by exactly one of: a graph input, a constant, a node.
  std::vector<bool> defined(values_.size(), false);
  for (ValueId id : inputs_) {
    if (id < 0 || id >= num_values) fail("graph input refers to missing value " + std::to_string(id));
    const Value& v = values_[id];
    if (v.constant || v.producer != kNoNode) fail("graph input '" + v.name + "' is also a constant or node output");
    if (defined[id]) fail("graph input '" + v.name + "' is listed twice");
    defined[id] = true;
  }
  for (const Value& v : values_)
    if (v.constant) defined[v.id] = true;

  if (auto name = repeated_name(nodes_)) fail("two nodes are named '" + std::string(*name) + "'");
  for (NodeId nid = 0; nid < static_cast<NodeId>(nodes_.size()); ++nid) {
    const Node& n = nodes_[nid];
    auto where = [&n] { return "node '" + n.name + "' (" + n.op + ")"; };
    if (n.id != nid) fail("node at index " + std::to_string(nid) + " has id " + std::to_string(n.id));
    if (n.name.empty()) fail("node " + std::to_string(nid) + " (" + n.op + ") has no name");
    std::vector<TensorType> input_types;
    input_types.reserve(n.inputs.size());
    for (std::size_t i = 0; i < n.inputs.size(); ++i) {
      const ValueId id = n.inputs[i];
      if (id == -1) {
        input_types.emplace_back();
        continue;
      }
      if (id < 0 || id >= num_values)
        fail(where() + ": input " + std::to_string(i) + " refers to missing value " + std::to_string(id));
      // Defined already means: a graph input, a constant or an earlier node's output.
      if (!defined[id])
        fail(where() + ": input " + std::to_string(i) + " '" + values_[id].name +
             "' is used before it is defined (nodes must be in topological order)");
      input_types.push_back(values_[id].type);
    }
    for (ValueId id : n.outputs) {
      if (id < 0 || id >= num_values) fail(where() + ": output refers to missing value " + std::to_string(id));
      const Value& v = values_[id];
      if (v.producer != nid) fail(where() + ": output '" + v.name + "' names another producer");
      if (defined[id]) fail(where() + ": output '" + v.name + "' is defined more than once");
      defined[id] = true;
    }
    const std::vector<TensorType> inferred = infer_node_types(n, input_types);
    if (inferred.size() != n.outputs.size())
      fail(where() + ": has " + std::to_string(n.outputs.size()) + " outputs, the op produces " +
           std::to_string(inferred.size()));
    for (std::size_t i = 0; i < inferred.size(); ++i) {
      const Value& v = values_[n.outputs[i]];
      if (v.type != inferred[i])
        throw_error(ErrorKind::ShapeMismatch, "invalid graph: " + where() + ": output '" + v.name + "' is typed " +
                                                  type_str(v.type) + " but shape inference gives " +
                                                  type_str(inferred[i]));
    }
  }
  for (ValueId id = 0; id < num_values; ++id) {
    if (!defined[id]) fail("value '" + values_[id].name + "' is neither an input, a constant nor a node output");
    const bool is_input = std::find(inputs_.begin(), inputs_.end(), id) != inputs_.end();
    if (values_[id].type.dynamic && values_[id].producer == kNoNode && !is_input)
      fail("value '" + values_[id].name + "' is dynamic but no node or graph input defines it");
  }

  if (outputs_.empty()) fail("the graph has no outputs");
  for (ValueId id : outputs_)
    if (id < 0 || id >= num_values) fail("graph output refers to missing value " + std::to_string(id));
}

// ---- printer --------------------------------------------------------------------

namespace {

std::string float_str(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", value);
  return buffer;
}

std::string attribute_str(const Attribute& value) {
  struct Printer {
    std::string operator()(std::int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return float_str(v); }
    std::string operator()(const std::string& v) const { return "\"" + v + "\""; }
    std::string operator()(const std::vector<std::int64_t>& v) const { return shape_str(v); }
    std::string operator()(const std::vector<double>& v) const {
      std::string s = "[";
      const std::size_t listed = std::min(v.size(), kMaxListedEntries);
      for (std::size_t i = 0; i < listed; ++i) s += (i ? ", " : "") + float_str(v[i]);
      if (listed < v.size()) s += ", ... (" + std::to_string(v.size() - listed) + " more)";
      return s + "]";
    }
  };
  return std::visit(Printer{}, value);
}

std::string ref(ValueId id) { return id < 0 ? std::string("_") : "%" + std::to_string(id); }

}  // namespace

std::string Graph::to_string() const {
  std::ostringstream out;
  for (ValueId id : inputs_) {
    const Value& v = value(id);
    out << ref(id) << " = input : " << type_str(v.type) << "  # " << v.name << "\n";
  }
  for (const Value& v : values_)
    if (v.constant) out << ref(v.id) << " = constant : " << type_str(v.type) << "  # " << v.name << "\n";
  for (const Node& n : nodes_) {
    for (std::size_t i = 0; i < n.outputs.size(); ++i) out << (i ? ", " : "") << ref(n.outputs[i]);
    out << " = " << n.op << "(";
    for (std::size_t i = 0; i < n.inputs.size(); ++i) out << (i ? ", " : "") << ref(n.inputs[i]);
    out << ")";
    if (!n.attrs.all().empty()) {
      out << " {";
      bool first = true;
      for (const auto& [name, value] : n.attrs.all()) {
        out << (first ? "" : ", ") << name << "=" << attribute_str(value);
        first = false;
      }
      out << "}";
    }
    out << " : ";
    for (std::size_t i = 0; i < n.outputs.size(); ++i) {
      const ValueId id = n.outputs[i];
      out << (i ? ", " : "")
          << (id >= 0 && id < static_cast<ValueId>(values_.size()) ? type_str(values_[id].type) : "?");
    }
    out << "  # " << n.name << "\n";
  }
  out << "return";
  for (std::size_t i = 0; i < outputs_.size(); ++i) out << (i ? ", " : " ") << ref(outputs_[i]);
  out << "\n";
  return out.str();
}

}  // namespace kiln::graph

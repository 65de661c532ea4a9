// load_onnx: parses a ModelProto (with hard limits), turns initializers into
// constants and graph inputs into static-shaped inputs, then converts node by
// node through the op rules, folding every node whose inputs are constants.
#include <kiln/onnx.h>

#include "graph/ir.h"
#include "graph/model_access.h"
#include "graph/onnx/attributes.h"
#include "graph/onnx/convert_ops.h"
#include "graph/onnx/limits.h"
#include "graph/onnx/options.h"
#include "graph/onnx/tensor_proto.h"
#include "graph/op_registry.h"
#include "graph/passes/passes.h"
#include "src/base/check.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

namespace kiln {

using graph::Attributes;
using graph::TensorType;
using graph::ValueId;
using onnx_import::where;

namespace onnx_import {
namespace {

constexpr int kMinOpset = 11;
// How deep If branches may nest (a hostile file could nest thousands).
constexpr int kMaxBranchDepth = 8;
constexpr int kMaxOpset = 18;
// For models older than kMinOpset: the opset from which each op is defined
// as kiln reads it (later versions only added types or negative axes), from
// ONNX's operator changelog. An op missing here changed at or after opset
// 10 in a way the converters do not read (Clip's attributes, Pad, Slice,
// Resize, pooling's ceil_mode, ...).
const std::map<std::string, int> kUnchangedSince = {
    {"Identity", 1}, {"Transpose", 1}, {"Shape", 1}, {"MatMul", 1}, {"Flatten", 1}, {"Not", 1},
    {"ReduceMean", 1}, {"ReduceSum", 1}, {"ReduceMax", 1}, {"ReduceMin", 1}, {"ReduceProd", 1}, {"ReduceL1", 1},
    {"ReduceL2", 1}, {"ReduceSumSquare", 1}, {"ReduceLogSum", 1}, {"ReduceLogSumExp", 1}, {"ArgMax", 1}, {"ArgMin", 1},
    {"GlobalAveragePool", 1}, {"GlobalMaxPool", 1}, {"DepthToSpace", 1}, {"SpaceToDepth", 1}, {"Softplus", 1}, {"Softsign", 1}, {"Softmax", 1}, {"LogSoftmax", 1},
    {"LpNormalization", 1}, {"InstanceNormalization", 6}, {"PRelu", 7},
    {"Abs", 6}, {"Neg", 6}, {"Sqrt", 6}, {"Exp", 6}, {"Log", 6}, {"Reciprocal", 6}, {"Floor", 6}, {"Ceil", 6},
    {"Relu", 6}, {"Sigmoid", 6}, {"Tanh", 6}, {"Elu", 6}, {"Selu", 6}, {"HardSigmoid", 6}, {"LeakyRelu", 6},
    {"Sin", 7}, {"Cos", 7}, {"Tan", 7}, {"Asin", 7}, {"Acos", 7}, {"Atan", 7}, {"And", 7}, {"Or", 7}, {"Xor", 7}, {"Equal", 7}, {"Less", 7}, {"Greater", 7},
    {"Add", 7}, {"Sub", 7}, {"Mul", 7}, {"Div", 7}, {"Pow", 7},
    {"Max", 8}, {"Min", 8}, {"Sum", 8}, {"Mean", 8},
    {"Erf", 9}, {"Sign", 9}, {"Sinh", 9}, {"Cosh", 9}, {"Asinh", 9}, {"Acosh", 9}, {"Atanh", 9}, {"Where", 9}, {"ConstantOfShape", 9},
    {"EyeLike", 9}, {"Shrink", 9}, {"IsNaN", 9}, {"IsInf", 10}, {"Mod", 10}, {"ThresholdedRelu", 10},
    {"LRN", 1}, {"MeanVarianceNormalization", 9},
    // Deprecated in opset 10: scales an attribute in 7, an input in 9 (convert_upsample reads both).
    {"Upsample", 7},
    // Scan 11 only allows negative axes, which kiln refuses anyway (axis 0 only).
    {"Scan", 9},
    // Opset 14 added only `layout` (read with its default) and bfloat16.
    {"LSTM", 7}, {"GRU", 7}, {"RNN", 7}, {"ReverseSequence", 10},
};

// The symbolic name of an input dim as ONNX Runtime reads it: "" for a fixed
// extent (a dim_value of 0 or more), the dim_param for a named dim (dims of
// one name are one extent), "?" for an unknown one, each independent of every
// other: no value, a dim_param of "?" (what some exporters write for
// "unknown"), or a negative dim_value (-1: paddle2onnx, TensorFlow's and
// Keras's converters).
std::string symbol_of(const onnx::TensorShapeProto_Dimension& d) {
  if (d.has_dim_value()) return d.dim_value() >= 0 ? "" : "?";
  return d.dim_param().empty() ? "?" : d.dim_param();
}

// The graph's name, else the file's stem.
std::string model_name(const onnx::ModelProto& model, const std::string& file) {
  return model.graph().name().empty() ? std::filesystem::path(file).stem().string() : model.graph().name();
}

std::string read_file(const std::string& path, std::int64_t limit) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  KILN_CHECK(!ec, ErrorKind::Io, "cannot read '" + path + "': " + ec.message());
  KILN_CHECK(static_cast<std::int64_t>(size) <= limit, ErrorKind::Corrupt,
             path + ": the file is " + std::to_string(size) + " bytes, more than kiln's limit of " + std::to_string(limit));
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in.good(), ErrorKind::Io, "cannot open '" + path + "'");
  std::string bytes(size, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  KILN_CHECK(in.good() || size == 0, ErrorKind::Io, "reading '" + path + "' failed");
  return bytes;
}

template <class Message> void parse(Message& message, std::string_view bytes, const std::string& name, const char* kind) {
  KILN_CHECK(static_cast<std::int64_t>(bytes.size()) <= kMaxModelBytes, ErrorKind::Corrupt,
             name + ": more than kiln's limit of " + std::to_string(kMaxModelBytes) + " bytes");
  KILN_CHECK(message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())), ErrorKind::Corrupt,
             name + ": not a valid ONNX " + kind + " (the protobuf data is malformed or truncated)");
}

// The initializers of one parsed file, converted once: every import of it
// (each shape set of a model with symbolic dims) shares their storage
// instead of converting and holding a copy of the weights per import.
// Keyed by the TensorProto's address, which the parsed file keeps alive
// (as a void pointer: a container of ONNX's types would be exported, as
// ParsedModel below says).
class InitializerCache {
 public:
  template <class Convert> Tensor get(const onnx::TensorProto& proto, Convert convert) {
    {
      std::lock_guard lock(mutex_);
      if (auto it = tensors_.find(static_cast<const void*>(&proto)); it != tensors_.end()) return it->second;
    }
    Tensor converted = convert();  // outside the lock: another thread's import may convert it too
    std::lock_guard lock(mutex_);
    return tensors_.try_emplace(static_cast<const void*>(&proto), std::move(converted)).first->second;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<const void*, Tensor> tensors_;
};

class Importer final : public ImportContext {
 public:
  Importer(std::string file, std::string base_dir, const OnnxOptions& options, std::int64_t max_folded_bytes,
           std::shared_ptr<InitializerCache> initializers = nullptr)
      : file_(std::move(file)), base_dir_(std::move(base_dir)), options_(options), max_folded_bytes_(max_folded_bytes),
        initializers_(std::move(initializers)) {}

  Model import(const onnx::ModelProto& model) {
    check_header(model);
    const onnx::GraphProto& g = model.graph();
    KILN_CHECK(g.node_size() <= kMaxNodes, ErrorKind::Corrupt, where(file_) + "more than " + std::to_string(kMaxNodes) + " nodes");
    collect_names(g);
    check_input_shape_names(g);
    check_ops(g);
    check_old_opset(g);
    add_initializers(g);
    add_inputs(g);
    for (int i = 0; i < g.node_size(); ++i) convert_node(g.node(i), i);
    set_outputs(g);
    // Folding leaves the constants it consumed behind; drop what nothing reads.
    graph::Graph clean = graph::passes::eliminate_dead_code(graph_).graph;
    std::string name = model_name(model, file_);
    return internal::make_model(std::make_shared<const graph::Graph>(std::move(clean)), name);
  }

  // ---- ImportContext -------------------------------------------------------------
  const Tensor* constant(ValueId value) const override {
    const auto& v = graph_.value(present_input(value));
    return v.constant ? &*v.constant : nullptr;
  }
  const TensorType& type(ValueId value) const override { return graph_.value(present_input(value)).type; }
  // A converter asks about an input the node does not have (convert_node
  // prefixes the node to the message).
  static ValueId present_input(ValueId value) {
    KILN_CHECK(value >= 0, ErrorKind::Corrupt, "an input the op requires is missing");
    return value;
  }
  const std::string& base_dir() const override { return base_dir_; }

  std::vector<ValueId> inline_branch(const OnnxNode& source, const onnx::GraphProto& branch) override {
    KILN_CHECK(branch_depth_ < kMaxBranchDepth, ErrorKind::Unsupported,
               source.where + "If branches nest more than " + std::to_string(kMaxBranchDepth) + " deep");
    nodes_converted_ += branch.node_size();
    KILN_CHECK(nodes_converted_ <= kMaxNodes, ErrorKind::Corrupt,
               where(file_) + "more than " + std::to_string(kMaxNodes) + " nodes with the If branches taken");
    KILN_CHECK(branch.output_size() == source.num_outputs, ErrorKind::Corrupt,
               source.where + "the branch has " + std::to_string(branch.output_size()) + " outputs, the If node " +
                   std::to_string(source.num_outputs));
    ++branch_depth_;
    collect_names(branch);
    add_initializers(branch);
    // Branch nodes read their own values and the enclosing graphs' by name.
    for (int i = 0; i < branch.node_size(); ++i) convert_node(branch.node(i), i);
    --branch_depth_;
    std::vector<ValueId> outputs;
    for (const onnx::ValueInfoProto& o : branch.output()) {
      auto it = values_.find(o.name());
      KILN_CHECK(it != values_.end(), ErrorKind::Corrupt,
                 source.where + "branch output '" + o.name() + "' is not produced by the branch or the graph");
      outputs.push_back(it->second);
    }
    return outputs;
  }

  std::shared_ptr<const graph::Graph> import_subgraph(const OnnxNode& source, const onnx::GraphProto& branch,
                                                      std::vector<ValueId>& captured) override {
    KILN_CHECK(branch.output_size() == source.num_outputs, ErrorKind::Corrupt,
               source.where + "the branch has " + std::to_string(branch.output_size()) + " outputs, the If node " +
                   std::to_string(source.num_outputs));
    return import_body(source, branch, {}, captured);
  }

  std::shared_ptr<const graph::Graph> import_body(const OnnxNode& source, const onnx::GraphProto& branch,
                                                  const std::vector<TensorType>& formal,
                                                  std::vector<ValueId>& captured) override {
    KILN_CHECK(branch_depth_ < kMaxBranchDepth, ErrorKind::Unsupported,
               source.where + "subgraphs (If branches, loop bodies) nest more than " + std::to_string(kMaxBranchDepth) +
                   " deep");
    KILN_CHECK(formal.empty() || static_cast<std::size_t>(branch.input_size()) == formal.size(), ErrorKind::Corrupt,
               source.where + "the body declares " + std::to_string(branch.input_size()) + " inputs, the node passes " +
                   std::to_string(formal.size()));
    Importer child(file_, base_dir_, options_, max_folded_bytes_ - folded_bytes_, initializers_);
    child.parent_ = this;
    child.opset_ = opset_;
    child.branch_depth_ = branch_depth_ + 1;
    child.nodes_converted_ = nodes_converted_ + branch.node_size();
    KILN_CHECK(child.nodes_converted_ <= kMaxNodes, ErrorKind::Corrupt,
               where(file_) + "more than " + std::to_string(kMaxNodes) + " nodes with the If branches");
    child.collect_names(branch);
    // A body's own inputs come first, in its order; captured values follow.
    for (std::size_t i = 0; i < formal.size(); ++i) {
      const std::string& name = branch.input(static_cast<int>(i)).name();
      KILN_CHECK(!name.empty() && child.values_.count(name) == 0, ErrorKind::Corrupt,
                 source.where + "body input " + std::to_string(i) + " has no name or a name used twice");
      const ValueId id = child.graph_.add_subgraph_input(child.unique_value_name(name), formal[i]);
      child.values_[name] = id;
    }
    child.add_initializers(branch);
    for (int i = 0; i < branch.node_size(); ++i) child.convert_node(branch.node(i), i);
    std::vector<ValueId> outputs;
    for (const onnx::ValueInfoProto& o : branch.output()) {
      const std::optional<ValueId> id = child.resolve(o.name());
      KILN_CHECK(id.has_value(), ErrorKind::Corrupt,
                 source.where + "branch output '" + o.name() + "' is not produced by the branch or the graph");
      outputs.push_back(*id);
    }
    child.graph_.set_outputs(std::move(outputs));
    folded_bytes_ += child.folded_bytes_;
    nodes_converted_ = child.nodes_converted_;
    captured = child.captured_;
    return std::make_shared<const graph::Graph>(graph::passes::eliminate_dead_code(child.graph_).graph);
  }

  std::vector<ValueId> emit_with_subgraphs(const OnnxNode& source, const std::string& op, std::vector<ValueId> inputs,
                                           Attributes attrs,
                                           std::vector<std::shared_ptr<const graph::Graph>> subgraphs) override {
    try {
      return graph_.add_node(op, std::move(inputs), std::move(attrs), source.name, std::move(subgraphs));
    } catch (const Error& e) {
      throw_error(e.kind(), where(file_) + e.what());
    }
  }

  ValueId add_constant(const OnnxNode& source, Tensor value) override {
    return graph_.add_constant(unique_value_name(source.name + "/constant"), std::move(value));
  }

  void charge_folded_bytes(const OnnxNode& source, std::int64_t bytes) override {
    // folded_bytes_ never passes the budget, so the subtraction cannot overflow.
    KILN_ASSERT(bytes >= 0);
    KILN_CHECK(bytes <= max_folded_bytes_ - folded_bytes_, ErrorKind::InvalidArgument,
               source.where + "folding it at import would add " + std::to_string(bytes) + " bytes of constants to the " +
                   std::to_string(folded_bytes_) + " bytes folded so far, past the budget of " +
                   std::to_string(max_folded_bytes_) + " bytes; raise OnnxOptions::max_folded_bytes or " +
                   kMaxFoldedBytesVariable + " if the model is trusted");
    folded_bytes_ += bytes;
  }

  std::vector<ValueId> emit(const OnnxNode& source, const std::string& op, std::vector<ValueId> inputs, Attributes attrs,
                            const std::string& suffix) override {
    graph::Node node;
    node.op = op;
    // The rule's main node takes the ONNX node's (already unique) name.
    node.name = suffix.empty() ? source.name : unique_node_name(source.name + "/" + suffix);
    node.inputs = std::move(inputs);
    node.attrs = std::move(attrs);
    std::vector<TensorType> types;
    bool all_constant = !node.inputs.empty();
    for (ValueId id : node.inputs) {
      types.push_back(id < 0 ? TensorType{} : type(id));
      if (id >= 0 && constant(id) == nullptr) all_constant = false;
    }
    std::vector<TensorType> out_types;
    try {
      out_types = graph::infer_node_types(node, types);
    } catch (const Error& e) {
      throw_error(e.kind(), where(file_) + e.what());
    }
    std::int64_t out_elements = 0;
    for (const TensorType& t : out_types) {
      // -1 marks a data-dependent extent (NonZero, NonMaxSuppression); the
      // known extents must still fit.
      Shape known = t.shape;
      for (std::int64_t& d : known) d = d == -1 ? 0 : d;
      checked_shape(known, source.where + "output " + type_str(t) + ": ");
      out_elements += num_elements(known);
    }
    if (!all_constant || out_elements > kMaxFoldElements) {
      return graph_.add_node(op, node.inputs, node.attrs, node.name);
    }
    // Every input is known: evaluate now (shape arithmetic, weight transforms),
    // within the budget for folded constants.
    // A data-dependent output's size is known only once evaluated (it is
    // bounded by the inputs, which fit the limits).
    const bool dynamic = std::any_of(out_types.begin(), out_types.end(), [](const TensorType& t) { return t.dynamic; });
    std::int64_t out_bytes = 0;
    if (!dynamic) {
      for (const TensorType& t : out_types) out_bytes += num_elements(t.shape) * static_cast<std::int64_t>(dtype_size(t.dtype));
      charge_folded_bytes(source, out_bytes);
    }
    std::vector<Tensor> args;
    for (ValueId id : node.inputs) args.push_back(id < 0 ? Tensor() : *constant(id));
    std::vector<Tensor> results = graph::get_op(op).reference(node, args);
    KILN_ASSERT(results.size() == out_types.size());
    if (dynamic) {
      for (const Tensor& r : results) out_bytes += static_cast<std::int64_t>(r.nbytes());
      charge_folded_bytes(source, out_bytes);
    }
    std::vector<ValueId> outputs;
    for (Tensor& r : results) outputs.push_back(graph_.add_constant(unique_value_name(node.name), std::move(r)));
    return outputs;
  }

 private:
  void check_header(const onnx::ModelProto& model) {
    KILN_CHECK(model.ir_version() > 0 && model.has_graph(), ErrorKind::Corrupt,
               where(file_) + "not an ONNX model (no IR version or no graph)");
    bool found = false;
    for (const auto& entry : model.opset_import()) {
      if (entry.domain() != "" && entry.domain() != "ai.onnx") continue;
      found = true;
      opset_ = static_cast<int>(std::clamp<std::int64_t>(entry.version(), -1, 1 << 20));
    }
    // Without a default-domain opset only other domains' ops can appear; those
    // are reported as unsupported ops.
    bool uses_default_domain = false;
    for (const auto& n : model.graph().node())
      if (n.domain().empty() || n.domain() == "ai.onnx") uses_default_domain = true;
    if (!found && !uses_default_domain) return;
    KILN_CHECK(found, ErrorKind::Corrupt, where(file_) + "the model declares no opset for the default ONNX domain");
    KILN_CHECK(opset_ >= 1 && opset_ <= kMaxOpset, ErrorKind::Unsupported,
               where(file_) + "opset " + std::to_string(opset_) + " of the default domain is not supported (kiln reads opsets " +
                   std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) + "; re-export with one of those)");
  }

  // A model older than kMinOpset is read when each of its ops is defined
  // there as kiln reads it (kUnchangedSince); else every other op is named.
  void check_old_opset(const onnx::GraphProto& g) const {
    if (opset_ >= kMinOpset) return;
    std::set<std::string> changed;
    for (const onnx::NodeProto& n : g.node()) {
      if (!n.domain().empty() && n.domain() != "ai.onnx") continue;
      auto since = kUnchangedSince.find(n.op_type());
      if (since == kUnchangedSince.end() || since->second > opset_) changed.insert(n.op_type());
    }
    if (changed.empty()) return;
    std::string list;
    for (const std::string& op : changed) list += (list.empty() ? "" : ", ") + op;
    throw_error(ErrorKind::Unsupported,
                where(file_) + "opset " + std::to_string(opset_) + " of the default domain is not supported for " + list +
                    " (kiln reads opsets " + std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) +
                    ", and older models whose ops have kept their definition since; re-export with opset " +
                    std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) + ")");
  }

  // ONNX value names are unique; names kiln makes up must not collide with them.
  void collect_names(const onnx::GraphProto& g) {
    auto add = [&](const std::string& name) {
      check_string(name, where(file_));
      onnx_names_.insert(name);
    };
    for (const auto& t : g.initializer()) add(t.name());
    for (const auto& v : g.input()) add(v.name());
    for (const auto& n : g.node()) {
      check_string(n.name(), where(file_));
      for (const auto& o : n.output()) add(o);
    }
  }

  // The op types of g and of the branches of its If nodes (to kMaxBranchDepth)
  // that kiln does not import, with the nodes that use them.
  void collect_unsupported(const onnx::GraphProto& g, int depth,
                           std::map<std::string, std::vector<std::string>>& unsupported) const {
    KILN_CHECK(depth <= kMaxBranchDepth, ErrorKind::Unsupported,
               where(file_) + "If branches nest more than " + std::to_string(kMaxBranchDepth) + " deep");
    for (int i = 0; i < g.node_size(); ++i) {
      const onnx::NodeProto& n = g.node(i);
      const std::string label = n.name().empty() ? "#" + std::to_string(i) : "'" + n.name() + "'";
      const bool default_domain = n.domain().empty() || n.domain() == "ai.onnx";
      const std::string op = default_domain ? n.op_type() : n.domain() + "." + n.op_type();
      auto rule = op_rules().find(n.op_type());
      const bool ok = default_domain && rule != op_rules().end() &&
                      (rule->second.kiln_op.empty() || graph::find_op(rule->second.kiln_op) != nullptr);
      if (!ok) unsupported[op].push_back(label);
      if (ok && (n.op_type() == "If" || n.op_type() == "Loop" || n.op_type() == "Scan"))
        for (const onnx::AttributeProto& a : n.attribute())
          if (a.type() == onnx::AttributeProto_AttributeType_GRAPH) collect_unsupported(a.g(), depth + 1, unsupported);
    }
  }

  // Every unsupported op, with its node names, in one error.
  void check_ops(const onnx::GraphProto& g) {
    std::map<std::string, std::vector<std::string>> unsupported;
    collect_unsupported(g, 0, unsupported);
    if (unsupported.empty()) return;
    // A hostile file may hold a million unknown nodes: the list is bounded.
    std::string list;
    std::size_t types_listed = 0;
    for (const auto& [op, nodes] : unsupported) {
      if (types_listed++ == kMaxListedEntries) {
        list += "\n  ... (" + std::to_string(unsupported.size() - kMaxListedEntries) + " more op types)";
        break;
      }
      list += "\n  " + op + ": ";
      const std::size_t listed = std::min(nodes.size(), kMaxListedEntries);
      for (std::size_t i = 0; i < listed; ++i) list += (i ? ", " : "") + nodes[i];
      if (listed < nodes.size()) list += ", ... (" + std::to_string(nodes.size() - listed) + " more)";
    }
    throw_error(ErrorKind::Unsupported, where(file_) + std::to_string(unsupported.size()) +
                                            " unsupported op type(s), with the nodes that use them:" + list);
  }

  void add_initializers(const onnx::GraphProto& g) {
    for (const onnx::TensorProto& t : g.initializer()) {
      const std::string what = where(file_) + "initializer '" + t.name() + "': ";
      KILN_CHECK(!t.name().empty(), ErrorKind::Corrupt, what + "has no name");
      KILN_CHECK(values_.count(t.name()) == 0 && f64_constants_.count(t.name()) == 0, ErrorKind::Corrupt,
                 what + "is defined twice");
      if (is_f64(t)) {
        f64_constants_[t.name()] = f64_from_proto(t, what);
        continue;
      }
      auto convert = [&] { return tensor_from_proto(t, base_dir_, what); };
      values_[t.name()] = graph_.add_constant(t.name(), initializers_ ? initializers_->get(t, convert) : convert());
      value_names_.insert(t.name());
    }
  }

  // What the file fixes of an input's shape: per dim, "" and the extent, or
  // the symbolic name ("?" unnamed) and -1; a file without the input's shape
  // fixes nothing (its rank comes from OnnxOptions::input_shapes).
  void record_symbolic_dims(const onnx::ValueInfoProto& v) {
    InputDims dims;
    dims.name = v.name();
    const auto& tt = v.type().tensor_type();
    if (!tt.has_shape()) {
      dims.rank_fixed = false;
      dims.names.assign(graph_.value(values_.at(v.name())).type.shape.size(), "?");
      dims.extents.assign(dims.names.size(), -1);
    } else {
      for (const auto& d : tt.shape().dim()) {
        dims.names.push_back(symbol_of(d));
        dims.extents.push_back(dims.names.back().empty() ? d.dim_value() : -1);
      }
    }
    for (const std::string& name : dims.names) any_symbolic_ = any_symbolic_ || !name.empty();
    input_dims_.push_back(std::move(dims));
  }

 public:
  struct InputDims {
    std::string name;
    bool rank_fixed = true;
    std::vector<std::string> names;     // "" fixed, else symbolic
    std::vector<std::int64_t> extents;  // the fixed extent, -1 for symbolic
  };
  const std::vector<InputDims>& input_dims() const { return input_dims_; }
  bool any_symbolic() const { return any_symbolic_; }
  // The symbolic dims that took a placeholder extent (no shape was given for
  // them), described with the extent and the option that set it.
  const std::vector<std::string>& placeholders() const { return placeholders_; }

  // The graph inputs alone, at their placeholder extents: what a model whose
  // import waits for real shapes shows of itself.
  std::shared_ptr<const graph::Graph> inputs_only(const onnx::ModelProto& model) {
    const onnx::GraphProto& g = model.graph();
    std::set<std::string> initializers;
    for (const onnx::TensorProto& t : g.initializer()) initializers.insert(t.name());
    collect_named_extents(g);
    for (const onnx::ValueInfoProto& v : g.input()) {
      if (initializers.count(v.name()) || values_.count(v.name())) continue;
      const std::string what = where(file_) + "input '" + v.name() + "': ";
      const std::optional<DType> dtype = dtype_from_onnx(v.type().tensor_type().elem_type());
      KILN_CHECK(dtype.has_value(), ErrorKind::Unsupported, what + "element type is not supported");
      values_[v.name()] = graph_.add_input(v.name(), TensorType{*dtype, input_shape(v, what)});
      record_symbolic_dims(v);
    }
    // A graph needs outputs; nothing reads these (Model::outputs() throws for a pending model).
    graph_.set_outputs(graph_.inputs());
    return std::make_shared<const graph::Graph>(graph_);
  }

 private:
  Shape input_shape(const onnx::ValueInfoProto& v, const std::string& what) {
    const auto& tt = v.type().tensor_type();
    auto given = options_.input_shapes.find(v.name());
    if (given != options_.input_shapes.end()) {
      const Shape& shape = given->second;
      const std::string gives = what + "the shape given, " + shape_str(shape) + ", ";
      if (tt.has_shape()) {
        KILN_CHECK(static_cast<int>(shape.size()) == tt.shape().dim_size(), ErrorKind::ShapeMismatch,
                   gives + "has rank " + std::to_string(shape.size()) + "; the file's input has rank " +
                       std::to_string(tt.shape().dim_size()));
        for (int i = 0; i < tt.shape().dim_size(); ++i) {
          const auto& d = tt.shape().dim(i);
          KILN_CHECK(!symbol_of(d).empty() || d.dim_value() == shape[static_cast<std::size_t>(i)],
                     ErrorKind::ShapeMismatch,
                     gives + "differs in dim " + std::to_string(i) + ", which the file fixes at " +
                         std::to_string(d.dim_value()));
        }
      }
      return checked_shape(shape, what);
    }
    KILN_CHECK(tt.has_shape(), ErrorKind::Unsupported,
               what + "the input has no shape in the file; give one in OnnxOptions::input_shapes");
    Shape dims;
    const int rank = tt.shape().dim_size();
    for (int i = 0; i < rank; ++i) {
      // Symbolic ("batch") or unknown dims take the default size; an image's
      // height and width the image size, if one is given. Either is a
      // placeholder, recorded so that an error it causes can say so.
      const auto& d = tt.shape().dim(i);
      const std::string symbol = symbol_of(d);
      if (symbol.empty()) {
        dims.push_back(d.dim_value());
        continue;
      }
      // A named dim that a given shape sets elsewhere takes that extent.
      if (auto named = named_extents_.find(symbol); symbol != "?" && named != named_extents_.end()) {
        dims.push_back(named->second.first);
        continue;
      }
      const bool spatial = rank == 4 && i >= 2 && options_.image_size > 0;
      dims.push_back(spatial ? options_.image_size : options_.default_dim);
      placeholders_.push_back("input '" + v.name() + "' dim " + std::to_string(i) + " ('" + symbol + "') = " +
                              std::to_string(dims.back()) +
                              (spatial ? " (OnnxOptions::image_size; kiln --image-size)"
                                       : " (OnnxOptions::default_dim; kiln --batch)"));
    }
    return checked_shape(dims, what);
  }

  // Every name in OnnxOptions::input_shapes must be one of the graph's inputs:
  // a misspelt name would otherwise leave its input at a placeholder.
  void check_input_shape_names(const onnx::GraphProto& g) const {
    std::set<std::string> initializers, inputs;
    for (const onnx::TensorProto& t : g.initializer()) initializers.insert(t.name());
    std::string names;
    for (const onnx::ValueInfoProto& v : g.input())
      if (!initializers.count(v.name()) && inputs.insert(v.name()).second)
        names += (names.empty() ? "" : ", ") + ("'" + v.name() + "'");
    for (const auto& [name, shape] : options_.input_shapes)
      KILN_CHECK(inputs.count(name), ErrorKind::InvalidArgument,
                 where(file_) + "OnnxOptions::input_shapes (kiln: --input, --input-shape) names '" + name +
                     "', which is not an input of the model (its inputs: " + names + ")");
  }

  // The extents that given shapes set for named dims ("batch" = 4), so that
  // other inputs' dims of that name take them; two that differ are refused.
  void collect_named_extents(const onnx::GraphProto& g) {
    for (const onnx::ValueInfoProto& v : g.input()) {
      const auto given = options_.input_shapes.find(v.name());
      const auto& tt = v.type().tensor_type();
      if (given == options_.input_shapes.end() || !tt.has_shape() ||
          static_cast<std::size_t>(tt.shape().dim_size()) != given->second.size())
        continue;
      for (int i = 0; i < tt.shape().dim_size(); ++i) {
        const std::string symbol = symbol_of(tt.shape().dim(i));
        if (symbol.empty() || symbol == "?") continue;
        const std::int64_t extent = given->second[static_cast<std::size_t>(i)];
        const std::string here = "input '" + v.name() + "' dim " + std::to_string(i);
        const auto [it, first] = named_extents_.try_emplace(symbol, extent, here);
        KILN_CHECK(first || it->second.first == extent, ErrorKind::ShapeMismatch,
                   where(file_) + "OnnxOptions::input_shapes: " + here + " ('" + symbol + "') is " +
                       std::to_string(extent) + ", but " + it->second.second + " ('" + symbol + "') is " +
                       std::to_string(it->second.first) + ": dims of one name must agree");
      }
    }
  }

  void add_inputs(const onnx::GraphProto& g) {
    collect_named_extents(g);
    for (const onnx::ValueInfoProto& v : g.input()) {
      if (values_.count(v.name())) continue;  // an initializer listed as an input: a constant
      const std::string what = where(file_) + "input '" + v.name() + "': ";
      KILN_CHECK(!v.name().empty(), ErrorKind::Corrupt, where(file_) + "a graph input has no name");
      KILN_CHECK(v.type().has_tensor_type(), ErrorKind::Unsupported, what + "only tensor inputs are supported");
      const int elem = v.type().tensor_type().elem_type();
      const std::optional<DType> dtype = dtype_from_onnx(elem);
      KILN_CHECK(dtype.has_value(), ErrorKind::Unsupported, what + "element type " + onnx_type_name(elem) + " is not supported");
      values_[v.name()] = graph_.add_input(v.name(), TensorType{*dtype, input_shape(v, what)});
      value_names_.insert(v.name());
      record_symbolic_dims(v);
    }
  }

  void convert_node(const onnx::NodeProto& proto, int index) {
    OnnxNode n;
    n.proto = &proto;
    n.op = proto.op_type();
    n.name = unique_node_name(proto.name().empty() ? proto.op_type() + "_" + std::to_string(index) : proto.name());
    n.where = where(file_, proto.name().empty() ? n.name : proto.name(), n.op);
    n.opset = opset_;
    n.num_outputs = proto.output_size();
    if (convert_f64(n)) return;
    for (const std::string& input : proto.input()) {
      if (input.empty()) {
        n.inputs.push_back(-1);
        continue;
      }
      KILN_CHECK(f64_constants_.count(input) == 0, ErrorKind::Unsupported,
                 n.where + "input '" + input + "' is a DOUBLE tensor; kiln has no f64 and takes DOUBLE constants only "
                           "where a Cast converts them to another type");
      const std::optional<ValueId> id = resolve(input);
      KILN_CHECK(id.has_value(), ErrorKind::Corrupt,
                 n.where + "input '" + input + "' is not defined (no initializer, graph input or earlier node output)");
      n.inputs.push_back(*id);
    }
    n.attrs = convert_attributes(proto, n.where);
    // kiln's own attributes, which compile passes and built-in models set (a
    // fused activation, a pre-packed weight layout, TopK's clamp_k), are not
    // ONNX's: a file carrying them would make kiln misread its weights or
    // accept what ONNX rejects.
    static const std::map<std::string, std::vector<std::string>> kiln_only = {
        {"Conv", {"activation", "weight_layout", "out_channels"}},
        {"Gemm", {"activation", "weight_layout", "out_channels"}},
        {"MatMul", {"weight_layout"}},
        {"TopK", {"clamp_k"}},
        {"LayerNormalization", {"statistics"}}};
    if (auto it = kiln_only.find(n.op); it != kiln_only.end())
      for (const std::string& internal : it->second)
        KILN_CHECK(!n.attrs.has(internal), ErrorKind::Corrupt,
                   n.where + "attribute '" + internal + "' is not an ONNX " + n.op + " attribute");
    std::vector<ValueId> outputs;
    try {
      outputs = op_rules().at(n.op).convert(n, *this);
    } catch (const Error& e) {
      const std::string message = e.what();
      // Messages from shape inference name the node but not the file.
      throw_error(e.kind(), message.rfind(file_ + ": ", 0) == 0 ? message : n.where + message);
    }
    for (int k = 0; k < proto.output_size(); ++k) {
      const std::string& name = proto.output(k);
      if (name.empty()) continue;
      KILN_CHECK(k < static_cast<int>(outputs.size()), ErrorKind::Unsupported,
                 n.where + "output " + std::to_string(k) + " ('" + name + "') is not supported by kiln");
      KILN_CHECK(values_.count(name) == 0, ErrorKind::Corrupt, n.where + "output '" + name + "' is defined twice");
      values_[name] = outputs[static_cast<std::size_t>(k)];
      name_value(outputs[static_cast<std::size_t>(k)], name);
    }
  }

  // DOUBLE constants, which exporters write for Python floats and Cast at
  // once: a Constant holding one is kept aside, and a Cast of one becomes the
  // converted constant. Any other use is refused (convert_node). Returns
  // whether the node was one of those two.
  bool convert_f64(OnnxNode& n) {
    const onnx::NodeProto& proto = *n.proto;
    if (n.op == "Constant" && proto.output_size() == 1 && !proto.output(0).empty()) {
      const onnx::AttributeProto* value = nullptr;
      for (const onnx::AttributeProto& a : proto.attribute())
        if (a.name() == "value" && a.type() == onnx::AttributeProto_AttributeType_TENSOR) value = &a;
      if (value == nullptr || !is_f64(value->t())) return false;
      KILN_CHECK(values_.count(proto.output(0)) == 0 && f64_constants_.count(proto.output(0)) == 0,
                 ErrorKind::Corrupt, n.where + "output '" + proto.output(0) + "' is defined twice");
      f64_constants_[proto.output(0)] = f64_from_proto(value->t(), n.where);
      return true;
    }
    if (n.op != "Cast" || proto.input_size() != 1 || proto.output_size() != 1) return false;
    const auto source = f64_constants_.find(proto.input(0));
    if (source == f64_constants_.end()) return false;
    n.attrs = convert_attributes(proto, n.where);
    const std::int64_t code = n.attrs.get_int("to", 0);
    const std::optional<DType> to = code == onnx::TensorProto_DataType_DOUBLE ? std::optional<DType>{}
                                                                             : dtype_from_onnx(static_cast<int>(code));
    if (code == onnx::TensorProto_DataType_DOUBLE) {  // DOUBLE to DOUBLE: still a DOUBLE constant
      f64_constants_[proto.output(0)] = source->second;
      return true;
    }
    KILN_CHECK(to.has_value(), ErrorKind::Unsupported,
               n.where + "Cast to " + onnx_type_name(static_cast<int>(code)) + " is not supported");
    ValueId out = -1;
    if (*to == DType::f16 || *to == DType::bf16) {  // through f32, as a Cast node
      const ValueId narrowed = add_constant(n, cast_f64(source->second, DType::f32));
      out = emit(n, "Cast", {narrowed}, n.attrs, "").at(0);
    } else {
      out = add_constant(n, cast_f64(source->second, *to));
    }
    KILN_CHECK(values_.count(proto.output(0)) == 0, ErrorKind::Corrupt,
               n.where + "output '" + proto.output(0) + "' is defined twice");
    values_[proto.output(0)] = out;
    name_value(out, proto.output(0));
    return true;
  }

  // The value an ONNX name stands for: this graph's, or in a subgraph one of
  // the enclosing graphs' (a constant is copied in, any other value becomes
  // an input of the subgraph and is captured).
  std::optional<ValueId> resolve(const std::string& name) {
    if (auto it = values_.find(name); it != values_.end()) return it->second;
    if (parent_ == nullptr) return std::nullopt;
    const std::optional<ValueId> outer = parent_->resolve(name);
    if (!outer) return std::nullopt;
    const graph::Value& v = parent_->graph_.value(*outer);
    const ValueId inner = v.constant ? graph_.add_constant(unique_value_name(name), *v.constant)
                                     : graph_.add_subgraph_input(unique_value_name(name), v.type);
    if (!v.constant) captured_.push_back(*outer);
    values_[name] = inner;
    return inner;
  }

  // Gives a value its ONNX name unless it already has one (aliases keep theirs).
  void name_value(ValueId id, const std::string& name) {
    if (value_names_.count(graph_.value(id).name)) return;
    graph_.rename_value(id, name);
    value_names_.insert(name);
  }

  void set_outputs(const onnx::GraphProto& g) {
    std::vector<ValueId> outputs;
    std::set<ValueId> exported;
    std::set<std::string> names;
    for (const onnx::ValueInfoProto& o : g.output()) {
      KILN_CHECK(names.insert(o.name()).second, ErrorKind::Corrupt,
                 where(file_) + "graph output '" + o.name() + "' is listed twice");
      auto it = values_.find(o.name());
      KILN_CHECK(it != values_.end(), ErrorKind::Corrupt,
                 where(file_) + "graph output '" + o.name() + "' is not produced by any node, input or initializer");
      ValueId id = it->second;
      // An alias (Identity of an input, a repeated output) gets its own value
      // so that every output keeps its ONNX name.
      const bool repeated = !exported.insert(id).second;
      if (graph_.value(id).name != o.name() || repeated) {
        id = graph_.add_node("Identity", {id}, {}, unique_node_name(o.name() + "/identity")).at(0);
        graph_.rename_value(id, o.name());
        exported.insert(id);
      }
      outputs.push_back(id);
    }
    KILN_CHECK(!outputs.empty(), ErrorKind::Corrupt, where(file_) + "the graph has no outputs");
    graph_.set_outputs(std::move(outputs));
  }

  // "<base>", else "<base>_<k>" with k counted per base, so that a file
  // repeating one name a million times cannot make naming quadratic.
  std::string unique_node_name(const std::string& base) {
    std::string name = base;
    for (int& k = next_suffix_[base]; node_names_.count(name);) name = base + "_" + std::to_string(++k);
    node_names_.insert(name);
    return name;
  }

  std::string unique_value_name(const std::string& base) {
    std::string name = base;
    for (int& k = next_suffix_[base]; onnx_names_.count(name) || value_names_.count(name);)
      name = base + "_" + std::to_string(++k);
    value_names_.insert(name);
    return name;
  }

  std::string file_;
  std::string base_dir_;
  OnnxOptions options_;
  std::int64_t max_folded_bytes_;  // resolved from options_ and the environment
  std::int64_t folded_bytes_ = 0;  // charged so far
  int opset_ = 0;
  std::vector<InputDims> input_dims_;  // per graph input, in order
  std::vector<std::string> placeholders_;  // symbolic dims set by a placeholder, described
  std::map<std::string, std::pair<std::int64_t, std::string>> named_extents_;  // named dim -> given extent, where
  bool any_symbolic_ = false;
  int branch_depth_ = 0;        // If branches being inlined
  int nodes_converted_ = 0;     // branch nodes, counted against kMaxNodes
  graph::Graph graph_;
  std::shared_ptr<InitializerCache> initializers_;  // null: convert every initializer
  Importer* parent_ = nullptr;     // the enclosing graph's, importing an If branch as a subgraph
  std::vector<ValueId> captured_;  // the parent's values this subgraph's inputs stand for
  std::unordered_map<std::string, ValueId> values_;  // ONNX value name -> kiln value
  std::unordered_map<std::string, F64Constant> f64_constants_;  // DOUBLE constants, until a Cast reads them
  std::set<std::string> onnx_names_;                 // every name the file uses
  std::set<std::string> value_names_;                // names given to kiln values
  std::set<std::string> node_names_;
  std::unordered_map<std::string, int> next_suffix_;  // last suffix handed out per base name
};

}  // namespace
}  // namespace onnx_import

namespace onnx_import {
namespace {

// The parsed file, held in a type of kiln's own: a shared_ptr of
// onnx::ModelProto itself would export the control block's vtable (ONNX's
// types have default visibility; tests/test_linkage.cpp).
struct ParsedModel {
  onnx::ModelProto proto;
};

// A model with symbolic input dims, imported again for each new shape set:
// the parsed file stays in memory (shared by every model made from it).
class OnnxShapeSource final : public internal::ShapeSource,
                              public std::enable_shared_from_this<OnnxShapeSource> {
 public:
  OnnxShapeSource(std::shared_ptr<const ParsedModel> proto, std::shared_ptr<InitializerCache> initializers,
                  std::string name, std::string base_dir, OnnxOptions options, std::vector<Importer::InputDims> inputs)
      : proto_(std::move(proto)), initializers_(std::move(initializers)), name_(std::move(name)),
        base_dir_(std::move(base_dir)), options_(std::move(options)), inputs_(std::move(inputs)) {
    for (const auto& input : inputs_) symbolic_.push_back(input.names);
  }

  const std::vector<std::vector<std::string>>& symbolic_dims() const override { return symbolic_; }

  Model instantiate(const std::vector<Shape>& shapes) const override {
    KILN_CHECK(shapes.size() == inputs_.size(), ErrorKind::ShapeMismatch,
               "model '" + name_ + "' takes " + std::to_string(inputs_.size()) + " inputs, got " +
                   std::to_string(shapes.size()));
    std::map<std::string, std::pair<std::int64_t, std::string>> named;  // symbolic name -> extent, where first seen
    OnnxOptions options = options_;
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      const auto& input = inputs_[i];
      const Shape& shape = shapes[i];
      const std::string what = "input '" + input.name + "' " + shape_str(shape) + ": ";
      KILN_CHECK(!input.rank_fixed || shape.size() == input.names.size(), ErrorKind::ShapeMismatch,
                 what + "the model's input has rank " + std::to_string(input.names.size()));
      for (std::size_t d = 0; d < shape.size(); ++d) {
        const std::string dim = "dim " + std::to_string(d);
        KILN_CHECK(shape[d] >= 0, ErrorKind::ShapeMismatch, what + dim + " is negative");
        if (input.rank_fixed && input.names[d].empty()) {
          KILN_CHECK(shape[d] == input.extents[d], ErrorKind::ShapeMismatch,
                     what + dim + " is fixed at " + std::to_string(input.extents[d]) + " by the model");
          continue;
        }
        const std::string& symbol = input.rank_fixed ? input.names[d] : "?";
        if (symbol == "?") continue;
        const auto [it, first] = named.try_emplace(symbol, shape[d], "input '" + input.name + "' " + dim);
        KILN_CHECK(first || it->second.first == shape[d], ErrorKind::ShapeMismatch,
                   what + dim + " ('" + symbol + "') is " + std::to_string(shape[d]) + ", but " + it->second.second +
                       " ('" + symbol + "') is " + std::to_string(it->second.first) + ": dims of one name must agree");
      }
      options.input_shapes[input.name] = shape;
    }
    Importer importer(name_, base_dir_, options, options.max_folded_bytes, initializers_);
    return internal::ModelAccess::with_shape_source(importer.import(proto_->proto), shared_from_this());
  }

 private:
  std::shared_ptr<const ParsedModel> proto_;
  std::shared_ptr<InitializerCache> initializers_;
  std::string name_, base_dir_;
  OnnxOptions options_;  // max_folded_bytes resolved
  std::vector<Importer::InputDims> inputs_;
  std::vector<std::vector<std::string>> symbolic_;
};

}  // namespace
}  // namespace onnx_import

Model load_onnx_bytes(std::string_view bytes, const std::string& name, const std::string& base_dir,
                      const OnnxOptions& options) {
  auto model = std::make_shared<onnx_import::ParsedModel>();
  OnnxOptions resolved = options;
  resolved.max_folded_bytes = onnx_import::resolve_max_folded_bytes(options);
  onnx_import::parse(model->proto, bytes, name, "model");
  auto initializers = std::make_shared<onnx_import::InitializerCache>();
  onnx_import::Importer importer(name, base_dir, resolved, resolved.max_folded_bytes, initializers);
  std::optional<Model> attempt;
  try {
    attempt = importer.import(model->proto);
  } catch (const Error& e) {
    // Errors before the inputs are read (the header, unsupported ops, a
    // misnamed input shape), damaged files and unsupported features are the
    // file's own. A shape or value error once some symbolic dim took a
    // placeholder may be kiln's making: the model then waits for its first
    // call's shapes.
    const bool shape_dependent = e.kind() == ErrorKind::ShapeMismatch || e.kind() == ErrorKind::InvalidArgument;
    if (importer.placeholders().empty() || !shape_dependent) throw;
    std::string dims;
    for (const std::string& p : importer.placeholders()) dims += (dims.empty() ? "" : ", ") + p;
    Error why(e.kind(), "model '" + name + "': importing it at placeholder extents for its symbolic dims (" + dims +
                            ") failed: " + e.what() +
                            ". Its first call imports it at that call's shapes; to import it now, give the input "
                            "shapes in OnnxOptions::input_shapes (kiln: --input NAME=FILE.npy or --input-shape "
                            "NAME=DIMS)");
    onnx_import::Importer stub(name, base_dir, resolved, resolved.max_folded_bytes);
    std::shared_ptr<const graph::Graph> inputs = stub.inputs_only(model->proto);
    const std::string pending_name = onnx_import::model_name(model->proto, name);
    auto source = std::make_shared<const onnx_import::OnnxShapeSource>(std::move(model), std::move(initializers), name,
                                                                      base_dir, resolved, stub.input_dims());
    return internal::ModelAccess::pending(std::move(inputs), pending_name, std::move(source), std::move(why));
  }
  Model imported = std::move(*attempt);
  if (!importer.any_symbolic()) return imported;
  auto source = std::make_shared<const onnx_import::OnnxShapeSource>(std::move(model), std::move(initializers), name,
                                                                    base_dir, resolved, importer.input_dims());
  return internal::ModelAccess::with_shape_source(std::move(imported), std::move(source));
}

Model load_onnx(const std::string& path, const OnnxOptions& options) {
  const std::string bytes = onnx_import::read_file(path, onnx_import::kMaxModelBytes);
  const std::string folder = std::filesystem::path(path).parent_path().string();
  return load_onnx_bytes(bytes, path, folder.empty() ? "." : folder, options);
}

Tensor load_onnx_tensor(const std::string& path) {
  const std::string bytes = onnx_import::read_file(path, onnx_import::kMaxModelBytes);
  onnx::TensorProto proto;
  onnx_import::parse(proto, bytes, path, "tensor");
  const std::string folder = std::filesystem::path(path).parent_path().string();
  return onnx_import::tensor_from_proto(proto, folder.empty() ? "." : folder, where(path));
}

std::vector<std::string> onnx_supported_ops() {
  std::vector<std::string> ops;
  for (const auto& [op, rule] : onnx_import::op_rules())
    if (rule.kiln_op.empty() || graph::find_op(rule.kiln_op) != nullptr) ops.push_back(op);
  return ops;
}

}  // namespace kiln

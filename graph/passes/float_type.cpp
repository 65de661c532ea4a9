// convert_float_type: a model's f32 computation run in a 16-bit type, as
// PyTorch's model.half() / model.to(torch.bfloat16) would run it (the
// `dtype` setting). Kernels on 16-bit tensors compute in f32 and round each
// stored result (kir's storage types), so sums, softmax and normalisation
// statistics keep f32 inside a kernel; what is 16-bit is every tensor
// between kernels, and the weights.
#include "graph/passes/passes.h"
#include "src/base/check.h"

#include <kiln/error.h>

#include <memory>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

namespace kiln::graph::passes {
namespace {

// ONNX TensorProto data type codes (Cast's `to`, EyeLike's `dtype`).
constexpr std::int64_t kOnnxFloat = 1;
std::int64_t onnx_code(DType dtype) { return dtype == DType::f16 ? 10 : 16; }
std::string name_of(DType dtype) { return std::string(dtype_name(dtype)); }

class Converter {
 public:
  Converter(DType to, PassReport& report) : to_(to), report_(report) {}

  Graph convert(const Graph& graph, bool keep_io_types, bool subgraph) {
    Graph out;
    std::unordered_set<std::string> names;  // every name the graph uses, so inserted casts avoid them
    for (const Value& v : graph.values()) names.insert(v.name);
    for (const Node& n : graph.nodes()) names.insert(n.name);
    auto fresh = [&](const std::string& base) {
      std::string name = base;
      for (int k = 2; names.contains(name) || out.name_taken(name); ++k) name = base + "_" + std::to_string(k);
      names.insert(name);
      return name;
    };
    std::vector<ValueId> map(graph.values().size(), -1);
    for (ValueId in : graph.inputs()) {
      const Value& v = graph.value(in);
      const bool f32 = v.type.dtype == DType::f32;
      TensorType type = v.type;
      if (f32 && !keep_io_types) type.dtype = to_;
      ValueId id = subgraph ? out.add_subgraph_input(v.name, type) : out.add_input(v.name, type);
      if (f32 && keep_io_types) {
        id = out.add_node("Cast", {id}, cast_to(to_), fresh(v.name + "_as_" + name_of(to_))).at(0);
        note("input '" + v.name + "': inserted a Cast f32 -> " + name_of(to_));
      }
      map[static_cast<std::size_t>(in)] = id;
    }
    for (const Value& v : graph.values()) {
      if (!v.constant) continue;
      const bool f32 = v.constant->dtype() == DType::f32;
      map[static_cast<std::size_t>(v.id)] = out.add_constant(v.name, f32 ? v.constant->to(to_) : *v.constant);
      if (f32) ++converted_constants_;
    }
    for (const Node& node : graph.nodes()) {
      std::vector<ValueId> inputs;
      for (ValueId in : node.inputs) inputs.push_back(in < 0 ? in : map[static_cast<std::size_t>(in)]);
      Attributes attrs = node.attrs;
      // Ops that make f32 tensors by name (Cast's `to`, EyeLike's `dtype`) make the 16-bit type instead.
      const char* code = node.op == "Cast" ? "to" : "dtype";
      if (attrs.has(code) && attrs.get_int(code, 0) == kOnnxFloat) attrs.set(code, onnx_code(to_));
      std::vector<std::shared_ptr<const Graph>> subgraphs;
      for (const auto& sub : node.subgraphs)
        subgraphs.push_back(std::make_shared<const Graph>(convert(*sub, false, true)));
      const std::vector<ValueId> outs = out.add_node(node.op, inputs, attrs, node.name, subgraphs);
      for (std::size_t i = 0; i < outs.size(); ++i) {
        const std::string& name = graph.value(node.outputs[i]).name;
        if (out.value(outs[i]).name != name) out.rename_value(outs[i], name);
        map[static_cast<std::size_t>(node.outputs[i])] = outs[i];
      }
    }
    std::vector<ValueId> outputs;
    for (ValueId o : graph.outputs()) {
      ValueId id = map[static_cast<std::size_t>(o)];
      const Value& original = graph.value(o);
      if (keep_io_types && original.type.dtype == DType::f32 && out.value(id).type.dtype == to_) {
        // The output keeps its name (the model's interface): the 16-bit value is renamed.
        out.rename_value(id, fresh(original.name + "_" + name_of(to_)));
        id = out.add_node("Cast", {id}, cast_to(DType::f32), fresh(original.name + "_as_f32")).at(0);
        out.rename_value(id, original.name);
        note("output '" + original.name + "': inserted a Cast " + name_of(to_) + " -> f32");
      }
      outputs.push_back(id);
    }
    out.set_outputs(std::move(outputs));
    return out;
  }

  int converted_constants() const { return converted_constants_; }

 private:
  Attributes cast_to(DType dtype) const {
    Attributes attrs;
    attrs.set("to", dtype == DType::f32 ? kOnnxFloat : onnx_code(dtype));
    return attrs;
  }
  void note(std::string line) {
    report_.details.push_back(std::move(line));
    ++report_.changes;
  }

  DType to_;
  PassReport& report_;
  int converted_constants_ = 0;
};

}  // namespace

PassResult convert_float_type(const Graph& graph, const FloatTypeOptions& options) {
  KILN_CHECK(options.to == DType::f16 || options.to == DType::bf16, ErrorKind::InvalidArgument,
             std::string("convert_float_type converts to f16 or bf16, not ") + name_of(options.to));
  PassReport report{"convert_float_type", 0, {}};
  Converter converter(options.to, report);
  Graph converted = converter.convert(graph, options.keep_io_types, false);
  if (converter.converted_constants() > 0) {
    report.details.insert(report.details.begin(), std::to_string(converter.converted_constants()) +
                                                      " f32 constants (weights) converted to " +
                                                      name_of(options.to) + " once");
    report.changes += converter.converted_constants();
  }
  return {std::move(converted), std::move(report)};
}

}  // namespace kiln::graph::passes

// The op registry (graph/op_registry.h): registration of the built-in ops,
// node-level shape inference and the whole-graph reference interpreter.
#include "graph/op_registry.h"

#include <algorithm>
#include <mutex>
#include <new>
#include <optional>

#include "graph/ops/ops.h"
#include "src/base/check.h"

namespace kiln::graph {

namespace {

using Reference = decltype(OpSchema::reference);

// Checks what every op shares (input count, required inputs present), then
// runs the op's own inference. Errors are not yet prefixed with the node.
std::vector<TensorType> infer_unwrapped(const OpSchema& schema, const Node& node,
                                        std::span<const TensorType> input_types) {
  KILN_ASSERT(input_types.size() == node.inputs.size());
  const auto count = static_cast<std::int64_t>(node.inputs.size());
  const std::string expected = schema.max_inputs == ops::kUnboundedInputs
                                   ? "at least " + std::to_string(schema.min_inputs)
                               : schema.min_inputs == schema.max_inputs
                                   ? std::to_string(schema.min_inputs)
                                   : std::to_string(schema.min_inputs) + " to " + std::to_string(schema.max_inputs);
  KILN_CHECK(count >= schema.min_inputs && count <= schema.max_inputs, ErrorKind::InvalidArgument,
             "expects " + expected + " inputs, got " + std::to_string(count));
  for (int i = 0; i < schema.min_inputs; ++i)
    KILN_CHECK(node.inputs[i] != -1, ErrorKind::InvalidArgument,
               "input " + std::to_string(i) + " is required but omitted");
  std::vector<TensorType> outputs = schema.infer(node, input_types);
  KILN_ASSERT(schema.variadic_outputs ? !outputs.empty() : static_cast<int>(outputs.size()) == schema.num_outputs);
  return outputs;
}

// Runs `body`, prefixing any error with the node so that a message deep in a
// model says where it comes from. The error kind is kept.
template <class F>
auto with_node_context(const Node& node, F&& body) -> decltype(body()) {
  const auto prefix = [&] { return "node '" + node.name + "' (" + node.op + "): "; };
  try {
    return body();
  } catch (const Error& e) {
    throw Error(e.kind(), prefix() + e.what());
  } catch (const std::bad_alloc&) {
    // Host memory ran out (a huge but valid tensor): not a bug in kiln.
    throw Error(ErrorKind::OutOfMemory, prefix() + "out of host memory");
  } catch (const std::exception& e) {
    throw Error(ErrorKind::Internal, prefix() + "internal error: " + e.what());
  }
}

// The reference as registered: validates the input tensors by shape
// inference first (so a direct call with bad tensors is a clear user error,
// not a crash) and checks that the op produced what inference promised.
Reference checked_reference(const OpSchema* schema, Reference raw) {
  return [schema, raw = std::move(raw)](const Node& node, std::span<const Tensor> inputs) {
    return with_node_context(node, [&] {
      KILN_CHECK(inputs.size() == node.inputs.size(), ErrorKind::InvalidArgument,
                 "reference called with " + std::to_string(inputs.size()) + " tensors for " +
                     std::to_string(node.inputs.size()) + " inputs");
      std::vector<TensorType> types;
      types.reserve(inputs.size());
      for (const Tensor& t : inputs) types.push_back({t.dtype(), t.shape()});
      const std::vector<TensorType> expected = infer_unwrapped(*schema, node, types);
      std::vector<Tensor> outputs = raw(node, inputs);
      KILN_ASSERT(outputs.size() == expected.size());
      // Data-dependent ops infer dynamic types; their tensors must be instances of them.
      for (std::size_t i = 0; i < outputs.size(); ++i)
        KILN_ASSERT(type_accepts(expected[i], TensorType{outputs[i].dtype(), outputs[i].shape()}));
      return outputs;
    });
  };
}

// 16-bit floats (f16, bf16) compute as PyTorch computes them on a CPU: an
// op widens its 16-bit inputs to f32, computes as it does for f32 (its own
// precision: double accumulation where it matters), and rounds each result
// to the 16-bit type, to nearest even. Inference follows: an op typed for
// f32 inputs is typed for 16-bit ones, its f32 results 16-bit. Cast (whose
// `to` names the result type) and the control-flow ops (whose subgraphs are
// typed as they are) handle 16-bit tensors themselves.
bool handles_16bit_itself(const OpSchema& schema) {
  return schema.name == "Cast" || schema.name == "CastLike" || schema.run_with_subgraphs != nullptr;
}

bool is_16bit(DType dtype) { return dtype == DType::f16 || dtype == DType::bf16; }

using Infer = decltype(OpSchema::infer);

Infer infer_16bit_as_f32(Infer raw) {
  return [raw = std::move(raw)](const Node& node, std::span<const TensorType> inputs) {
    const auto narrow = std::ranges::find_if(inputs, [](const TensorType& t) { return is_16bit(t.dtype); });
    if (narrow == inputs.end()) return raw(node, inputs);
    std::vector<TensorType> wide(inputs.begin(), inputs.end());
    for (TensorType& t : wide)
      if (is_16bit(t.dtype)) t.dtype = DType::f32;
    std::vector<TensorType> outputs;
    try {
      outputs = raw(node, wide);
    } catch (const Error& e) {
      // The message names the widened types: say so.
      throw Error(e.kind(), std::string(e.what()) + " (its " + std::string(dtype_name(narrow->dtype)) +
                                " inputs are checked as the f32 it computes them in)");
    }
    for (TensorType& t : outputs)
      if (t.dtype == DType::f32) t.dtype = narrow->dtype;
    return outputs;
  };
}

Reference reference_16bit_as_f32(Reference raw) {
  return [raw = std::move(raw)](const Node& node, std::span<const Tensor> inputs) {
    const auto narrow = std::ranges::find_if(inputs, [](const Tensor& t) { return is_16bit(t.dtype()); });
    if (narrow == inputs.end()) return raw(node, inputs);
    const DType type = narrow->dtype();
    std::vector<Tensor> wide(inputs.begin(), inputs.end());
    for (Tensor& t : wide)
      if (is_16bit(t.dtype())) t = t.to(DType::f32);
    std::vector<Tensor> outputs = raw(node, wide);
    for (Tensor& t : outputs)
      if (t.dtype() == DType::f32) t = t.to(type);
    return outputs;
  };
}

const ops::OpTable& table() {
  static std::once_flag once;
  static ops::OpTable ops_table;
  std::call_once(once, [] {
    ops::register_elementwise_ops(ops_table);
    ops::register_activation_ops(ops_table);
    ops::register_conv_ops(ops_table);
    ops::register_conv_transpose_ops(ops_table);
    ops::register_matmul_ops(ops_table);
    ops::register_normalization_ops(ops_table);
    ops::register_pooling_ops(ops_table);
    ops::register_softmax_ops(ops_table);
    ops::register_shape_ops(ops_table);
    ops::register_math_ops(ops_table);
    ops::register_reduce_ops(ops_table);
    ops::register_data_ops(ops_table);
    ops::register_indexing_ops(ops_table);
    ops::register_resize_pad_ops(ops_table);
    ops::register_host_ops(ops_table);
    ops::register_attention_ops(ops_table);
    ops::register_silu_ops(ops_table);
    ops::register_winograd_ops(ops_table);
    ops::register_loss_ops(ops_table);
    ops::register_control_ops(ops_table);
    ops::register_recurrence_ops(ops_table);
    // Map nodes are stable, so each wrapper may keep a pointer to its schema.
    for (auto& [name, schema] : ops_table) {
      if (!handles_16bit_itself(schema)) {
        schema.infer = infer_16bit_as_f32(std::move(schema.infer));
        schema.reference = reference_16bit_as_f32(std::move(schema.reference));
      }
      schema.reference = checked_reference(&schema, schema.reference);
    }
  });
  return ops_table;
}

}  // namespace

const OpSchema* find_op(std::string_view name) {
  const ops::OpTable& ops_table = table();
  auto it = ops_table.find(name);
  return it == ops_table.end() ? nullptr : &it->second;
}

const OpSchema& get_op(std::string_view name) {
  const OpSchema* schema = find_op(name);
  KILN_CHECK(schema != nullptr, ErrorKind::Unsupported, "unknown op '" + std::string(name) + "'");
  return *schema;
}

std::vector<std::string> registered_ops() {
  std::vector<std::string> names;
  for (const auto& [name, schema] : table()) names.push_back(name);
  return names;
}

std::vector<TensorType> infer_node(const Node& node, std::span<const TensorType> input_types) {
  return with_node_context(node, [&] { return infer_unwrapped(get_op(node.op), node, input_types); });
}

bool has_dynamic_input(std::span<const TensorType> input_types) {
  return std::any_of(input_types.begin(), input_types.end(), [](const TensorType& t) { return t.dynamic; });
}

namespace {

// The input types with every unknown extent set to `extent`; nullopt if a
// rank is unknown (nothing to probe with).
std::optional<std::vector<TensorType>> probe_types(std::span<const TensorType> input_types, std::int64_t extent) {
  std::vector<TensorType> probe;
  for (const TensorType& t : input_types) {
    if (t.dynamic && t.shape.empty()) return std::nullopt;
    TensorType concrete{t.dtype, t.shape};
    for (sym::Dim& d : concrete.shape)
      if (d == kDynamicDim) d = extent;
    probe.push_back(std::move(concrete));
  }
  return probe;
}

// Outputs of a node with dynamic inputs: see infer_node_types.
std::vector<TensorType> infer_dynamic(const OpSchema& schema, const Node& node,
                                      std::span<const TensorType> input_types) {
  // Probe extents that no static extent in a model is likely to follow by
  // chance (three, so that a window or stride that maps two of them to one
  // extent still shows it depends on them).
  constexpr std::int64_t kProbes[] = {2, 3, 5};
  std::vector<std::vector<TensorType>> results;
  try {
    for (const std::int64_t extent : kProbes) {
      const auto probe = probe_types(input_types, extent);
      if (!probe) break;
      results.push_back(infer_unwrapped(schema, node, *probe));
    }
  } catch (const Error&) {
    // The op cannot be inferred from probes (e.g. a Reshape whose target
    // needs the real extent): its outputs are fully dynamic.
    results.clear();
  }
  bool consistent = results.size() == std::size(kProbes);
  for (std::size_t r = 1; consistent && r < results.size(); ++r) consistent = results[r].size() == results[0].size();
  if (consistent) {
    std::vector<TensorType> out = results[0];
    for (std::size_t i = 0; consistent && i < out.size(); ++i) {
      bool data_dependent = false;
      for (const auto& result : results) {
        const TensorType& t = result[i];
        consistent = consistent && t.dtype == out[i].dtype && t.shape.size() == out[i].shape.size();
        data_dependent = data_dependent || t.dynamic;
      }
      if (!consistent) break;
      if (data_dependent) {
        // A data-dependent op downstream: its own dynamic type wins.
        for (const auto& result : results)
          if (result[i] != out[i]) out[i] = dynamic_type(out[i].dtype, {});
        continue;
      }
      // Extents that follow the probes are known at run time only; an output
      // whose extents all stay put has a static type (a Shape of a
      // data-dependent value, a reduction over its dynamic axis), and the
      // host step that makes it is checked to agree (Executor::run_host_node).
      for (std::size_t d = 0; d < out[i].shape.size(); ++d)
        for (const auto& result : results)
          if (result[i].shape[d] != out[i].shape[d]) {
            out[i].shape[d] = kDynamicDim;
            out[i].dynamic = true;
          }
    }
    if (consistent) return out;
  }
  const auto first = std::find_if(node.inputs.begin(), node.inputs.end(), [](ValueId id) { return id >= 0; });
  const DType dtype = first == node.inputs.end() ? DType::f32 : input_types[first - node.inputs.begin()].dtype;
  KILN_CHECK(node.inputs.size() >= static_cast<std::size_t>(schema.min_inputs), ErrorKind::InvalidArgument,
             "expects at least " + std::to_string(schema.min_inputs) + " inputs, got " +
                 std::to_string(node.inputs.size()));
  return std::vector<TensorType>(static_cast<std::size_t>(schema.num_outputs), dynamic_type(dtype, {}));
}

}  // namespace

std::vector<TensorType> infer_node_types(const Node& node, std::span<const TensorType> input_types) {
  if (!has_dynamic_input(input_types)) return infer_node(node, input_types);
  return with_node_context(node, [&] { return infer_dynamic(get_op(node.op), node, input_types); });
}

std::vector<Tensor> run_reference(const Graph& graph, std::span<const Tensor> inputs) {
  return run_reference(graph, inputs, nullptr);
}

std::vector<Tensor> run_reference(const Graph& graph, std::span<const Tensor> inputs,
                                  const ReferenceObserver& observe) {
  const std::vector<ValueId>& graph_inputs = graph.inputs();
  KILN_CHECK(
      inputs.size() == graph_inputs.size(), ErrorKind::InvalidArgument,
      "the graph takes " + std::to_string(graph_inputs.size()) + " inputs, got " + std::to_string(inputs.size()));

  std::vector<std::optional<Tensor>> env(graph.values().size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = graph.value(graph_inputs[i]);
    const TensorType actual{inputs[i].dtype(), inputs[i].shape()};
    // (A subgraph's input may be dynamic: any instance of it is accepted.)
    KILN_CHECK(type_accepts(v.type, actual), ErrorKind::ShapeMismatch,
               "input '" + v.name + "' expects " + type_str(v.type) + ", got " + type_str(actual));
    env[v.id] = inputs[i];
  }
  for (const Value& v : graph.values())
    if (v.constant) env[v.id] = *v.constant;

  // Intermediate tensors are dropped after their last use to bound memory.
  std::vector<int> remaining_uses = graph.use_counts();
  for (const Node& node : graph.nodes()) {
    std::vector<Tensor> args;
    args.reserve(node.inputs.size());
    for (ValueId id : node.inputs) {
      if (id == -1) {
        args.emplace_back();
        continue;
      }
      KILN_ASSERT(env[id].has_value());
      args.push_back(*env[id]);
    }
    std::vector<Tensor> results = get_op(node.op).reference(node, args);
    KILN_ASSERT(results.size() == node.outputs.size());
    if (observe) observe(node, results);
    for (std::size_t i = 0; i < results.size(); ++i) env[node.outputs[i]] = std::move(results[i]);
    for (ValueId id : node.inputs)
      if (id >= 0 && --remaining_uses[id] == 0 && graph.value(id).producer != kNoNode) env[id].reset();
  }

  std::vector<Tensor> outputs;
  for (ValueId id : graph.outputs()) {
    KILN_ASSERT(env[id].has_value());
    // A graph input or constant returned as an output must not alias the caller's or the graph's storage.
    outputs.push_back(graph.value(id).producer == kNoNode ? env[id]->clone() : *env[id]);
  }
  return outputs;
}

}  // namespace kiln::graph

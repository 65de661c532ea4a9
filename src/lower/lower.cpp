// Dispatch from op name to lowering, and the checks every lowering shares.
#include "src/lower/lower.h"

#include "src/base/check.h"
#include "src/lower/lowerings.h"
#include "src/lower/tuning_site.h"
#include "src/lower/workgroup_site.h"

#include <kiln/error.h>

#include <algorithm>
#include <limits>

namespace kiln::lower {

namespace {

constexpr OpLowering kLowerings[] = {
    {"Add", 2, 2, elementwise_unsupported, lower_elementwise, 1, KernelDTypes::any},
    {"Sub", 2, 2, elementwise_unsupported, lower_elementwise, 1, KernelDTypes::any},
    {"Mul", 2, 2, elementwise_unsupported, lower_elementwise, 1, KernelDTypes::any},
    {"Div", 2, 2, elementwise_unsupported, lower_elementwise, 1, KernelDTypes::any},
    {"Relu", 1, 1, elementwise_unsupported, lower_elementwise},
    {"Sigmoid", 1, 1, elementwise_unsupported, lower_elementwise},
    {"Silu", 1, 1, elementwise_unsupported, lower_elementwise},
    {"Tanh", 1, 1, elementwise_unsupported, lower_elementwise},
    {"Gelu", 1, 1, elementwise_unsupported, lower_elementwise},
    {"Clip", 1, 1, elementwise_unsupported, lower_elementwise},
    {"LeakyRelu", 1, 1, elementwise_unsupported, lower_elementwise},
    {"Elu", 1, 1, elementwise_unsupported, lower_elementwise},
    {"Selu", 1, 1, elementwise_unsupported, lower_elementwise},
    {"Celu", 1, 1, elementwise_unsupported, lower_elementwise},
    {"ThresholdedRelu", 1, 1, elementwise_unsupported, lower_elementwise},
    {"Softplus", 1, 1, elementwise_unsupported, lower_elementwise},
    {"Softsign", 1, 1, elementwise_unsupported, lower_elementwise},
    {"Mish", 1, 1, elementwise_unsupported, lower_elementwise},
    {"Shrink", 1, 1, elementwise_unsupported, lower_elementwise},
    {"BatchNormalization", 5, 5, batch_norm_unsupported, lower_batch_norm},
    {"Conv", 2, 3, conv_unsupported, lower_conv},
    {"ConvTranspose", 2, 3, conv_transpose_unsupported, lower_conv_transpose},
    {"Gemm", 2, 3, gemm_unsupported, lower_gemm},
    {"MatMul", 2, 2, matmul_unsupported, lower_matmul},
    {"Softmax", 1, 1, softmax_unsupported, lower_softmax},
    {"LogSoftmax", 1, 1, softmax_unsupported, lower_log_softmax},
    {"LayerNormalization", 2, 3, layer_norm_unsupported, lower_layer_norm, 3},
    {"LRN", 1, 1, lrn_unsupported, lower_lrn},
    {"Attention", 3, 4, attention_unsupported, lower_attention},
    {"Recurrence", 2, 6, recurrence_unsupported, lower_recurrence, 3, KernelDTypes::any},
    {"MaxPool", 1, 1, pool_unsupported, lower_pool},
    {"AveragePool", 1, 1, pool_unsupported, lower_pool},
    {"GlobalAveragePool", 1, 1, global_pool_unsupported, lower_global_average_pool},
    {"WinogradInput", 1, 1, winograd_input_unsupported, lower_winograd_input},
    {"WinogradOutput", 1, 2, winograd_output_unsupported, lower_winograd_output},
    {"WinogradWeight", 1, 1, winograd_weight_unsupported, lower_winograd_weight},
    {"Transpose", 1, 1, transpose_unsupported, lower_transpose, 1, KernelDTypes::any},
    {"Concat", 1, kAnyCount, concat_unsupported, lower_concat, 1, KernelDTypes::any},
    {"Reshape", 1, 1, nullptr, nullptr, 1, KernelDTypes::any},
    {"Flatten", 1, 1, nullptr, nullptr, 1, KernelDTypes::any},
    {"Identity", 1, 1, nullptr, nullptr, 1, KernelDTypes::any},
};

const OpLowering* find_lowering(std::string_view op) {
  for (std::span<const OpLowering> family : {std::span<const OpLowering>(kLowerings), math_lowerings(), data_lowerings(), loss_lowerings()}) {
    auto it = std::find_if(family.begin(), family.end(), [&](const OpLowering& lowering) { return lowering.op == op; });
    if (it != family.end()) return &*it;
  }
  return nullptr;
}

// Maps the given input types onto the node's input slots. Callers may pass
// one type per slot (an omitted slot's type is ignored) or only the present
// inputs' types, in order.
OpContext make_context(const graph::Node& node, std::span<const graph::TensorType> inputs,
                       std::span<const graph::TensorType> outputs, const LowerTarget& target) {
  OpContext ctx{node, {}, outputs, target};
  const auto present = static_cast<std::size_t>(
      std::count_if(node.inputs.begin(), node.inputs.end(), [](graph::ValueId id) { return id >= 0; }));
  if (node.inputs.empty()) {
    for (const graph::TensorType& type : inputs) ctx.inputs.push_back(&type);
  } else if (inputs.size() == node.inputs.size()) {
    for (std::size_t i = 0; i < inputs.size(); ++i) ctx.inputs.push_back(node.inputs[i] >= 0 ? &inputs[i] : nullptr);
  } else {
    // A caller passing types that fit neither form is a bug in kiln.
    KILN_CHECK(inputs.size() == present, ErrorKind::Internal,
               "node '" + node.name + "' (" + node.op + "): " + std::to_string(inputs.size()) +
                   " input types given for " + std::to_string(node.inputs.size()) + " input slots (" +
                   std::to_string(present) + " present)");
    std::size_t next = 0;
    for (graph::ValueId id : node.inputs) ctx.inputs.push_back(id >= 0 ? &inputs[next++] : nullptr);
  }
  return ctx;
}

constexpr std::int64_t kMaxElements = std::numeric_limits<std::int32_t>::max();

std::optional<std::string> check_tensor(const graph::TensorType& type, const std::string& what, bool kernel,
                                        KernelDTypes dtypes) {
  if (kernel && dtypes == KernelDTypes::f32 && type.dtype != DType::f32)
    return "dtype " + std::string(dtype_name(type.dtype)) + " of " + what + " is not supported by this op's kernel (f32 only)";
  if (kernel && !kernel_type(type.dtype))
    return "dtype " + std::string(dtype_name(type.dtype)) + " of " + what +
           " is not supported by kernels (f32, f16, bf16, i32, i64 and bool are)";
  if (num_elements(type.shape) > kMaxElements)
    return what + " " + type_str(type) + " has more than 2^31 - 1 elements (kernels index with i32)";
  return std::nullopt;
}

// Whether the node's output views input 0 (no kernel): the alias ops, and a
// Cast to the type it already has.
bool is_view(const OpLowering& lowering, const OpContext& ctx) {
  if (lowering.lower == nullptr) return true;
  return ctx.node.op == "Cast" && ctx.has_input(0) && !ctx.outputs.empty() &&
         ctx.inputs[0]->dtype == ctx.outputs[0].dtype;
}

std::optional<std::string> generic_reason(const OpLowering& lowering, const OpContext& ctx) {
  const bool kernel = !is_view(lowering, ctx);
  if (ctx.inputs.size() < lowering.min_inputs || ctx.inputs.size() > lowering.max_inputs) {
    std::string expected = std::to_string(lowering.min_inputs);
    if (lowering.max_inputs == kAnyCount) expected += " or more";
    else if (lowering.max_inputs != lowering.min_inputs) expected += " to " + std::to_string(lowering.max_inputs);
    return std::to_string(ctx.inputs.size()) + " inputs given, expected " + expected;
  }
  for (std::size_t slot = 0; slot < ctx.inputs.size(); ++slot) {
    if (!ctx.inputs[slot]) {
      if (slot < lowering.min_inputs) return "required input " + std::to_string(slot) + " is missing";
      continue;
    }
    if (auto reason = check_tensor(*ctx.inputs[slot], "input " + std::to_string(slot), kernel, lowering.dtypes))
      return reason;
  }
  // Only lowerings that declare it write several outputs (Split); a view is one.
  const std::size_t max_outputs = kernel ? lowering.max_outputs : 1;
  if (ctx.outputs.empty() || ctx.outputs.size() > max_outputs)
    return std::to_string(ctx.outputs.size()) + " outputs are not supported (the " +
           (kernel ? "kernel" : "view") + " of " + ctx.node.op + " has " +
           (max_outputs == kAnyCount ? "any number" : std::to_string(max_outputs)) + ")";
  for (std::size_t slot = 0; slot < ctx.outputs.size(); ++slot) {
    const std::string what = "output " + std::to_string(slot);
    if (auto reason = check_tensor(ctx.outputs[slot], what, kernel, lowering.dtypes)) return reason;
  }
  if (!kernel && num_elements(ctx.outputs[0].shape) != num_elements(ctx.input_shape(0)))
    return "output " + type_str(ctx.outputs[0]) + " does not have the element count of input " +
           type_str(*ctx.inputs[0]);
  return std::nullopt;
}

std::optional<std::string> reason_for(const OpLowering* lowering, const OpContext& ctx) {
  if (!lowering) return "op '" + ctx.node.op + "' has no lowering";
  try {
    if (auto reason = generic_reason(*lowering, ctx)) return reason;
    if (lowering->unsupported) return lowering->unsupported(ctx);
  } catch (const Error& error) {
    // A malformed attribute makes the node unlowerable: report it as the reason.
    if (!error.is_user_error()) throw;
    return std::string(error.what());
  }
  return std::nullopt;
}

}  // namespace

const graph::SymShape& OpContext::input_shape(std::size_t slot) const {
  KILN_ASSERT(has_input(slot));
  return inputs[slot]->shape;
}

const graph::SymShape& OpContext::output_shape(std::size_t slot) const {
  KILN_ASSERT(slot < outputs.size());
  return outputs[slot].shape;
}

std::optional<kir::ScalarType> kernel_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return kir::ScalarType::f32;
    case DType::i32: return kir::ScalarType::i32;
    case DType::i64: return kir::ScalarType::i64;
    case DType::boolean: return kir::ScalarType::boolean;
    default: return std::nullopt;
  }
}

kir::ScalarType element_type(DType dtype) {
  const std::optional<kir::ScalarType> type = kernel_type(dtype);
  KILN_ASSERT(type.has_value());
  return *type;
}

kir::Expr constant_of(kir::ScalarType type, double value) {
  switch (type) {
    case kir::ScalarType::f32: return kir::f32(value);
    case kir::ScalarType::i32: return kir::i32(static_cast<std::int64_t>(value));
    case kir::ScalarType::u32: return kir::u32(static_cast<std::int64_t>(value));
    case kir::ScalarType::i64: return kir::i64(static_cast<std::int64_t>(value));
    case kir::ScalarType::boolean: return kir::boolean(value != 0.0);
    case kir::ScalarType::f16:
    case kir::ScalarType::bf16: break;  // storage types: lowerings compute on their f32 twins
  }
  KILN_ASSERT(false && "constant of an unknown type");
  return {};
}

kir::Kernel make_kernel(const std::string& name, std::int64_t global_size) {
  kir::Kernel kernel(name);
  kernel.global_size = global_size;
  kernel.workgroup_size = kWorkgroupSize;
  return kernel;
}

std::vector<std::int64_t> get_ints_exactly(const OpContext& ctx, const std::string& name, std::size_t count,
                                           std::vector<std::int64_t> fallback) {
  std::vector<std::int64_t> values = ctx.node.attrs.get_ints(name, std::move(fallback));
  KILN_CHECK(values.size() == count, ErrorKind::InvalidArgument,
             "attribute '" + name + "' has " +
                 std::to_string(values.size()) + " values, expected " + std::to_string(count));
  return values;
}

std::size_t get_axis(const OpContext& ctx, const std::string& name, std::int64_t fallback, std::size_t rank) {
  const std::int64_t axis = ctx.node.attrs.get_int(name, fallback);
  const auto signed_rank = static_cast<std::int64_t>(rank);
  KILN_CHECK(axis >= -signed_rank && axis < signed_rank, ErrorKind::InvalidArgument,
             "attribute '" + name + "' = " +
                 std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return static_cast<std::size_t>(axis < 0 ? axis + signed_rank : axis);
}

std::optional<std::string> activation_unsupported(const OpContext& ctx) {
  const std::string activation = ctx.node.attrs.get_string("activation", "");
  if (activation.empty() || activation == "Relu") return std::nullopt;
  return "activation '" + activation + "' is not supported (only \"\" or \"Relu\")";
}

kir::Expr apply_activation(const OpContext& ctx, kir::Expr value) {
  const std::string activation = ctx.node.attrs.get_string("activation", "");
  if (activation.empty()) return value;
  KILN_ASSERT(activation == "Relu");
  return kir::max(value, kir::f32(0.0));
}

namespace {

// The 16-bit rule (docs/precision.md): a node with f16 or bf16 tensors
// lowers as its f32 twin, then the buffers of its 16-bit tensors are
// declared f16 or bf16, so its kernel widens each load, computes in f32 and
// rounds each store to nearest even, as the reference does per op.
bool is_16bit_float(DType dtype) { return dtype == DType::f16 || dtype == DType::bf16; }

struct Widened {
  std::vector<graph::TensorType> inputs, outputs;
  bool any = false;     // some tensor was 16-bit
  std::string storage;  // which 16-bit types: "f16", "bf16" or "bf16+f16" (LowerTarget::storage16)
};

Widened widen_16bit(std::span<const graph::TensorType> inputs, std::span<const graph::TensorType> outputs) {
  Widened w{{inputs.begin(), inputs.end()}, {outputs.begin(), outputs.end()}, false, {}};
  bool f16 = false, bf16 = false;
  for (auto* types : {&w.inputs, &w.outputs})
    for (graph::TensorType& type : *types)
      if (is_16bit_float(type.dtype)) {
        (type.dtype == DType::f16 ? f16 : bf16) = true;
        type.dtype = DType::f32;
        w.any = true;
      }
  w.storage = f16 && bf16 ? "bf16+f16" : f16 ? "f16" : bf16 ? "bf16" : "";
  return w;
}

kir::ScalarType storage_of(DType dtype) {
  return dtype == DType::f16 ? kir::ScalarType::f16 : kir::ScalarType::bf16;
}

// Declares the buffers of `ctx`'s 16-bit tensors 16-bit (the kernel was
// lowered for their f32 twins; buffers follow lower.h's convention).
void narrow_16bit_buffers(kir::Kernel& kernel, const OpContext& ctx) {
  std::vector<const graph::TensorType*> tensors;
  for (const graph::TensorType* input : ctx.inputs)
    if (input) tensors.push_back(input);
  for (const graph::TensorType& output : ctx.outputs) tensors.push_back(&output);
  KILN_CHECK(kernel.buffers.size() == tensors.size(), ErrorKind::Internal,
             "node '" + ctx.node.name + "' (" + ctx.node.op + "): its kernel has " +
                 std::to_string(kernel.buffers.size()) + " buffers for " + std::to_string(tensors.size()) +
                 " tensors; 16-bit tensors need one buffer per tensor");
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (!is_16bit_float(tensors[i]->dtype)) continue;
    kir::BufferParam& buffer = kernel.buffers[i];
    KILN_CHECK(buffer.type == kir::ScalarType::f32, ErrorKind::Internal,
               "node '" + ctx.node.name + "' (" + ctx.node.op + "): buffer '" + buffer.name + "' of a 16-bit tensor is " +
                   kir::scalar_type_name(buffer.type) + " in its f32 twin");
    buffer.type = storage_of(tensors[i]->dtype);
    // A texel buffer stays one where the target has 16-bit texel views.
    if (!ctx.target.texel_16bit) buffer.texel_width = 0;
  }
}

}  // namespace

std::optional<std::string> unsupported_reason(const graph::Node& node, std::span<const graph::TensorType> inputs,
                                              std::span<const graph::TensorType> outputs,
                                              const LowerTarget& target) {
  const Widened widened = widen_16bit(inputs, outputs);
  if (widened.any) return unsupported_reason(node, widened.inputs, widened.outputs, target);
  return reason_for(find_lowering(node.op), make_context(node, inputs, outputs, target));
}

LoweredNode lower_node(const graph::Node& node, std::span<const graph::TensorType> inputs,
                       std::span<const graph::TensorType> outputs, const LowerTarget& requested) {
  // The node's pinned knobs, by its name (LowerTarget::node_pins).
  LowerTarget pinned;
  const auto pin = requested.node_pins ? requested.node_pins->find(node.name) : NodeKnobPins::const_iterator{};
  const bool has_pin = requested.node_pins && pin != requested.node_pins->end();
  if (has_pin) {
    pinned = requested;
    pinned.node_pin = pin->second;
  }
  const LowerTarget& pinned_or_requested = has_pin ? pinned : requested;
  // The products' precision the node's attribute allows (f32 nodes only).
  LowerTarget with_products;
  const std::string f32_products = node.attrs.get_string("f32_products", "");
  if (!f32_products.empty()) {
    with_products = pinned_or_requested;
    with_products.f32_products = f32_products;
  }
  const LowerTarget& target = f32_products.empty() ? pinned_or_requested : with_products;
  const OpLowering* lowering = find_lowering(node.op);
  const OpContext ctx = make_context(node, inputs, outputs, target);
  const Widened widened = widen_16bit(inputs, outputs);
  LowerTarget twin_target = target;
  twin_target.storage16 = widened.storage;
  twin_target.f32_products.clear();  // a 16-bit node multiplies in its own type
  const OpContext twin = widened.any ? make_context(node, widened.inputs, widened.outputs, twin_target) : ctx;
  if (auto reason = reason_for(lowering, twin))
    throw_error(ErrorKind::Unsupported, "node '" + node.name + "' (" + node.op + "): " + *reason);
  LoweredNode lowered;
  if (std::all_of(outputs.begin(), outputs.end(), [](const graph::TensorType& t) { return num_elements(t.shape) == 0; })) {
    lowered.kind = LoweredNode::Kind::empty;
    return lowered;
  }
  // On the node's own types: a Cast between two 16-bit types is a kernel.
  if (is_view(*lowering, ctx)) {
    lowered.kind = LoweredNode::Kind::alias;
    return lowered;
  }
  lowered.kind = LoweredNode::Kind::kernel;
  lowered.kernel = lowering->lower(twin);
  if (const char* kind = workgroup_template(node.op))
    build_tuned_workgroup(*lowered.kernel, kind,
                          with_storage(workgroup_problem_text(kind, node, twin.inputs, twin.outputs), twin.target.storage16),
                          twin.target);
  if (widened.any) narrow_16bit_buffers(*lowered.kernel, ctx);
  return lowered;
}

std::optional<kir::Kernel> lower_in_place(const graph::Node& node, std::span<const graph::TensorType> inputs,
                                          std::span<const graph::TensorType> outputs, const LowerTarget& target) {
  if (node.op != "TensorScatter" || inputs.empty() || outputs.empty()) return std::nullopt;
  const Widened widened = widen_16bit(inputs, outputs);
  LowerTarget twin_target = target;
  twin_target.storage16 = widened.storage;
  const OpContext twin = make_context(node, widened.inputs, widened.outputs, twin_target);
  kir::Kernel kernel = lower_tensor_scatter_in_place(twin);
  if (widened.any) {
    OpContext without_past = make_context(node, inputs, outputs, target);
    without_past.inputs[0] = nullptr;  // not bound: output 0 is its storage
    narrow_16bit_buffers(kernel, without_past);
  }
  return kernel;
}

std::string storage16_of(std::span<const graph::TensorType> inputs, std::span<const graph::TensorType> outputs) {
  return widen_16bit(inputs, outputs).storage;
}

shaders::ConvProblem conv_problem_of(const graph::Node& node, std::span<const graph::TensorType> inputs,
                                     std::span<const graph::TensorType> outputs) {
  // A 16-bit convolution's geometry is its f32 twin's.
  const Widened widened = widen_16bit(inputs, outputs);
  LowerTarget target;  // outlives ctx, which refers to it
  target.storage16 = widened.storage;
  const OpContext ctx = make_context(node, widened.inputs, widened.outputs, target);
  if (auto reason = reason_for(find_lowering(node.op), ctx))
    throw_error(ErrorKind::Unsupported, "node '" + node.name + "' (" + node.op + "): " + *reason);
  KILN_CHECK(node.op == "Conv", ErrorKind::InvalidArgument, "node '" + node.name + "' (" + node.op + ") is not a Conv");
  return conv_problem(ctx);
}

}  // namespace kiln::lower

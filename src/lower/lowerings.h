// Internal to src/lower: what every op lowering sees, and the per-op entry
// points that lower.cpp dispatches to by op name.
#pragma once

#include "graph/ir.h"
#include "shaders/conv_template.h"
#include "src/kernel/ir.h"
#include "shaders/target.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kiln::lower {

struct OpContext;

// Scalar variables of the kernel being built.
inline kir::Expr f32_var(const std::string& name) { return kir::var(name, kir::ScalarType::f32); }
inline kir::Expr i32_var(const std::string& name) { return kir::var(name, kir::ScalarType::i32); }

// How one op lowers: its input slot counts and entry points.
using Reason = std::optional<std::string> (*)(const OpContext&);
using Lower = kir::Kernel (*)(const OpContext&);

// The tensor dtypes an op's kernel takes: f32 only, or every dtype kernels
// hold (kernel_type); the op's own check narrows further.
enum class KernelDTypes : std::uint8_t { f32, any };

struct OpLowering {
  std::string_view op;
  std::size_t min_inputs;
  std::size_t max_inputs;  // input slots, present or omitted
  Reason unsupported;      // nullptr: nothing op-specific to check
  Lower lower;             // nullptr: an alias (the output views input 0)
  std::size_t max_outputs = 1;  // outputs the kernel writes (Split: kAnyCount)
  KernelDTypes dtypes = KernelDTypes::f32;
};

constexpr std::size_t kAnyCount = std::numeric_limits<std::size_t>::max();

// Invocations per workgroup of every kernel make_kernel builds; the ops in
// workgroup_site.cpp's table take another size from a knob override.
inline constexpr std::uint32_t kWorkgroupSize = 64;

// A node with its input types resolved per input slot (omitted optional
// inputs are nullptr), its output types and the device it is lowered for.
struct OpContext {
  const graph::Node& node;
  std::vector<const graph::TensorType*> inputs;
  std::span<const graph::TensorType> outputs;
  const LowerTarget& target;

  // Whether input `slot` is present.
  bool has_input(std::size_t slot) const { return slot < inputs.size() && inputs[slot] != nullptr; }
  // The shape of a present input (asserts presence).
  const graph::SymShape& input_shape(std::size_t slot) const;
  // The shape of output `slot`.
  const graph::SymShape& output_shape(std::size_t slot = 0) const;
};

// The kernel element type of a tensor dtype: f32, i32, i64 and bool tensors
// live in device buffers as kir stores them; f16 and u8 do not (yet).
std::optional<kir::ScalarType> kernel_type(DType dtype);
// kernel_type of a dtype an op's check admitted (asserts that there is one).
kir::ScalarType element_type(DType dtype);
// `value` as a constant of `type` (bool: value != 0).
kir::Expr constant_of(kir::ScalarType type, double value);

// A kernel named `name` with the workgroup size set; buffers are added by the
// lowering, present inputs first, then outputs.
kir::Kernel make_kernel(const std::string& name, std::int64_t global_size);

// The attribute `name` of `ctx`'s node as exactly `count` ints, `fallback`
// when absent; throws InvalidArgument naming the node when the count differs.
std::vector<std::int64_t> get_ints_exactly(const OpContext& ctx, const std::string& name, std::size_t count,
                                           std::vector<std::int64_t> fallback);
// An axis attribute normalised into [0, rank); throws InvalidArgument if out of range.
std::size_t get_axis(const OpContext& ctx, const std::string& name, std::int64_t fallback, std::size_t rank);

// The kiln `activation` attribute of Conv and Gemm ("" or "Relu"), applied
// after the bias: why it is unsupported, and the expression applying it.
std::optional<std::string> activation_unsupported(const OpContext& ctx);
kir::Expr apply_activation(const OpContext& ctx, kir::Expr value);

// The lowering tables of op families kept in their own files
// (lower_math.cpp, lower_data.cpp, lower_loss.cpp); lower.cpp searches them after its own.
std::span<const OpLowering> math_lowerings();
std::span<const OpLowering> data_lowerings();
std::span<const OpLowering> loss_lowerings();  // lower_loss.cpp

// Per-op entry points. *_unsupported returns why the node cannot be lowered
// (after the generic dtype and size checks passed); lower_* builds the kernel.
std::optional<std::string> elementwise_unsupported(const OpContext& ctx);
kir::Kernel lower_elementwise(const OpContext& ctx);  // binary and unary ops
std::optional<std::string> batch_norm_unsupported(const OpContext& ctx);
kir::Kernel lower_batch_norm(const OpContext& ctx);

std::optional<std::string> conv_unsupported(const OpContext& ctx);
kir::Kernel lower_conv(const OpContext& ctx);
// The convolution's geometry as the template sees it (no buffers).
shaders::ConvProblem conv_problem(const OpContext& ctx);

std::optional<std::string> conv_transpose_unsupported(const OpContext& ctx);
kir::Kernel lower_conv_transpose(const OpContext& ctx);  // one invocation per output element

std::optional<std::string> gemm_unsupported(const OpContext& ctx);
kir::Kernel lower_gemm(const OpContext& ctx);
std::optional<std::string> matmul_unsupported(const OpContext& ctx);
kir::Kernel lower_matmul(const OpContext& ctx);

std::optional<std::string> softmax_unsupported(const OpContext& ctx);  // Softmax and LogSoftmax
kir::Kernel lower_softmax(const OpContext& ctx);
kir::Kernel lower_log_softmax(const OpContext& ctx);
std::optional<std::string> lrn_unsupported(const OpContext& ctx);
kir::Kernel lower_lrn(const OpContext& ctx);
std::optional<std::string> layer_norm_unsupported(const OpContext& ctx);
kir::Kernel lower_layer_norm(const OpContext& ctx);
std::optional<std::string> attention_unsupported(const OpContext& ctx);
kir::Kernel lower_attention(const OpContext& ctx);
// TensorScatter writing only the update's rows into output 0, which is input
// 0's storage (lower_in_place): buffers update, write_indices if given, present.
kir::Kernel lower_tensor_scatter_in_place(const OpContext& ctx);  // softmax(scale Q K^T + mask) V, one kernel

std::optional<std::string> pool_unsupported(const OpContext& ctx);
kir::Kernel lower_pool(const OpContext& ctx);  // MaxPool, AveragePool
std::optional<std::string> global_pool_unsupported(const OpContext& ctx);
kir::Kernel lower_global_average_pool(const OpContext& ctx);

// The transforms around a Winograd F(m x m, 3x3) convolution's batched MatMul.
std::optional<std::string> winograd_input_unsupported(const OpContext& ctx);
kir::Kernel lower_winograd_input(const OpContext& ctx);
std::optional<std::string> winograd_output_unsupported(const OpContext& ctx);
kir::Kernel lower_winograd_output(const OpContext& ctx);  // one invocation per output element
std::optional<std::string> winograd_weight_unsupported(const OpContext& ctx);
kir::Kernel lower_winograd_weight(const OpContext& ctx);  // eager: the filter transform, one invocation per filter

// The whole time loop of an LSTM/GRU/RNN in one kernel: a workgroup per (direction, batch row) sequence.
std::optional<std::string> recurrence_unsupported(const OpContext& ctx);
kir::Kernel lower_recurrence(const OpContext& ctx);

std::optional<std::string> transpose_unsupported(const OpContext& ctx);
kir::Kernel lower_transpose(const OpContext& ctx);
std::optional<std::string> concat_unsupported(const OpContext& ctx);
kir::Kernel lower_concat(const OpContext& ctx);

}  // namespace kiln::lower

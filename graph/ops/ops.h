// Internal to graph/: the per-family registration functions the op registry
// calls once, and the helpers every op's schema shares (attribute validation,
// dtype and rank checks, fused activations). Not for use outside graph/.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "graph/op_registry.h"

namespace kiln::graph::ops {

// max_inputs of an op that takes any number of inputs (Concat).
inline constexpr int kUnboundedInputs = std::numeric_limits<int>::max();

using OpTable = std::map<std::string, OpSchema, std::less<>>;

// Adds a schema; a second schema with the same name is a bug in kiln.
void add_op(OpTable& table, OpSchema schema);

// `t` converted element by element as Cast converts: floats to integers
// toward zero (saturating), to f16 and bf16 to nearest even.
Tensor cast_tensor(const Tensor& t, DType to);

void register_elementwise_ops(OpTable& table);    // Add Sub Mul Div
void register_activation_ops(OpTable& table);     // Relu Sigmoid Tanh Gelu Clip
void register_conv_ops(OpTable& table);           // Conv
void register_conv_transpose_ops(OpTable& table); // ConvTranspose
void register_matmul_ops(OpTable& table);         // MatMul Gemm
void register_normalization_ops(OpTable& table);  // LayerNormalization BatchNormalization LRN
void register_pooling_ops(OpTable& table);        // MaxPool AveragePool GlobalAveragePool
void register_softmax_ops(OpTable& table);        // Softmax LogSoftmax
void register_shape_ops(OpTable& table);          // Reshape Flatten Transpose Concat Identity
void register_math_ops(OpTable& table);          // unary math, HardSigmoid/HardSwish, Pow, Equal, Where, Cast
void register_reduce_ops(OpTable& table);        // ReduceMean ReduceSum ReduceMax ReduceMin ReduceProd CumSum ArgMax ArgMin
void register_data_ops(OpTable& table);          // Slice Split Gather Squeeze Unsqueeze Expand Tile Shape ConstantOfShape
void register_indexing_ops(OpTable& table);      // GatherElements Trilu
void register_resize_pad_ops(OpTable& table);    // Resize Pad
void register_host_ops(OpTable& table);          // NonZero TopK NonMaxSuppression (data-dependent shapes)
void register_attention_ops(OpTable& table);     // Attention (kiln's, from recognise_attention)
void register_silu_ops(OpTable& table);          // Silu (kiln's, from recognise_silu)
void register_winograd_ops(OpTable& table);      // WinogradInput WinogradOutput (kiln's, from winograd)
void register_loss_ops(OpTable& table);          // NegativeLogLikelihoodLoss
void register_control_ops(OpTable& table);       // If (a condition read at run time)
void register_recurrence_ops(OpTable& table);    // Recurrence (kiln's: the time loop of LSTM, GRU, RNN)

// ---- node inputs and attributes --------------------------------------------

// An ints attribute as a message shows it: "[1, 2, 3]".
std::string ints_str(const std::vector<std::int64_t>& values);

// True if input `index` of the node is given (not omitted with -1).
bool has_input(const Node& node, std::size_t index);

// Throws InvalidArgument naming an attribute the op does not know (a typo
// such as "stride" must not be silently ignored).
void check_known_attributes(const Node& node, const std::vector<std::string_view>& known);
// The precision kiln may compute a node's f32 products in, where a pass set
// it (choose_f32_products): "tf32" or "bf16"; absent: f32.
void check_f32_products(const Node& node);

// An ints attribute that must have exactly `length` values.
std::vector<std::int64_t> get_ints_of_length(const Node& node, const std::string& name,
                                             std::vector<std::int64_t> fallback, std::size_t length);
// Throws InvalidArgument unless every value is > 0 (or >= 0).
void check_positive(const std::string& name, const std::vector<std::int64_t>& values);
void check_non_negative(const std::string& name, const std::vector<std::int64_t>& values);
// An int attribute that must be 0 or 1.
bool get_flag(const Node& node, const std::string& name, bool fallback);

// The extent of a window of `kernel` taps `dilation` apart,
// (kernel - 1) * dilation + 1, and the input extent with its pads added;
// throw InvalidArgument naming the values where int64 would overflow.
std::int64_t window_extent(std::int64_t kernel, std::int64_t dilation);
std::int64_t padded_extent(std::int64_t size, std::int64_t pad_begin, std::int64_t pad_end);
sym::Dim padded_extent(const sym::Dim& size, std::int64_t pad_begin, std::int64_t pad_end);

// Maps an axis in [-rank, rank) to [0, rank); throws InvalidArgument naming
// the attribute and the allowed range.
std::int64_t normalize_axis(std::int64_t axis, std::int64_t rank, std::string_view attribute);

// The `activation` extension attribute of Conv and Gemm, applied after the bias.
enum class Activation { none, relu };
Activation get_activation(const Node& node);
inline double apply_activation(Activation activation, double x) {
  return activation == Activation::relu ? (x > 0.0 ? x : 0.0) : x;
}

// ---- type checks (messages name the input and its type) ----------------------

// "input f32[1, 3, 8, 8]"
std::string describe(std::string_view what, const TensorType& type);
// Throws Unsupported unless the dtype is f32 (kernels support f32 only).
void require_f32(std::string_view what, const TensorType& type);
// Throws ShapeMismatch unless the rank is exactly `rank`.
void require_rank(std::string_view what, const TensorType& type, std::size_t rank);
// Throws ShapeMismatch unless both dtypes are equal.
void require_same_dtype(std::string_view what_a, const TensorType& a, std::string_view what_b, const TensorType& b);

// ---- reference helpers --------------------------------------------------------

// The dtype and shape of each tensor, to re-run inference inside a reference.
std::vector<TensorType> types_of(std::span<const Tensor> tensors);

// The same dtype and shape, values copied (references never alias their inputs).
Tensor copy_tensor(const Tensor& tensor, Shape shape);

// Applies f to every element of an f32 tensor, in double precision.
template <class F>
Tensor map_f32(const Tensor& input, F f) {
  Tensor out(DType::f32, input.shape());
  auto x = input.values<float>();
  auto y = out.values<float>();
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = static_cast<float>(f(static_cast<double>(x[i])));
  return out;
}

// A schema from its parts (the fields most ops set).
OpSchema make_schema(const std::string& name, int min_inputs, int max_inputs, decltype(OpSchema::infer) infer,
                     decltype(OpSchema::reference) reference, const std::string& summary);

// The element function of an f32 -> f32 unary op, configured by the node's
// attributes (which it validates), computed in double precision.
using ElementFn = std::function<double(double)>;
using MakeElementFn = std::function<ElementFn(const Node&)>;
// The schema of such an op: `known` lists its attributes.
OpSchema f32_unary_schema(const std::string& name, std::vector<std::string_view> known, MakeElementFn make_fn,
                          const std::string& summary);

}  // namespace kiln::graph::ops

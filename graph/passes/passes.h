// Graph passes: each takes a graph and returns a new, equivalent graph plus a
// report of what it changed. Graph inputs and outputs keep their names and
// order, so a model's interface never changes under a pass.
#pragma once

#include "graph/ir.h"
#include "graph/passes/weight_memo.h"

#include <kiln/settings.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln::graph::passes {

// What one pass did, for logs and `kiln explain`.
struct PassReport {
  std::string pass;                  // "fold_batch_norm"
  int changes = 0;                   // nodes folded, fused or removed
  std::vector<std::string> details;  // one human-readable line per change
};

struct PassResult {
  Graph graph;
  PassReport report;
};

struct PipelineResult {
  Graph graph;
  std::vector<PassReport> reports;  // in the order the passes ran
};

// A choice a pass makes per node by a fixed rule, which a chooser (the
// autotuner, in max-autotune) may make instead: Winograd or direct for a 3x3
// convolution, packed or plain weights for a MatMul. The pass asks the
// chooser for every node it could rewrite, the rule's own "no" included.
struct GraphChoice {
  std::string pass;                  // "winograd", "pack_matmul_weights"
  const Graph* graph = nullptr;      // the graph the pass runs on
  const Node* node = nullptr;        // the node it may rewrite
  std::vector<std::string> options;  // winograd: "direct", "f2", "f4" as the node allows; pack: "plain", "packed"
  std::string rule;                  // the pass's own choice, one of options
};
// Returns one of choice.options; any other answer keeps the rule's choice.
using GraphChooser = std::function<std::string(const GraphChoice&)>;

// Elements one fold may create (1 GiB of f32), at import and in compile():
// a node with larger outputs stays a node and computes them when it runs, so
// a small file cannot make the compiler allocate without bound.
inline constexpr std::int64_t kMaxFoldElements = std::int64_t{1} << 28;

// Runs the graph's f32 computation in `to` (f16 or bf16), as PyTorch's
// model.half() would: every f32 tensor (weights, activations, subgraphs')
// becomes `to`, and a Cast or EyeLike making f32 makes `to`. With
// keep_io_types, f32 inputs and outputs keep their type (and names), a Cast
// inserted after each input and before each output; the report lists them.
// Kernels compute 16-bit tensors in f32 and round what they store.
struct FloatTypeOptions {
  DType to = DType::f16;
  bool keep_io_types = true;
};
PassResult convert_float_type(const Graph& graph, const FloatTypeOptions& options);

// Evaluates every node whose inputs are all constants (and whose outputs
// stay within kMaxFoldElements) with its reference implementation and turns
// its outputs into constants; removes Identity nodes.
PassResult fold_constants(const Graph& graph);

// Folds a BatchNormalization into the Conv (constant weight, optional constant
// bias, no activation) whose output only it reads: the Conv gets scaled
// weights and a bias, and the BatchNormalization disappears.
PassResult fold_batch_norm(const Graph& graph);

// Gives a Conv or Gemm whose output only a Relu reads activation="Relu" and
// removes the Relu.
PassResult fuse_activation(const Graph& graph);

// A convolution's geometry, as the kernel templates see it.
struct ConvGeometry {
  std::int64_t batch = 1, in_channels = 0, out_channels = 0, groups = 1;
  std::int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  std::int64_t kernel_h = 1, kernel_w = 1;
  std::int64_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  std::int64_t pad_top = 0, pad_left = 0;
  // The matrix instructions' input type the node may use: its 16-bit type
  // ("f16", "bf16") or its f32_products attribute; "" for none.
  std::string matrix_inputs{};
};

// What passes ask of the kernel templates' heuristics, which the graph layer
// cannot include: the compiler answers for its target (lower::TargetPolicy,
// src/lower/target_policy.h). A pass whose question is unset does nothing.
struct TemplateQueries {
  // Whether the direct convolution template, the one kernel that reads
  // OIhw4o weights, computes this convolution.
  std::function<bool(const ConvGeometry&)> conv_uses_direct_template;
};

// Gives a Conv with a constant weight that the direct convolution template
// computes (as `templates` answers; with >= 4 output channels per group) the
// weight packed as OIhw4o, with weight_layout="OIhw4o" and out_channels=M
// (graph/ops/conv.cpp).
PassResult pack_weights(const Graph& graph, const TemplateQueries& templates);

// Computes only the slice a one-index constant Gather keeps (ViT's class
// token after its last block) through the chain of ops before it, as far
// back as every reader of a value needs that same slice: elementwise ops,
// LayerNormalization, MatMul, Reshape, Transpose, Attention (its queries)
// and one-index Gathers. Exact.
PassResult narrow_before_gather(const Graph& graph);

// Gives a MatMul whose B is a constant f32 [K, N] (N a multiple of 16, A of
// rank >= 2) B packed as NK16n [N / 16, K, 16] with weight_layout="NK16n"
// (graph/weight_layouts.h). The rule packs every such MatMul (pack) or none;
// a chooser, when given, decides per MatMul ("plain" or "packed").
struct PackMatMulOptions {
  bool pack = true;
  GraphChooser chooser{};
};
PassResult pack_matmul_weights(const Graph& graph, const PackMatMulOptions& options = {});

// Cuts constants larger than a device binds in one storage buffer, where
// they are a MatMul's or Gemm's B (along N) or a Gather's table (along its
// rows), into parts that fit, computed part by part and joined (exact).
// Other constants that large are left for the executor to refuse.
struct SplitWeightsOptions {
  std::uint64_t max_binding_bytes = 0;  // 0: no limit, nothing to do
};
PassResult split_large_weights(const Graph& graph, const SplitWeightsOptions& options);

// Removes nodes and constants that no graph output depends on. Graph inputs
// are kept even when unused: they are the model's interface.
PassResult eliminate_dead_code(const Graph& graph);

// Replaces the LayerNorm that torch.onnx.export spells out (ReduceMean, Sub,
// Pow 2, ReduceMean, Add eps, Sqrt, Div, optional Mul scale and Add bias, every
// intermediate read once) with one LayerNormalization.
PassResult recognise_layer_norm(const Graph& graph);

// Replaces the exact GELU that torch.onnx.export spells out (Div sqrt(2), Erf,
// Add 1, Mul x, Mul 0.5, every intermediate read once) with one Gelu.
PassResult recognise_gelu(const Graph& graph);

// Replaces SiLU as torch.onnx.export spells it, Mul(x, Sigmoid(x)) in either
// operand order with the Sigmoid read by that Mul only, with one Silu (a kiln
// op), which is x's only reader and so fuses into x's producer.
//
PassResult recognise_silu(const Graph& graph);

// Moves a per-input-channel scale of a batch-1 Conv's input (Mul(x, s), s
// [1, C, 1, 1], the Mul read by that Conv only: squeeze-and-excitation's
// gate) onto the Conv's constant OIhw weight, Conv(x, Mul(W, s)), where the
// weight has fewer elements than x and x has at least 16384.
//
PassResult scale_conv_weights(const Graph& graph);

// Replaces a Transpose that moves only axes of extent 1 (the linear order of
// the elements is unchanged) with a Reshape, a view.
PassResult transpose_to_reshape(const Graph& graph);

// Drops the kernel rows/columns of a Conv with a constant OIHW weight that
// read only padding for every output (large dilations on small maps: a 3x3
// ASPP branch at rate 24 on 14x14 becomes a 1x1 convolution), adjusting
// pads so the output shape is unchanged. Exact: the dropped taps read zeros.
PassResult trim_conv_window(const Graph& graph);

// Rewrites a 1x1 group-1 Conv with a constant weight, a stride and no
// padding (at least 16 channels each side, at least 128 output pixels) as a strided Slice of its input
// and a 1x1 stride-1 Conv, a GEMM with contiguous loads. Exact.
//
PassResult slice_strided_pointwise_conv(const Graph& graph);

// Drops a Resize whose output shape equals its input's (the identity under
// every mode and coordinate transformation but tf_crop_and_resize).
PassResult drop_identity_resize(const Graph& graph);

// Splits a 1x1 Conv of channel-concatenated inputs into a sum of Convs of the
// parts and moves each part's Conv before the part's upsampling Resize (1x1
// convolution and Resize commute), so it runs at the lower resolution.
//
PassResult conv_before_upsample(const Graph& graph);

// Replaces scaled dot-product attention, MatMul(Softmax(MatMul(Q, K^T) *
// scale [+ mask]), V) with the scale as a scalar Mul or Div on the scores, Q
// or K^T and every intermediate read once, with one Attention.
//
PassResult recognise_attention(const Graph& graph);

// Rewrites a 3x3 stride-1 group-1 Conv (any dilation) with a constant weight
// and enough channels and multiply-adds (WinogradRule) as Winograd
// F(4x4, 3x3) or F(2x2, 3x3): WinogradInput, a MatMul of the transformed
// weight [(m+2)^2, K, C], and WinogradOutput (bias and activation), kiln ops
// (graph/ops/winograd.cpp).
// Runs before pack_weights, which then no longer sees those Convs.
// With a chooser, every Conv the Winograd ops can compute (the channel and
// multiply-add thresholds are the rule's, not limits) is offered: "direct",
// "f2" and "f4" (not with max_tile 2), each where its transformed weight fits.
//
//
// When the rewrite pays, and what the GEMM and the device need of its
// shapes: the target policy (src/lower/target_policy.h) fills the rule for
// the device. The defaults are the CPU class's, where the thresholds were
// measured (docs/benchmarks/pass-thresholds.md).
struct WinogradRule {
  // Below these channel counts the GEMM is too thin to beat the direct
  // convolution template.
  std::int64_t min_in_channels = 64;
  std::int64_t min_out_channels = 64;
  // The rewrite adds two dispatches to save a third of the convolution's
  // time or less: the convolution must do at least this many multiply-adds.
  std::int64_t min_multiply_adds = std::int64_t{8} << 20;
  // The GEMM must do at most this fraction of the direct convolution's
  // multiplies: its transforms and two extra dispatches cost the rest.
  std::int64_t max_multiply_ratio_numerator = 7;
  std::int64_t max_multiply_ratio_denominator = 10;
  // F(4x4) on maps whose sub-grids (one per dilation phase) are at least
  // this many outputs along both axes; smaller ones take F(2x2).
  std::int64_t min_f4_extent = 14;
  // The GEMM's columns (tiles) are padded to a multiple of this, so that the
  // GEMM heuristic keeps its widest register tiles (its answer for the
  // device: shaders::gemm_column_multiple).
  std::int64_t column_multiple = 16;
  // The transformed weight U [n*n, K, C] must fit one storage buffer: the
  // device's, and at most the 2^27 bytes every Vulkan device binds, so that a
  // plan's weights bind wherever its SPIR-V runs.
  std::int64_t max_weight_bytes = std::int64_t{1} << 27;
};

struct WinogradOptions {
  WinogradRule rule{};
  int max_tile = 4;  // 4: F(4x4, 3x3) where the map allows, else F(2x2); 2: F(2x2) only
  // Where the transformed weight U comes from. false: a constant computed by
  // the pass (compile()); true: a WinogradWeight node (graph/ops/winograd.cpp)
  // that computes it from the weight every call, as a vendor library's eager
  // Winograd does, with no ahead-of-time work (eager mode).
  bool runtime_weight_transform = false;
  GraphChooser chooser{};
  // Transformed weights shared with the model's other plans (null: each computed here).
  std::shared_ptr<WeightMemo> weight_memo{};
};
PassResult winograd(const Graph& graph, const WinogradOptions& options = {});

// Marks the f32 Conv, MatMul and Gemm nodes whose products may run on the
// device's matrix units in a narrower input type (attribute "f32_products":
// "tf32" or "bf16"), as PyTorch's precision settings allow:
// conv_allow_tf32 (convolutions: TF32), float32_matmul_precision (MatMul and
// Gemm: high TF32; medium bf16, or TF32 where the device has no bf16 units;
// highest none). Nodes with 16-bit operands take their own type's
// instruction and are left alone. Lowering gives such a node the matrix
// instruction of that type (shaders/heuristic.cpp); later passes keep the
// attribute (winograd gives its MatMul the convolution's).
struct F32ProductOptions {
  std::vector<std::string> matrix_inputs{};  // the input types of the device's matrix units
  bool conv_allow_tf32 = true;
  std::string matmul_precision = "highest";  // highest, high, medium
};
PassResult choose_f32_products(const Graph& graph, const F32ProductOptions& options);
// Whether the device has matrix units with TF32 or bf16 inputs.
bool has_f32_product_units(const F32ProductOptions& options);
// The narrowest input type the options allow an f32 node of `op` ("Conv",
// "MatMul", "Gemm") on their device: "tf32", "bf16", or "" (f32).
std::string allowed_f32_products(std::string_view op, const F32ProductOptions& options);
// The options as `settings` give them, for a device with matrix units of `matrix_inputs`.
F32ProductOptions f32_product_options(const Settings& settings, std::vector<std::string> matrix_inputs);

// The default pipeline of compile(): choose_f32_products, fold_constants, fold_batch_norm,
// fuse_activation, drop_identity_resize, conv_before_upsample,
// trim_conv_window, slice_strided_pointwise_conv, winograd, pack_weights,
// eliminate_dead_code, recognise_layer_norm, recognise_gelu, recognise_silu,
// scale_conv_weights, recognise_attention, narrow_before_gather,
// transpose_to_reshape, pack_matmul_weights (last, as the recognisers match MatMuls on plain
// weights). The recognisers drop the constants only their patterns read.
// Each result is verified; a pass that produces an invalid graph throws
// Error(Internal).
//
// Each pass runs only when its setting is on (include/kiln/settings.h: the
// settings are named after the passes; slice_strided_conv and narrow_gather
// for short); a pass switched off reports the setting and where its value
// came from. Passes never read the environment.
//
// The device's facts come from the compiler's target policy
// (src/lower/target_policy.h): its class, its largest binding, the
// templates' answers and the Winograd rule. Layout choices depend on the device class (`cpu_device`): with
// pack_matmul_weights=auto, NK16n MatMul weights are chosen for CPU devices
// only, where they were measured faster (docs/benchmarks/pass-thresholds.md);
// GPU GEMMs stage tiles of a row-major B in shared memory, and a
// batch of 16-column GEMMs would leave their 64-wide tiles three-quarters
// empty. Its report then says why it did nothing.
//
// A chooser (max-autotune) decides per node where winograd and
// pack_matmul_weights have a choice: winograd while its setting is on,
// pack_matmul_weights while its setting is auto (on any device; the rule's
// answer stays the device-kind one above). Without one, the rules decide.
struct PipelineOptions {
  bool cpu_device = false;
  std::uint64_t max_binding_bytes = 0;  // the device's largest storage buffer (split_large_weights); 0: none
  TemplateQueries templates{};          // the heuristics' answers (pack_weights)
  WinogradRule winograd{};              // when winograd rewrites a Conv on this device
  Settings settings{};
  GraphChooser chooser{};
  std::shared_ptr<WeightMemo> weight_memo{};  // WinogradOptions::weight_memo
  std::vector<std::string> matrix_inputs{};  // the device's matrix units' input types (choose_f32_products)
};
PipelineResult run_compile_passes(const Graph& graph, const PipelineOptions& options = {});

// Eager mode's algorithm choices (eager_passes.cpp): eager stays op by op,
// one kernel per node, with no fusion, folding or weight work ahead of time,
// but picks each op's algorithm as a vendor library's eager path does
// (cuDNN's heuristic: Winograd for 3x3 convolutions). Today that is the
// winograd pass with the weight transformed every call: a Conv it takes
// becomes four dispatches (WinogradWeight, WinogradInput, MatMul,
// WinogradOutput). Each result is verified as in run_compile_passes.
struct EagerPassOptions {
  bool eager_winograd = true;  // false: every Conv stays the direct convolution
  WinogradRule winograd{};     // as in compiled mode, for the device
  // The device's largest storage buffer: weights larger are split to run at
  // all (split_large_weights, not a choice of algorithm); 0: none.
  std::uint64_t max_binding_bytes = 0;
  // Eager mode computes f32 products as compiled mode does (PyTorch's eager
  // follows the same precision settings): choose_f32_products.
  F32ProductOptions f32_products{};
};
PipelineResult run_eager_passes(const Graph& graph, const EagerPassOptions& options = {});

// "fold_batch_norm: 20 changes" followed by the detail lines, indented.
std::string report_str(const PassReport& report);

}  // namespace kiln::graph::passes

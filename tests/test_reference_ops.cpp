#define BOOST_TEST_MODULE reference_ops
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <optional>
#include <string>

#include "graph/op_registry.h"

using namespace kiln;
using namespace kiln::graph;

namespace {

using Ints = std::vector<std::int64_t>;
using Floats = std::vector<float>;

Attributes attrs_of(std::initializer_list<std::pair<std::string, Attribute>> list) {
  Attributes attrs;
  for (const auto& [name, value] : list) attrs.set(name, value);
  return attrs;
}

Tensor f32(Shape shape, Floats values) { return Tensor::from_f32(std::move(shape), std::move(values)); }

// 0, 1, 2, ... (or `start`, `start + 1`, ...) in a tensor of this shape.
Tensor iota(Shape shape, float start = 0.0f) {
  Tensor t(DType::f32, std::move(shape));
  auto v = t.values<float>();
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<float>(i);
  return t;
}

// Runs one op's reference; std::nullopt is an omitted optional input.
Tensor run(const std::string& op, const std::vector<std::optional<Tensor>>& inputs, Attributes attrs = {}) {
  Node node;
  node.op = op;
  node.name = op;
  node.attrs = std::move(attrs);
  std::vector<Tensor> args;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    node.inputs.push_back(inputs[i] ? static_cast<ValueId>(i) : -1);
    args.push_back(inputs[i].value_or(Tensor()));
  }
  std::vector<Tensor> out = get_op(op).reference(node, args);
  BOOST_REQUIRE(out.size() == 1u);
  return out[0];
}

void expect_values(const Tensor& actual, const Shape& shape, const Floats& expected, float tolerance = 1e-6f) {
  BOOST_TEST(actual.shape() == shape);
  BOOST_REQUIRE(actual.numel() == static_cast<std::int64_t>(expected.size()));
  auto v = actual.values<float>();
  for (std::size_t i = 0; i < expected.size(); ++i)
    BOOST_TEST(std::fabs(v[i] - expected[i]) <= tolerance,
               "element " << i << ": got " << v[i] << ", expected " << expected[i]);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(elementwise)

BOOST_AUTO_TEST_CASE(add_broadcasts_2x1x3_with_4x1) {
  const Tensor a = iota({2, 1, 3});               // a[i, 0, k] = 3i + k
  const Tensor b = f32({4, 1}, {0, 10, 20, 30});  // b[j, 0] = 10j
  const Tensor y = run("Add", {a, b});
  Floats expected;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) expected.push_back(static_cast<float>(3 * i + k + 10 * j));
  expect_values(y, {2, 4, 3}, expected);
  BOOST_TEST(y.values<float>()[5] == 12.0f);  // [0, 1, 2]: 2 + 10
}

BOOST_AUTO_TEST_CASE(sub_mul_div_with_a_scalar) {
  const Tensor x = f32({3}, {1, 4, -6});
  const Tensor two = Tensor::scalar_f32(2.0f);
  expect_values(run("Sub", {x, two}), {3}, {-1, 2, -8});
  expect_values(run("Sub", {two, x}), {3}, {1, -2, 8});
  expect_values(run("Mul", {x, two}), {3}, {2, 8, -12});
  expect_values(run("Div", {x, two}), {3}, {0.5f, 2, -3});
}

BOOST_AUTO_TEST_CASE(integer_arithmetic) {
  const Tensor a = Tensor::from_i64({3}, {7, -7, 9});
  const Tensor b = Tensor::from_i64({1}, {2});
  const Tensor q = run("Div", {a, b});
  BOOST_TEST(dtype_name(q.dtype()) == "i64");
  const std::vector<std::int64_t> expected{3, -3, 4};  // truncation toward zero
  BOOST_TEST(std::vector<std::int64_t>(q.values<std::int64_t>().begin(), q.values<std::int64_t>().end()) == expected,
             boost::test_tools::per_element());
  BOOST_TEST(run("Add", {a, b}).values<std::int64_t>()[1] == -5);
  BOOST_CHECK_THROW(run("Div", {a, Tensor::from_i64({1}, {0})}), Error);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(activations)

BOOST_AUTO_TEST_CASE(relu_sigmoid_tanh) {
  const Tensor x = f32({4}, {-2, 0, 0.5f, 1});
  expect_values(run("Relu", {x}), {4}, {0, 0, 0.5f, 1});
  // sigmoid(-2) = 1 / (1 + e^2), sigmoid(0) = 1/2, sigmoid(1) = e / (1 + e)
  expect_values(run("Sigmoid", {x}), {4}, {0.11920292f, 0.5f, 0.62245933f, 0.7310586f});
  expect_values(run("Tanh", {x}), {4}, {-0.9640276f, 0, 0.4621172f, 0.7615942f});
}

BOOST_AUTO_TEST_CASE(gelu_exact_and_tanh) {
  const Tensor x = f32({3}, {-1, 0, 1});
  // x * Phi(x): Phi(1) = 0.8413447 (the standard normal CDF).
  expect_values(run("Gelu", {x}), {3}, {-0.15865525f, 0, 0.8413447f});
  expect_values(run("Gelu", {x}, attrs_of({{"approximate", std::string("tanh")}})), {3}, {-0.15880801f, 0, 0.8411920f});
}

BOOST_AUTO_TEST_CASE(clip) {
  const Tensor x = f32({5}, {-3, -1, 0, 4, 9});
  expect_values(run("Clip", {x}, attrs_of({{"min", 0.0}, {"max", 6.0}})), {5}, {0, 0, 0, 4, 6});
  expect_values(run("Clip", {x}, attrs_of({{"min", -2.0}})), {5}, {-2, -1, 0, 4, 9});
  expect_values(run("Clip", {x}), {5}, {-3, -1, 0, 4, 9});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(convolution)

BOOST_AUTO_TEST_CASE(conv3x3_on_4x4_with_pads) {
  // Ones weight: each output is the sum of the 3x3 neighbourhood inside the input.
  const Tensor x = iota({1, 1, 4, 4}, 1.0f);  // 1..16
  const Tensor w = f32({1, 1, 3, 3}, Floats(9, 1.0f));
  expect_values(run("Conv", {x, w}, attrs_of({{"pads", Ints{1, 1, 1, 1}}})), {1, 1, 4, 4},
                {14, 24, 30, 22, 33, 54, 63, 45, 57, 90, 99, 69, 46, 72, 78, 54});
  // No padding: only the 4 full windows.
  expect_values(run("Conv", {x, w}), {1, 1, 2, 2}, {54, 63, 90, 99});
  // Stride 2 with top/left padding only: windows start at -1 and 1.
  expect_values(run("Conv", {x, w, f32({1}, {0.5f})}, attrs_of({{"pads", Ints{1, 1, 0, 0}}, {"strides", Ints{2, 2}}})),
                {1, 1, 2, 2}, {14.5f, 30.5f, 57.5f, 99.5f});
}

BOOST_AUTO_TEST_CASE(grouped_conv) {
  // Two groups of one channel: out0 = 2 * in0 + 1, out1 = -in1 - 1.
  const Tensor x = iota({1, 2, 2, 2});
  const Tensor w = f32({2, 1, 1, 1}, {2, -1});
  const Tensor b = f32({2}, {1, -1});
  expect_values(run("Conv", {x, w, b}, attrs_of({{"group", std::int64_t{2}}})), {1, 2, 2, 2},
                {1, 3, 5, 7, -5, -6, -7, -8});
}

BOOST_AUTO_TEST_CASE(multi_channel_conv_sums_over_channels) {
  // 1x1 conv mixing 2 input channels into 3 outputs: y_m = sum_c w[m, c] * x_c.
  const Tensor x = f32({1, 2, 1, 2}, {1, 2, 10, 20});
  const Tensor w = f32({3, 2, 1, 1}, {1, 0, 0, 1, 1, -1});
  expect_values(run("Conv", {x, w}), {1, 3, 1, 2}, {1, 2, 10, 20, -9, -18});
}

BOOST_AUTO_TEST_CASE(dilated_conv) {
  // 2x2 ones kernel with dilation 2 on 0..24 (5x5): y[i, j] = x[i, j] + x[i, j+2] + x[i+2, j] + x[i+2, j+2]
  //                                                         = 4 (5i + j) + 24.
  const Tensor x = iota({1, 1, 5, 5});
  const Tensor w = f32({1, 1, 2, 2}, Floats(4, 1.0f));
  Floats expected;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) expected.push_back(static_cast<float>(4 * (5 * i + j) + 24));
  expect_values(run("Conv", {x, w}, attrs_of({{"dilations", Ints{2, 2}}})), {1, 1, 3, 3}, expected);
}

BOOST_AUTO_TEST_CASE(conv_with_fused_relu) {
  const Tensor x = f32({1, 1, 1, 3}, {1, -2, 3});
  const Tensor w = f32({1, 1, 1, 1}, {-1});
  const Tensor b = f32({1}, {0.5f});
  expect_values(run("Conv", {x, w, b}), {1, 1, 1, 3}, {-0.5f, 2.5f, -2.5f});
  expect_values(run("Conv", {x, w, b}, attrs_of({{"activation", std::string("Relu")}})), {1, 1, 1, 3}, {0, 2.5f, 0});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(matrix_products)

// ConvTranspose scatters each input pixel's weighted kernel: with stride 2
// and a 2x2 kernel of ones every pixel becomes a 2x2 block; with stride 1 the
// blocks overlap and add; pads trim the borders, output_padding extends the
// end (with the bias only), and groups keep channels apart.
BOOST_AUTO_TEST_CASE(conv_transpose_scatters_the_kernel) {
  const Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  const Tensor ones = f32({1, 1, 2, 2}, {1, 1, 1, 1});
  expect_values(run("ConvTranspose", {x, ones}, attrs_of({{"strides", Ints{2, 2}}})), {1, 1, 4, 4},
                {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  expect_values(run("ConvTranspose", {x, ones}), {1, 1, 3, 3}, {1, 3, 2, 4, 10, 6, 3, 7, 4});
  expect_values(run("ConvTranspose", {x, ones}, attrs_of({{"pads", Ints{1, 1, 1, 1}}})), {1, 1, 1, 1}, {10});
  expect_values(run("ConvTranspose", {x, ones, f32({1}, {0.5f})},
                    attrs_of({{"strides", Ints{2, 2}}, {"pads", Ints{0, 0, 0, 1}}, {"output_padding", Ints{1, 0}}})),
                {1, 1, 5, 3},
                {1.5f, 1.5f, 2.5f, 1.5f, 1.5f, 2.5f, 3.5f, 3.5f, 4.5f, 3.5f, 3.5f, 4.5f, 0.5f, 0.5f, 0.5f});
  expect_values(run("ConvTranspose", {f32({1, 2, 1, 1}, {1, 2}), f32({2, 1, 1, 1}, {3, 5})},
                    attrs_of({{"group", std::int64_t{2}}})),
                {1, 2, 1, 1}, {3, 10});
  BOOST_CHECK_THROW(run("ConvTranspose", {x, ones}, attrs_of({{"pads", Ints{2, 0, 1, 0}}})), kiln::Error);
}

BOOST_AUTO_TEST_CASE(gemm_with_transposes_alpha_and_beta) {
  // A' = [[1, 2], [3, 4]], B' = [[5, 6], [7, 8]], A'B' = [[19, 22], [43, 50]].
  const Tensor a = f32({2, 2}, {1, 3, 2, 4});  // A = A'^T
  const Tensor b = f32({2, 2}, {5, 7, 6, 8});  // B = B'^T
  const Tensor c = f32({2}, {1, -1});          // broadcast along rows
  const Attributes attrs =
      attrs_of({{"transA", std::int64_t{1}}, {"transB", std::int64_t{1}}, {"alpha", 2.0}, {"beta", 0.5}});
  expect_values(run("Gemm", {a, b, c}, attrs), {2, 2}, {38.5f, 43.5f, 86.5f, 99.5f});
  // Without C, and without transposes: A B with A = [[1, 3], [2, 4]], B = [[5, 7], [6, 8]].
  expect_values(run("Gemm", {a, b, std::nullopt}), {2, 2}, {23, 31, 34, 46});
}

BOOST_AUTO_TEST_CASE(gemm_rectangular_and_column_bias) {
  // [1, 3] x [3, 2] + C[1, 1] broadcast to [1, 2].
  const Tensor a = f32({1, 3}, {1, 2, 3});
  const Tensor b = f32({3, 2}, {1, 0, 0, 1, 1, 1});
  expect_values(run("Gemm", {a, b, f32({1, 1}, {10})}), {1, 2}, {14, 15});
}

BOOST_AUTO_TEST_CASE(gemm_with_fused_relu) {
  const Tensor a = f32({1, 2}, {1, -1});
  const Tensor identity = f32({2, 2}, {1, 0, 0, 1});
  expect_values(run("Gemm", {a, identity}, attrs_of({{"activation", std::string("Relu")}})), {1, 2}, {1, 0});
}

BOOST_AUTO_TEST_CASE(matmul_batched_broadcast) {
  // A[i] = (i + 1) * I (shape [2, 1, 2, 2]), B[j] (shape [3, 2, 2]): Y[i, j] = (i + 1) * B[j].
  const Tensor a = f32({2, 1, 2, 2}, {1, 0, 0, 1, 2, 0, 0, 2});
  const Tensor b = iota({3, 2, 2}, 1.0f);
  Floats expected;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int e = 0; e < 4; ++e) expected.push_back(static_cast<float>((i + 1) * (4 * j + e + 1)));
  expect_values(run("MatMul", {a, b}), {2, 3, 2, 2}, expected);
}

BOOST_AUTO_TEST_CASE(matmul_vectors) {
  const Tensor v = f32({3}, {1, 2, 3});
  expect_values(run("MatMul", {v, v}), {}, {14});
  const Tensor m = f32({2, 3}, {1, 0, 0, 0, 1, 1});
  expect_values(run("MatMul", {m, v}), {2}, {1, 5});
  expect_values(run("MatMul", {v, f32({3, 2}, {1, 0, 0, 1, 1, 1})}), {2}, {4, 5});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(softmax_and_normalization)

BOOST_AUTO_TEST_CASE(softmax_of_1_2_3) {
  expect_values(run("Softmax", {f32({3}, {1, 2, 3})}), {3}, {0.09003057f, 0.24472847f, 0.66524096f});
  // Large logits do not overflow.
  expect_values(run("Softmax", {f32({2}, {1000, 1000})}), {2}, {0.5f, 0.5f});
}

BOOST_AUTO_TEST_CASE(softmax_along_axis_0) {
  // Columns [1, 1], [0, ln 3]: softmax down each column.
  const float ln3 = std::log(3.0f);
  expect_values(run("Softmax", {f32({2, 2}, {1, 0, 1, ln3})}, attrs_of({{"axis", std::int64_t{0}}})), {2, 2},
                {0.5f, 0.25f, 0.5f, 0.75f});
}

BOOST_AUTO_TEST_CASE(layer_norm) {
  // [1, 2, 3, 4]: mean 2.5, variance 1.25, (x - 2.5) / sqrt(1.25).
  // [0, 0, 2, 2]: mean 1, variance 1, x - 1.
  const Tensor x = f32({2, 4}, {1, 2, 3, 4, 0, 0, 2, 2});
  const Tensor scale = f32({4}, {1, 1, 2, 2});
  const Tensor bias = f32({4}, {0, 0, 0, 1});
  expect_values(run("LayerNormalization", {x, scale, bias}, attrs_of({{"epsilon", 0.0}})), {2, 4},
                {-1.3416408f, -0.4472136f, 0.8944272f, 3.6832816f, -1, -1, 2, 3}, 1e-5f);
  // Normalising over both dims of a [1, 2, 2] tensor, no bias.
  expect_values(run("LayerNormalization", {f32({1, 2, 2}, {1, 2, 3, 4}), f32({2, 2}, {1, 1, 1, 1}), std::nullopt},
                    attrs_of({{"axis", std::int64_t{1}}, {"epsilon", 0.0}})),
                {1, 2, 2}, {-1.3416408f, -0.4472136f, 0.4472136f, 1.3416408f}, 1e-5f);
}

BOOST_AUTO_TEST_CASE(layer_norm_epsilon) {
  // Constant rows have variance 0: the output is the bias, epsilon keeps it finite.
  expect_values(run("LayerNormalization", {f32({1, 2}, {3, 3}), f32({2}, {1, 1}), f32({2}, {7, 8})}), {1, 2}, {7, 8});
}

BOOST_AUTO_TEST_CASE(batch_norm) {
  // Channel 0: [1, 3], mean 2, var 1, scale 1, bias 0 -> [-1, 1].
  // Channel 1: [2, 4], mean 3, var 4, scale 2, bias 1 -> [0, 2].
  const Tensor x = f32({1, 2, 1, 2}, {1, 3, 2, 4});
  const Tensor y =
      run("BatchNormalization", {x, f32({2}, {1, 2}), f32({2}, {0, 1}), f32({2}, {2, 3}), f32({2}, {1, 4})},
          attrs_of({{"epsilon", 0.0}}));
  expect_values(y, {1, 2, 1, 2}, {-1, 1, 0, 2});
  // The default epsilon 1e-5 is added to the variance.
  const Tensor z =
      run("BatchNormalization", {f32({1, 1}, {1}), f32({1}, {1}), f32({1}, {0}), f32({1}, {0}), f32({1}, {0})});
  expect_values(z, {1, 1}, {static_cast<float>(1.0 / std::sqrt(1e-5))}, 1e-2f);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(pooling)

BOOST_AUTO_TEST_CASE(max_pool_padding_never_wins) {
  // All values negative: a zero from padding would win if padding took part.
  Tensor x = iota({1, 1, 4, 4}, 1.0f);
  for (float& v : x.values<float>()) v = -v;  // x[r, c] = -(4r + c + 1)
  const Attributes attrs =
      attrs_of({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
  expect_values(run("MaxPool", {x}, attrs), {1, 1, 2, 2}, {-1, -2, -5, -6});
}

BOOST_AUTO_TEST_CASE(max_pool_ceil_mode) {
  const Tensor x = iota({1, 1, 5, 5});
  const Attributes floor_mode = attrs_of({{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}});
  expect_values(run("MaxPool", {x}, floor_mode), {1, 1, 2, 2}, {6, 8, 16, 18});
  Attributes ceil_mode = floor_mode;
  ceil_mode.set("ceil_mode", std::int64_t{1});
  // The extra last row/column of windows covers only row/column 4.
  expect_values(run("MaxPool", {x}, ceil_mode), {1, 1, 3, 3}, {6, 8, 9, 16, 18, 19, 21, 23, 24});
}

BOOST_AUTO_TEST_CASE(max_pool_ceil_mode_with_padding_and_dilation) {
  // 1x1x6x6, kernel 3, stride 2, pads 1, ceil_mode: 4 windows per axis starting at -1, 1, 3, 5.
  const Tensor x = iota({1, 1, 6, 6});
  const Attributes attrs = attrs_of({{"kernel_shape", Ints{3, 3}},
                                     {"strides", Ints{2, 2}},
                                     {"pads", Ints{1, 1, 1, 1}},
                                     {"ceil_mode", std::int64_t{1}}});
  // Window end rows: 1, 3, 5, 5 (clipped); max = x[end_r, end_c] = 6 end_r + end_c.
  const int ends[] = {1, 3, 5, 5};
  Floats expected;
  for (int r : ends)
    for (int c : ends) expected.push_back(static_cast<float>(6 * r + c));
  expect_values(run("MaxPool", {x}, attrs), {1, 1, 4, 4}, expected);
  // Dilation 2, kernel 2: y[i, j] = max(x[i, j], x[i, j+2], x[i+2, j], x[i+2, j+2]) = x[i+2, j+2].
  expect_values(
      run("MaxPool", {iota({1, 1, 4, 4})}, attrs_of({{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 2}}})),
      {1, 1, 2, 2}, {10, 11, 14, 15});
}

BOOST_AUTO_TEST_CASE(average_pool_count_include_pad_both_ways) {
  // 1..9 in 3x3, kernel 2, stride 1, pads 1: 4x4 windows.
  const Tensor x = iota({1, 1, 3, 3}, 1.0f);
  Attributes attrs = attrs_of({{"kernel_shape", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
  // Excluding padding: corner (0,0) sees only 1; edge (0,1) sees 1,2; centre (1,1) sees 1,2,4,5.
  expect_values(run("AveragePool", {x}, attrs), {1, 1, 4, 4},
                {1, 1.5f, 2.5f, 3, 2.5f, 3, 4, 4.5f, 5.5f, 6, 7, 7.5f, 7, 7.5f, 8.5f, 9});
  // Including padding: every window counts 4 taps.
  attrs.set("count_include_pad", std::int64_t{1});
  expect_values(run("AveragePool", {x}, attrs), {1, 1, 4, 4},
                {0.25f, 0.75f, 1.25f, 0.75f, 1.25f, 3, 4, 2.25f, 2.75f, 6, 7, 3.75f, 1.75f, 3.75f, 4.25f, 2.25f});
}

BOOST_AUTO_TEST_CASE(average_pool_ceil_mode_window_past_the_padding) {
  // 1x1x1x3, kernel [1, 2], stride 2, ceil_mode: windows [0, 1] and [2, 3); the last sees only x[2].
  const Tensor x = f32({1, 1, 1, 3}, {2, 4, 9});
  Attributes attrs = attrs_of({{"kernel_shape", Ints{1, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", std::int64_t{1}}});
  expect_values(run("AveragePool", {x}, attrs), {1, 1, 1, 2}, {3, 9});
  // count_include_pad counts padding, not the part beyond it (there is none here).
  attrs.set("count_include_pad", std::int64_t{1});
  expect_values(run("AveragePool", {x}, attrs), {1, 1, 1, 2}, {3, 9});
}

BOOST_AUTO_TEST_CASE(global_average_pool) {
  const Tensor x = f32({1, 2, 2, 2}, {1, 2, 3, 4, -1, -1, 5, 5});
  expect_values(run("GlobalAveragePool", {x}), {1, 2, 1, 1}, {2.5f, 2});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(shape_ops)

BOOST_AUTO_TEST_CASE(reshape_and_flatten_keep_the_order) {
  const Tensor x = iota({2, 3, 2});
  Floats order;
  for (int i = 0; i < 12; ++i) order.push_back(static_cast<float>(i));
  expect_values(run("Reshape", {x}, attrs_of({{"shape", Ints{0, -1}}})), {2, 6}, order);
  expect_values(run("Flatten", {x}, attrs_of({{"axis", std::int64_t{2}}})), {6, 2}, order);
}

BOOST_AUTO_TEST_CASE(outputs_never_alias_inputs) {
  const Tensor x = iota({2, 2});
  for (const char* op : {"Identity", "Flatten"}) {
    const Tensor y = run(op, {x});
    BOOST_TEST(y.bytes().data() != x.bytes().data(), op);
    BOOST_TEST(max_abs_diff(y.reshaped(x.shape()), x) == 0.0f, op);
  }
}

BOOST_AUTO_TEST_CASE(transpose) {
  // [[0, 1, 2], [3, 4, 5]] -> [[0, 3], [1, 4], [2, 5]]
  expect_values(run("Transpose", {iota({2, 3})}), {3, 2}, {0, 3, 1, 4, 2, 5});
  // [2, 3, 2] with perm [1, 0, 2]: y[j, i, k] = x[i, j, k] = 6i + 2j + k.
  Floats expected;
  for (int j = 0; j < 3; ++j)
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 2; ++k) expected.push_back(static_cast<float>(6 * i + 2 * j + k));
  expect_values(run("Transpose", {iota({2, 3, 2})}, attrs_of({{"perm", Ints{1, 0, 2}}})), {3, 2, 2}, expected);
  // Any dtype moves.
  const Tensor t = run("Transpose", {Tensor::from_i64({2, 2}, {1, 2, 3, 4})});
  BOOST_TEST(t.values<std::int64_t>()[1] == 3);
}

BOOST_AUTO_TEST_CASE(concat) {
  const Tensor a = f32({2, 1}, {1, 2});
  const Tensor b = f32({2, 2}, {10, 11, 20, 21});
  expect_values(run("Concat", {a, b}, attrs_of({{"axis", std::int64_t{1}}})), {2, 3}, {1, 10, 11, 2, 20, 21});
  expect_values(run("Concat", {a, b}, attrs_of({{"axis", std::int64_t{-1}}})), {2, 3}, {1, 10, 11, 2, 20, 21});
  expect_values(run("Concat", {b, b, a.reshaped({1, 2})}, attrs_of({{"axis", std::int64_t{0}}})), {5, 2},
                {10, 11, 20, 21, 10, 11, 20, 21, 1, 2});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(whole_graph)

BOOST_AUTO_TEST_CASE(run_reference_chains_ops) {
  // y = Softmax(Flatten(GlobalAveragePool(Relu(Conv(x)))))
  Graph g;
  const ValueId x = g.add_input("x", {DType::f32, {1, 1, 2, 2}});
  const ValueId w = g.add_constant("w", f32({2, 1, 1, 1}, {1, -1}));
  ValueId v = g.add_node("Conv", {x, w})[0];
  v = g.add_node("Relu", {v})[0];
  v = g.add_node("GlobalAveragePool", {v})[0];
  v = g.add_node("Flatten", {v})[0];
  v = g.add_node("Softmax", {v})[0];
  g.set_outputs({v});
  const Tensor input = f32({1, 1, 2, 2}, {1, 2, 3, -6});
  // Channel 0: relu(x) mean = 1.5; channel 1: relu(-x) mean = 1.5 -> softmax [0.5, 0.5].
  const std::vector<Tensor> out = run_reference(g, std::vector<Tensor>{input});
  BOOST_REQUIRE(out.size() == 1u);
  expect_values(out[0], {1, 2}, {0.5f, 0.5f});
}

BOOST_AUTO_TEST_SUITE_END()

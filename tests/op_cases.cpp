#include "op_cases.h"

#include <kiln/builder.h>

#include "graph/ir.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>

namespace kiln::testing {
namespace {

// Deterministic values in [lo, hi): the same on every platform.
class Values {
 public:
  explicit Values(std::uint64_t seed) : state_(seed * 6364136223846793005ull + 1442695040888963407ull) {}
  Tensor tensor(Shape shape, float lo = -1.0f, float hi = 1.0f) {
    Tensor t(DType::f32, std::move(shape));
    for (float& v : t.values<float>()) v = lo + (hi - lo) * next();
    return t;
  }

 private:
  float next() {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(state_ >> 40) / static_cast<float>(1ull << 24);
  }
  std::uint64_t state_;
};

struct CaseBuilder {
  std::vector<OpCase>& cases;
  std::uint64_t seed = 1;

  // `body` gets a builder and the model inputs; returns the outputs.
  void add(const std::string& name, std::vector<Shape> input_shapes,
           const std::function<std::vector<Builder::Value>(Builder&, Values&, std::vector<Builder::Value>&)>& body,
           float tolerance = 1e-4f, float lo = -1.0f, float hi = 1.0f) {
    Values values(seed++);
    Builder b(name);
    std::vector<Builder::Value> xs;
    std::vector<Tensor> inputs;
    for (std::size_t i = 0; i < input_shapes.size(); ++i) {
      xs.push_back(b.input("x" + std::to_string(i), DType::f32, input_shapes[i]));
      inputs.push_back(values.tensor(input_shapes[i], lo, hi));
    }
    std::vector<Builder::Value> outs = body(b, values, xs);
    cases.push_back({name, b.build(outs), std::move(inputs), tolerance});
  }
};

using V = Builder::Value;
using Vs = std::vector<V>;

void conv_cases(CaseBuilder& c) {
  struct ConvCase {
    const char* name;
    Shape x, w;
    Conv2dOptions o;
    bool bias;
    const char* activation;
  };
  const ConvCase convs[] = {
      {"Conv/3x3_pad1", {1, 3, 9, 9}, {4, 3, 3, 3}, {}, true, ""},
      {"Conv/stride2_asym_pads", {2, 4, 10, 7}, {6, 4, 3, 3}, {{2, 2}, {1, 0, 2, 1}, {1, 1}, 1}, true, ""},
      {"Conv/dilation2", {1, 2, 11, 11}, {3, 2, 3, 3}, {{1, 1}, {2, 2, 2, 2}, {2, 2}, 1}, false, ""},
      {"Conv/groups2", {1, 4, 8, 8}, {6, 2, 3, 3}, {{1, 1}, {1, 1, 1, 1}, {1, 1}, 2}, true, ""},
      {"Conv/depthwise", {1, 8, 7, 7}, {8, 1, 3, 3}, {{2, 2}, {1, 1, 1, 1}, {1, 1}, 8}, true, ""},
      {"Conv/1x1", {1, 16, 5, 5}, {8, 16, 1, 1}, {}, false, ""},
      {"Conv/7x7_stride2_relu", {1, 3, 16, 16}, {8, 3, 7, 7}, {{2, 2}, {3, 3, 3, 3}, {1, 1}, 1}, true, "Relu"},
  };
  for (const ConvCase& cc : convs) {
    c.add(cc.name, {cc.x}, [&](Builder& b, Values& v, Vs& xs) {
      V w = b.constant("w", v.tensor(cc.w));
      std::optional<V> bias;
      if (cc.bias) bias = b.constant("b", v.tensor({cc.w[0]}));
      if (std::string(cc.activation).empty()) return Vs{b.conv2d(xs[0], w, bias, cc.o)};
      graph::Attributes a;
      a.set("strides", cc.o.stride);
      a.set("pads", cc.o.padding);
      a.set("dilations", cc.o.dilation);
      a.set("group", cc.o.groups);
      a.set("activation", std::string(cc.activation));
      std::vector<std::optional<V>> ins = {xs[0], w};
      if (bias) ins.push_back(*bias);
      return b.op("Conv", ins, a);
    });
  }
}

void conv_transpose_cases(CaseBuilder& c) {
  struct ConvTransposeCase {
    const char* name;
    Shape x, w;  // w: [C, M / group, kH, kW]
    std::vector<std::int64_t> strides, pads, dilations, output_padding;
    std::int64_t group;
    bool bias, relu;
  };
  const ConvTransposeCase cases[] = {
      {"ConvTranspose/3x3", {1, 3, 5, 5}, {3, 4, 3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, {0, 0}, 1, true, false},
      {"ConvTranspose/stride2_pads_output_padding", {2, 4, 4, 3}, {4, 3, 3, 3}, {2, 2}, {1, 1, 1, 0}, {1, 1}, {1, 1}, 1,
       true, false},
      {"ConvTranspose/2x2_stride2_relu", {1, 8, 6, 6}, {8, 4, 2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, {0, 0}, 1, true, true},
      {"ConvTranspose/groups2_dilation2", {1, 4, 5, 4}, {4, 3, 3, 2}, {1, 2}, {1, 0, 0, 1}, {2, 2}, {0, 1}, 2, false,
       false},
      {"ConvTranspose/stride3_depthwise", {1, 6, 3, 3}, {6, 1, 4, 4}, {3, 3}, {1, 1, 1, 1}, {1, 1}, {2, 0}, 6, true, false},
  };
  for (const ConvTransposeCase& ct : cases) {
    c.add(ct.name, {ct.x}, [&](Builder& b, Values& v, Vs& xs) {
      graph::Attributes a;
      a.set("strides", ct.strides);
      a.set("pads", ct.pads);
      a.set("dilations", ct.dilations);
      a.set("output_padding", ct.output_padding);
      a.set("group", ct.group);
      std::vector<std::optional<V>> ins = {xs[0], b.constant("w", v.tensor(ct.w))};
      if (ct.bias) ins.push_back(b.constant("b", v.tensor({ct.w[1] * ct.group})));
      Vs y = b.op("ConvTranspose", ins, a);
      return ct.relu ? Vs{b.relu(y[0])} : y;
    });
  }
}

void matmul_cases(CaseBuilder& c) {
  c.add("MatMul/2d", {{5, 7}, {7, 3}}, [](Builder& b, Values&, Vs& xs) { return Vs{b.matmul(xs[0], xs[1])}; });
  c.add("MatMul/batched_broadcast", {{2, 1, 4, 6}, {3, 6, 5}},
        [](Builder& b, Values&, Vs& xs) { return Vs{b.matmul(xs[0], xs[1])}; });
  c.add("MatMul/vector", {{6}, {2, 6, 3}}, [](Builder& b, Values&, Vs& xs) { return Vs{b.matmul(xs[0], xs[1])}; });
  c.add("Gemm/bias", {{4, 8}}, [](Builder& b, Values& v, Vs& xs) {
    return Vs{b.gemm(xs[0], b.constant("w", v.tensor({8, 5})), b.constant("c", v.tensor({5})))};
  });
  c.add("Gemm/transB_alpha_beta", {{3, 6}}, [](Builder& b, Values& v, Vs& xs) {
    return Vs{b.gemm(xs[0], b.constant("w", v.tensor({4, 6})), b.constant("c", v.tensor({3, 4})),
                     {.trans_a = false, .trans_b = true, .alpha = 0.5f, .beta = 2.0f})};
  });
  c.add("Gemm/transA_no_bias", {{6, 3}}, [](Builder& b, Values& v, Vs& xs) {
    return Vs{b.gemm(xs[0], b.constant("w", v.tensor({6, 2})), std::nullopt, {.trans_a = true})};
  });
  c.add("Gemm/relu", {{2, 10}}, [](Builder& b, Values& v, Vs& xs) {
    graph::Attributes a;
    a.set("transB", std::int64_t{1});
    a.set("activation", std::string("Relu"));
    return b.op("Gemm", {xs[0], b.constant("w", v.tensor({7, 10})), b.constant("c", v.tensor({7}))}, a);
  });
}

void elementwise_cases(CaseBuilder& c) {
  c.add("Add/same_shape", {{2, 3, 4}, {2, 3, 4}}, [](Builder& b, Values&, Vs& xs) { return Vs{b.add(xs[0], xs[1])}; });
  c.add("Add/broadcast_channel", {{2, 5, 3, 3}, {5, 1, 1}},
        [](Builder& b, Values&, Vs& xs) { return Vs{b.add(xs[0], xs[1])}; });
  c.add("Sub/broadcast_both", {{2, 1, 3}, {4, 1}}, [](Builder& b, Values&, Vs& xs) { return Vs{b.sub(xs[0], xs[1])}; });
  c.add("Mul/scalar_constant", {{3, 4}}, [](Builder& b, Values&, Vs& xs) {
    return Vs{b.mul(xs[0], b.constant("s", Tensor::scalar_f32(-2.5f)))};
  });
  c.add("Div/broadcast", {{2, 3, 4}, {4}}, [](Builder& b, Values&, Vs& xs) { return Vs{b.div(xs[0], xs[1])}; },
        1e-4f, 0.5f, 2.0f);
  c.add("Relu", {{4, 17}}, [](Builder& b, Values&, Vs& xs) { return Vs{b.relu(xs[0])}; });
  c.add("Sigmoid", {{4, 17}}, [](Builder& b, Values&, Vs& xs) { return Vs{b.sigmoid(xs[0])}; }, 1e-4f, -8.0f, 8.0f);
  c.add("Tanh", {{4, 17}}, [](Builder& b, Values&, Vs& xs) { return Vs{b.tanh(xs[0])}; }, 1e-4f, -6.0f, 6.0f);
  c.add("Gelu/exact", {{3, 20}}, [](Builder& b, Values&, Vs& xs) { return Vs{b.gelu(xs[0])}; }, 1e-4f, -5.0f, 5.0f);
  c.add("Gelu/tanh", {{3, 20}}, [](Builder& b, Values&, Vs& xs) { return Vs{b.gelu(xs[0], true)}; }, 1e-4f, -5.0f, 5.0f);
  c.add("Clip", {{5, 9}}, [](Builder& b, Values&, Vs& xs) { return Vs{b.clip(xs[0], -0.3f, 0.6f)}; });
  c.add("BatchNormalization", {{2, 4, 3, 3}}, [](Builder& b, Values& v, Vs& xs) {
    return Vs{b.batch_norm(xs[0], b.constant("g", v.tensor({4})), b.constant("beta", v.tensor({4})),
                           b.constant("m", v.tensor({4})), b.constant("var", v.tensor({4}, 0.5f, 1.5f)))};
  });
}

void normalization_cases(CaseBuilder& c) {
  c.add("Softmax/last_axis", {{3, 10}}, [](Builder& b, Values&, Vs& xs) { return Vs{b.softmax(xs[0])}; }, 1e-5f,
        -4.0f, 4.0f);
  c.add("Softmax/axis1_of_3d", {{2, 5, 3}}, [](Builder& b, Values&, Vs& xs) { return Vs{b.softmax(xs[0], 1)}; },
        1e-5f, -4.0f, 4.0f);
  c.add("LayerNormalization/last_axis", {{2, 3, 16}}, [](Builder& b, Values& v, Vs& xs) {
    return Vs{b.layer_norm(xs[0], b.constant("s", v.tensor({16})), b.constant("b", v.tensor({16})))};
  });
  c.add("LayerNormalization/axis1", {{2, 3, 4}}, [](Builder& b, Values& v, Vs& xs) {
    return Vs{b.layer_norm(xs[0], b.constant("s", v.tensor({3, 4})), b.constant("b", v.tensor({3, 4})), 1, 1e-3f)};
  });
  c.add("LRN/size3", {{2, 5, 3, 3}}, [](Builder& b, Values&, Vs& xs) {
    graph::Attributes a;
    a.set("size", std::int64_t{3});
    a.set("alpha", 0.02);
    a.set("beta", 0.6);
    a.set("bias", 1.5);
    return b.op("LRN", {xs[0]}, a);
  });
  // ONNX's optional Mean and InvStdDev outputs (kiln's statistics=1).
  c.add("LayerNormalization/statistics", {{3, 2, 5}}, [](Builder& b, Values& v, Vs& xs) {
    graph::Attributes a;
    a.set("axis", std::int64_t{1});
    a.set("statistics", std::int64_t{1});
    return b.op("LayerNormalization", {xs[0], b.constant("s", v.tensor({2, 5}))}, a);
  });
}

void pooling_cases(CaseBuilder& c) {
  c.add("MaxPool/3x3_s2_pad1", {{1, 3, 9, 9}},
        [](Builder& b, Values&, Vs& xs) { return Vs{b.max_pool2d(xs[0], {{3, 3}, {2, 2}, {1, 1, 1, 1}})}; });
  c.add("MaxPool/ceil_mode", {{1, 2, 8, 8}},
        [](Builder& b, Values&, Vs& xs) { return Vs{b.max_pool2d(xs[0], {{3, 3}, {2, 2}, {0, 0, 0, 0}, true})}; });
  c.add("AveragePool/exclude_pad", {{1, 2, 7, 7}},
        [](Builder& b, Values&, Vs& xs) { return Vs{b.avg_pool2d(xs[0], {{3, 3}, {2, 2}, {1, 1, 1, 1}})}; });
  c.add("AveragePool/include_pad", {{1, 2, 7, 7}}, [](Builder& b, Values&, Vs& xs) {
    return Vs{b.avg_pool2d(xs[0], {{3, 3}, {2, 2}, {1, 1, 1, 1}, false, true})};
  });
  c.add("GlobalAveragePool", {{2, 5, 6, 7}}, [](Builder& b, Values&, Vs& xs) { return Vs{b.global_avg_pool(xs[0])}; });
}

void shape_cases(CaseBuilder& c) {
  c.add("Reshape/then_relu", {{2, 3, 4}}, [](Builder& b, Values&, Vs& xs) {
    return Vs{b.relu(b.reshape(xs[0], {0, -1}))};
  });
  c.add("Flatten/then_add", {{2, 3, 2, 2}, {12}}, [](Builder& b, Values&, Vs& xs) {
    return Vs{b.add(b.flatten(xs[0]), xs[1])};
  });
  c.add("Transpose/0213", {{2, 3, 4, 5}},
        [](Builder& b, Values&, Vs& xs) { return Vs{b.transpose(xs[0], {0, 2, 1, 3})}; });
  c.add("Transpose/default_reverse", {{3, 4, 5}}, [](Builder& b, Values&, Vs& xs) {
    return b.op("Transpose", {xs[0]}, graph::Attributes{});
  });
  c.add("Concat/channels", {{1, 2, 3, 3}, {1, 5, 3, 3}, {1, 1, 3, 3}},
        [](Builder& b, Values&, Vs& xs) { return Vs{b.concat(xs, 1)}; });
  c.add("Concat/negative_axis", {{2, 3}, {2, 4}}, [](Builder& b, Values&, Vs& xs) { return Vs{b.concat(xs, -1)}; });
}

void chain_cases(CaseBuilder& c) {
  // A small residual block: the patterns graph passes rewrite.
  c.add("Chain/conv_bn_relu_residual", {{1, 4, 6, 6}}, [](Builder& b, Values& v, Vs& xs) {
    V w = b.constant("conv.weight", v.tensor({4, 4, 3, 3}, -0.3f, 0.3f));
    V y = b.conv2d(xs[0], w, std::nullopt, {{1, 1}, {1, 1, 1, 1}, {1, 1}, 1});
    y = b.batch_norm(y, b.constant("bn.weight", v.tensor({4}, 0.5f, 1.5f)), b.constant("bn.bias", v.tensor({4})),
                     b.constant("bn.mean", v.tensor({4})), b.constant("bn.var", v.tensor({4}, 0.5f, 1.5f)));
    y = b.relu(y);
    return Vs{b.relu(b.add(y, xs[0]))};
  });
}

// Recurrence (graph/recurrence.h), the time loop of LSTM/GRU/RNN, as the
// importer emits it: input projections in, recurrence weights transposed.
void recurrence_cases(CaseBuilder& c) {
  struct RecurrenceCase {
    const char* name;
    const char* cell;
    std::int64_t steps, batch, hidden;
    const char* direction;
    const char* activations;
    std::vector<std::int32_t> lengths;  // empty: none
    bool initial, peepholes;
    double clip;  // 0: none
    std::int64_t flag;  // input_forget (LSTM) or linear_before_reset (GRU)
  };
  const RecurrenceCase recurrences[] = {
      {"Recurrence/lstm_bidirectional_lengths_peepholes", "LSTM", 4, 3, 5, "bidirectional",
       "Sigmoid,Tanh,Tanh,Sigmoid,Tanh,Tanh", {4, 2, 0}, true, true, 0.0, 0},
      {"Recurrence/lstm_reverse_coupled_clip", "LSTM", 3, 2, 6, "reverse", "Sigmoid,Tanh,Tanh", {}, true, false, 0.5, 1},
      {"Recurrence/gru_reset_before_linear", "GRU", 4, 2, 7, "forward", "Sigmoid,Tanh", {3, 4}, true, false, 0.0, 0},
      {"Recurrence/gru_linear_before_reset_bidirectional", "GRU", 3, 2, 4, "bidirectional",
       "Sigmoid,Tanh,HardSigmoid,Softsign", {}, false, false, 0.0, 1},
      // 300 hidden units: several per invocation (a workgroup holds 256 at most).
      {"Recurrence/rnn_relu_hidden300", "RNN", 3, 1, 300, "forward", "Relu", {}, true, false, 0.0, 0},
  };
  for (const RecurrenceCase& rc : recurrences) {
    const std::int64_t D = std::string(rc.direction) == "bidirectional" ? 2 : 1;
    const std::string cell = rc.cell;
    const std::int64_t G = cell == "LSTM" ? 4 : cell == "GRU" ? 3 : 1, H = rc.hidden, B = rc.batch;
    std::vector<Shape> inputs = {{rc.steps, B, D * G * H}};
    if (rc.initial) inputs.push_back({cell == "LSTM" ? 2 : 1, D, B, H});
    c.add(rc.name, inputs, [&](Builder& b, Values& v, Vs& xs) {
      graph::Attributes a;
      a.set("cell", cell);
      a.set("hidden_size", H);
      a.set("direction", std::string(rc.direction));
      a.set("activations", std::string(rc.activations));
      const auto count = static_cast<std::size_t>(std::count(rc.activations, rc.activations + std::strlen(rc.activations), ',') + 1);
      a.set("activation_alpha", std::vector<double>(count, 0.3));
      a.set("activation_beta", std::vector<double>(count, 0.6));
      if (rc.clip > 0) a.set("clip", rc.clip);
      if (rc.flag) a.set(cell == "LSTM" ? "input_forget" : "linear_before_reset", rc.flag);
      // Weights scaled by 1/sqrt(H), as trained layers keep the recurrence stable.
      const float scale = 1.0f / std::sqrt(static_cast<float>(H));
      // LSTM's Rb is folded into XW by the importer (its kernel then binds 8 buffers at most).
      std::vector<std::optional<V>> ins = {xs[0], b.constant("rt", v.tensor({D, H, G * H}, -scale, scale))};
      ins.push_back(cell == "LSTM" ? std::nullopt : std::optional<V>(b.constant("rb", v.tensor({D, G * H}))));
      if (rc.lengths.empty()) {
        ins.push_back(std::nullopt);
      } else {
        Tensor lengths(DType::i32, {B});
        std::copy(rc.lengths.begin(), rc.lengths.end(), lengths.values<std::int32_t>().begin());
        ins.push_back(b.constant("lengths", lengths));
      }
      ins.push_back(rc.initial ? std::optional<V>(xs[1]) : std::nullopt);
      if (cell == "LSTM") ins.push_back(rc.peepholes ? std::optional<V>(b.constant("p", v.tensor({D, 3 * H}))) : std::nullopt);
      while (!ins.back()) ins.pop_back();
      return b.op("Recurrence", ins, a);
    });
  }
}

// Zero-size tensors: an empty batch or sequence (a decoder's first step has
// an empty key/value cache). An output with elements computed from empty
// inputs (a product over K = 0, a sum over an empty axis) must still be
// written; a kernel with nothing to write is never dispatched.
void empty_cases(CaseBuilder& c) {
  c.add("Empty/add_relu", {{0, 3}, {0, 3}}, [](Builder& b, Values&, Vs& xs) { return Vs{b.relu(b.add(xs[0], xs[1]))}; });
  c.add("Empty/concat_past", {{1, 2, 0, 4}, {1, 2, 3, 4}},
        [](Builder& b, Values&, Vs& xs) { return Vs{b.sigmoid(b.concat(xs, 2))}; });
  c.add("Empty/matmul_zero_k", {{2, 0}, {0, 3}}, [](Builder& b, Values&, Vs& xs) { return Vs{b.matmul(xs[0], xs[1])}; });
  c.add("Empty/gemm_zero_k_bias", {{2, 0}}, [](Builder& b, Values& v, Vs& xs) {
    return Vs{b.gemm(xs[0], b.constant("w", v.tensor({0, 3})), b.constant("c", v.tensor({3})))};
  });
  c.add("Empty/reduce_sum_empty_axis", {{3, 0, 2}}, [](Builder& b, Values&, Vs& xs) {
    graph::Attributes a;
    a.set("axes", std::vector<std::int64_t>{1});
    a.set("keepdims", std::int64_t{0});
    return b.op("ReduceSum", {xs[0]}, a);
  });
  c.add("Empty/reduce_max_prod_empty_axis", {{2, 3, 0}}, [](Builder& b, Values&, Vs& xs) {
    graph::Attributes a;
    a.set("axes", std::vector<std::int64_t>{-1});
    const V max = b.op("ReduceMax", {xs[0]}, a)[0];  // -inf, clipped to compare
    return Vs{b.clip(max, -5.0f, 5.0f), b.op("ReduceProd", {xs[0]}, a)[0]};
  });
  c.add("Empty/softmax_transpose_zero_batch", {{0, 4, 5}},
        [](Builder& b, Values&, Vs& xs) { return Vs{b.transpose(b.softmax(xs[0]), {2, 0, 1})}; });
  c.add("Empty/conv_zero_batch", {{0, 3, 6, 6}}, [](Builder& b, Values& v, Vs& xs) {
    return Vs{b.relu(b.conv2d(xs[0], b.constant("w", v.tensor({4, 3, 3, 3})), b.constant("b", v.tensor({4})),
                              {{1, 1}, {1, 1, 1, 1}, {1, 1}, 1}))};
  });
  c.add("Empty/layer_norm_and_attention_zero_queries", {{1, 0, 8}, {1, 5, 8}}, [](Builder& b, Values& v, Vs& xs) {
    const V q = b.layer_norm(xs[0], b.constant("s", v.tensor({8})), b.constant("t", v.tensor({8})));
    return b.op("Attention", {q, xs[1], xs[1]}, graph::Attributes{});
  });
  c.add("Empty/split_with_an_empty_part", {{2, 5}}, [](Builder& b, Values&, Vs& xs) {
    graph::Attributes a;
    a.set("axis", std::int64_t{1});
    a.set("split", std::vector<std::int64_t>{2, 0, 3});
    Vs parts = b.op("Split", {xs[0]}, a);
    return Vs{b.relu(parts[0]), b.relu(parts[1]), b.relu(parts[2])};
  });
  c.add("Empty/recurrence_zero_steps", {{0, 2, 9}, {1, 1, 2, 3}}, [](Builder& b, Values& v, Vs& xs) {
    graph::Attributes a;
    a.set("cell", std::string("GRU"));
    a.set("hidden_size", std::int64_t{3});
    a.set("activations", std::string("Sigmoid,Tanh"));
    a.set("activation_alpha", std::vector<double>{0.0, 0.0});
    a.set("activation_beta", std::vector<double>{0.0, 0.0});
    return b.op("Recurrence", {xs[0], b.constant("rt", v.tensor({1, 3, 9})), std::nullopt, std::nullopt, xs[1]}, a);
  });
}

}  // namespace

std::vector<OpCase> make_op_cases() {
  std::vector<OpCase> cases;
  CaseBuilder c{cases};
  conv_cases(c);
  matmul_cases(c);
  elementwise_cases(c);
  normalization_cases(c);
  pooling_cases(c);
  shape_cases(c);
  chain_cases(c);
  conv_transpose_cases(c);
  recurrence_cases(c);
  empty_cases(c);
  add_math_cases(cases);
  add_data_cases(cases);
  add_typed_cases(cases);
  return cases;
}

}  // namespace kiln::testing

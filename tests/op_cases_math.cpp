// Op cases of the math family: unary math, HardSigmoid/HardSwish, Pow,
// Min/Max, the Reduce* ops, CumSum and LogSoftmax. Every case is f32 end to
// end, so it must compile without graph breaks on every backend.
#include "op_cases.h"

#include <kiln/builder.h>

#include "graph/ir.h"

#include <cstdint>
#include <functional>
#include <optional>

namespace kiln::testing {
namespace {

using V = Builder::Value;
using Vs = std::vector<V>;

// Uniform values in [lo, hi) from a seeded linear congruential generator, the
// same on every platform.
Tensor seeded_tensor(std::uint64_t seed, const Shape& shape, float lo, float hi) {
  Tensor t(DType::f32, shape);
  std::uint64_t state = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (float& v : t.values<float>()) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = lo + (hi - lo) * (static_cast<float>(state >> 40) / static_cast<float>(1ull << 24));
  }
  return t;
}

struct MathCases {
  std::vector<OpCase>& cases;
  std::uint64_t seed = 1000;

  // A case whose inputs are uniform in [lo, hi); `body` returns the outputs.
  void add(const std::string& name, const std::vector<Shape>& shapes, float lo, float hi,
           const std::function<Vs(Builder&, Vs&)>& body, float tolerance = 1e-4f) {
    Builder b(name);
    Vs xs;
    std::vector<Tensor> inputs;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      xs.push_back(b.input("x" + std::to_string(i), DType::f32, shapes[i]));
      inputs.push_back(seeded_tensor(seed++, shapes[i], lo, hi));
    }
    Vs outs = body(b, xs);
    cases.push_back({name, b.build(outs), std::move(inputs), tolerance});
  }

  // One op applied to the inputs with the given attributes.
  void add_op(const std::string& name, const std::string& op, const std::vector<Shape>& shapes, float lo, float hi,
              const graph::Attributes& attrs = {}, float tolerance = 1e-4f) {
    add(
        name, shapes, lo, hi,
        [&](Builder& b, Vs& xs) {
          std::vector<std::optional<V>> ins(xs.begin(), xs.end());
          return b.op(op, ins, attrs);
        },
        tolerance);
  }
};

graph::Attributes attrs_of(std::initializer_list<std::pair<const char*, graph::Attribute>> list) {
  graph::Attributes a;
  for (const auto& [name, value] : list) a.set(name, value);
  return a;
}

using Ints = std::vector<std::int64_t>;

void unary_cases(MathCases& c) {
  c.add_op("Sqrt", "Sqrt", {{3, 17}}, 0.0f, 9.0f);
  c.add_op("Exp", "Exp", {{3, 17}}, -4.0f, 4.0f);
  c.add_op("Log", "Log", {{3, 17}}, 0.05f, 20.0f);
  c.add_op("Erf", "Erf", {{3, 17}}, -3.0f, 3.0f);
  c.add_op("Sin", "Sin", {{4, 25}}, -20.0f, 20.0f);
  c.add_op("Cos", "Cos", {{4, 25}}, -20.0f, 20.0f);
  c.add_op("Neg", "Neg", {{2, 9}}, -2.0f, 2.0f);
  c.add_op("Abs", "Abs", {{2, 9}}, -2.0f, 2.0f);
  c.add_op("Reciprocal", "Reciprocal", {{2, 9}}, 0.25f, 4.0f);
  c.add_op("Floor", "Floor", {{2, 9}}, -3.0f, 3.0f);
  c.add_op("Ceil", "Ceil", {{2, 9}}, -3.0f, 3.0f);
  c.add_op("Sign", "Sign", {{2, 9}}, -2.0f, 2.0f);
  c.add_op("Round", "Round", {{3, 11}}, -4.0f, 4.0f);
  c.add_op("Sinh", "Sinh", {{2, 9}}, -3.0f, 3.0f);
  c.add_op("Cosh", "Cosh", {{2, 9}}, -3.0f, 3.0f);
  c.add_op("Asinh", "Asinh", {{2, 9}}, -5.0f, 5.0f);
  c.add_op("Acosh", "Acosh", {{2, 9}}, 1.0f, 6.0f);
  c.add_op("Atanh", "Atanh", {{2, 9}}, -0.9f, 0.9f);
  c.add_op("Tan", "Tan", {{3, 11}}, -1.5f, 1.5f);
  c.add_op("Atan", "Atan", {{4, 25}}, -30.0f, 30.0f);
  c.add_op("Asin", "Asin", {{3, 17}}, -1.0f, 1.0f);
  c.add_op("Acos", "Acos", {{3, 17}}, -1.0f, 1.0f);
  c.add_op("HardSigmoid/default", "HardSigmoid", {{2, 3, 5}}, -5.0f, 5.0f);
  c.add_op("HardSigmoid/alpha_beta", "HardSigmoid", {{2, 3, 5}}, -5.0f, 5.0f,
           attrs_of({{"alpha", 1.0 / 6.0}, {"beta", 0.25}}));
  c.add_op("HardSwish", "HardSwish", {{2, 3, 5}}, -5.0f, 5.0f);
  // The exporters' activations (lower_elementwise.cpp).
  c.add_op("LeakyRelu/default", "LeakyRelu", {{3, 11}}, -3.0f, 3.0f);
  c.add_op("LeakyRelu/alpha", "LeakyRelu", {{3, 11}}, -3.0f, 3.0f, attrs_of({{"alpha", 0.2}}));
  c.add_op("Elu/default", "Elu", {{3, 11}}, -4.0f, 3.0f);
  c.add_op("Elu/alpha", "Elu", {{3, 11}}, -4.0f, 3.0f, attrs_of({{"alpha", 2.0}}));
  c.add_op("Selu/default", "Selu", {{3, 11}}, -4.0f, 3.0f);
  c.add_op("Selu/alpha_gamma", "Selu", {{3, 11}}, -4.0f, 3.0f, attrs_of({{"alpha", 2.0}, {"gamma", 3.0}}));
  c.add_op("Celu/alpha", "Celu", {{3, 11}}, -4.0f, 3.0f, attrs_of({{"alpha", 2.0}}));
  c.add_op("ThresholdedRelu/alpha", "ThresholdedRelu", {{3, 11}}, -3.0f, 3.0f, attrs_of({{"alpha", 0.5}}));
  c.add_op("Softplus", "Softplus", {{3, 11}}, -30.0f, 30.0f);
  c.add_op("Softsign", "Softsign", {{3, 11}}, -5.0f, 5.0f);
  c.add_op("Mish", "Mish", {{3, 11}}, -6.0f, 6.0f);
  c.add_op("Shrink/lambd_bias", "Shrink", {{3, 11}}, -3.0f, 3.0f, attrs_of({{"lambd", 1.0}, {"bias", 0.5}}));
}

void broadcast_cases(MathCases& c) {
  // The decomposed LayerNorm's Pow(x - mean, 2): a negative base with an even exponent.
  c.add("Pow/square_negative_base", {{2, 3, 8}}, -2.0f, 2.0f, [](Builder& b, Vs& xs) {
    return b.op("Pow", {xs[0], b.constant("two", Tensor::scalar_f32(2.0f))}, {});
  });
  c.add("Pow/integer_exponents_negative_base", {{4, 6}}, -2.0f, 2.0f, [](Builder& b, Vs& xs) {
    return b.op("Pow", {xs[0], b.constant("e", Tensor::from_f32({6}, {0, 1, 2, 3, -1, -2}))}, {});
  });
  c.add_op("Pow/broadcast_both", "Pow", {{3, 1, 4}, {2, 1}}, 0.25f, 2.0f);
  c.add_op("Max/three_inputs_broadcast", "Max", {{2, 3, 4}, {3, 1}, {4}}, -1.0f, 1.0f);
  c.add_op("Min/two_inputs", "Min", {{5, 6}, {5, 6}}, -1.0f, 1.0f);
  c.add_op("Max/single_input", "Max", {{7}}, -1.0f, 1.0f);
  c.add_op("Sum/three_inputs_broadcast", "Sum", {{2, 3, 4}, {3, 1}, {4}}, -1.0f, 1.0f);
  c.add_op("Mean/two_inputs_broadcast", "Mean", {{2, 5}, {5}}, -1.0f, 1.0f);
}

void reduce_cases(MathCases& c) {
  c.add_op("ReduceMean/last_axis", "ReduceMean", {{2, 3, 16}}, -1.0f, 1.0f, attrs_of({{"axes", Ints{-1}}}));
  c.add_op("ReduceMean/spatial_keepdims", "ReduceMean", {{2, 4, 5, 6}}, -1.0f, 1.0f,
           attrs_of({{"axes", Ints{2, 3}}, {"keepdims", std::int64_t{1}}}));
  c.add_op("ReduceSum/axis1_no_keepdims", "ReduceSum", {{3, 7, 4}}, -1.0f, 1.0f,
           attrs_of({{"axes", Ints{1}}, {"keepdims", std::int64_t{0}}}));
  c.add_op("ReduceSum/outer_and_inner_axes", "ReduceSum", {{3, 4, 5}}, -1.0f, 1.0f, attrs_of({{"axes", Ints{0, 2}}}));
  c.add_op("ReduceMax/all_axes", "ReduceMax", {{3, 5, 4}}, -1.0f, 1.0f, attrs_of({{"keepdims", std::int64_t{0}}}));
  c.add_op("ReduceMax/axis0", "ReduceMax", {{6, 5}}, -1.0f, 1.0f, attrs_of({{"axes", Ints{0}}}));
  c.add_op("ReduceMin/axes_1_2", "ReduceMin", {{2, 3, 4, 5}}, -1.0f, 1.0f, attrs_of({{"axes", Ints{1, 2}}}));
  c.add_op("ReduceProd/axis1", "ReduceProd", {{3, 6}}, 0.5f, 1.5f, attrs_of({{"axes", Ints{1}}}));
  c.add_op("ReduceL1/axis1", "ReduceL1", {{3, 7, 4}}, -1.0f, 1.0f, attrs_of({{"axes", Ints{1}}}));
  c.add_op("ReduceL2/all_axes", "ReduceL2", {{3, 5, 4}}, -1.0f, 1.0f, attrs_of({{"keepdims", std::int64_t{0}}}));
  c.add_op("ReduceSumSquare/axes_0_2", "ReduceSumSquare", {{3, 4, 5}}, -1.0f, 1.0f, attrs_of({{"axes", Ints{0, 2}}}));
  c.add_op("ReduceLogSum/last_axis", "ReduceLogSum", {{2, 3, 16}}, 0.1f, 2.0f, attrs_of({{"axes", Ints{-1}}}));
  // Past e^88 a plain f32 sum of e^x overflows; the kernel subtracts the maximum first.
  c.add_op("ReduceLogSumExp/large_values", "ReduceLogSumExp", {{4, 9}}, 80.0f, 120.0f, attrs_of({{"axes", Ints{1}}}));
  c.add_op("ReduceSum/noop_with_empty_axes", "ReduceSum", {{2, 5}}, -1.0f, 1.0f,
           attrs_of({{"noop_with_empty_axes", std::int64_t{1}}}));
}

void cumsum_cases(MathCases& c) {
  c.add_op("CumSum/axis1", "CumSum", {{2, 6, 3}}, -1.0f, 1.0f, attrs_of({{"axis", std::int64_t{1}}}));
  c.add_op("CumSum/exclusive_last_axis", "CumSum", {{3, 7}}, -1.0f, 1.0f,
           attrs_of({{"axis", std::int64_t{-1}}, {"exclusive", std::int64_t{1}}}));
  c.add_op("CumSum/reverse_axis0", "CumSum", {{5, 4}}, -1.0f, 1.0f,
           attrs_of({{"axis", std::int64_t{0}}, {"reverse", std::int64_t{1}}}));
  c.add_op("CumSum/reverse_exclusive", "CumSum", {{2, 8}}, -1.0f, 1.0f,
           attrs_of({{"axis", std::int64_t{1}}, {"reverse", std::int64_t{1}}, {"exclusive", std::int64_t{1}}}));
}

void log_softmax_cases(MathCases& c) {
  c.add_op("LogSoftmax/last_axis", "LogSoftmax", {{3, 4, 10}}, -3.0f, 3.0f);
  c.add_op("LogSoftmax/axis0", "LogSoftmax", {{5, 6}}, -3.0f, 3.0f, attrs_of({{"axis", std::int64_t{0}}}));
  // Rows far from zero, where a naive log(softmax) would lose its tiny probabilities.
  c.add_op("LogSoftmax/large_logits_middle_axis", "LogSoftmax", {{2, 7, 3}}, -60.0f, 60.0f,
           attrs_of({{"axis", std::int64_t{1}}}));
}

void chain_cases(MathCases& c) {
  // LayerNorm as PyTorch exports decompose it: ReduceMean, Sub, Pow, Sqrt, Div.
  c.add("Chain/decomposed_layer_norm", {{2, 4, 12}}, -2.0f, 2.0f, [](Builder& b, Vs& xs) {
    const graph::Attributes last = attrs_of({{"axes", Ints{-1}}});
    V centered = b.sub(xs[0], b.op("ReduceMean", {xs[0]}, last)[0]);
    V variance = b.op("ReduceMean", {b.op("Pow", {centered, b.constant("two", Tensor::scalar_f32(2.0f))}, {})[0]},
                      last)[0];
    V std_dev = b.op("Sqrt", {b.add(variance, b.constant("eps", Tensor::scalar_f32(1e-5f)))}, {})[0];
    return Vs{b.div(centered, std_dev)};
  });
}

}  // namespace

void add_math_cases(std::vector<OpCase>& cases) {
  MathCases c{cases};
  unary_cases(c);
  broadcast_cases(c);
  reduce_cases(c);
  cumsum_cases(c);
  log_softmax_cases(c);
  chain_cases(c);
}

}  // namespace kiln::testing

// Op cases with integer and bool tensors in kernels: comparisons, logic and
// Where, Cast between every pair kernels hold, ArgMax/ArgMin, integer
// arithmetic and Min/Max/Sum, and the data-movement ops over i64, i32 and
// bool elements. Inputs are seeded; integers are small and include
// negatives, so ties, zero and sign all occur. Each case compiles without
// graph breaks (test_conformance runs them with fullgraph); integer and bool
// outputs must equal the reference's exactly.
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

using V = Builder::Value;
using Vs = std::vector<V>;
using Ints = std::vector<std::int64_t>;

struct Input {
  DType dtype;
  Shape shape;
};

// Seeded values: f32 in [-2, 2) in steps of 0.5 (so comparisons tie), i32
// and i64 in [-4, 4), bool 0 or 1.
Tensor seeded_tensor(std::uint64_t seed, const Input& in) {
  Tensor t(in.dtype, in.shape);
  std::uint64_t state = seed * 6364136223846793005ull + 1442695040888963407ull;
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::int64_t>((state >> 40) % 8) - 4;
  };
  switch (in.dtype) {
    case DType::f32:
      for (float& v : t.values<float>()) v = static_cast<float>(next()) * 0.5f;
      break;
    case DType::i32:
      for (std::int32_t& v : t.values<std::int32_t>()) v = static_cast<std::int32_t>(next());
      break;
    case DType::i64:
      for (std::int64_t& v : t.values<std::int64_t>()) v = next();
      break;
    case DType::boolean: {
      std::span<std::byte> bytes = t.bytes();
      for (std::byte& b : bytes) b = std::byte{static_cast<unsigned char>(next() < 0 ? 1 : 0)};
      break;
    }
    default: break;
  }
  return t;
}

graph::Attributes attrs(std::initializer_list<std::pair<std::string, graph::Attribute>> list) {
  graph::Attributes a;
  for (const auto& [name, value] : list) a.set(name, value);
  return a;
}

struct TypedCases {
  std::vector<OpCase>& cases;
  std::uint64_t seed = 3000;

  void add(const std::string& name, const std::vector<Input>& ins, const std::function<Vs(Builder&, Vs&)>& body) {
    Builder b(name);
    Vs xs;
    std::vector<Tensor> inputs;
    for (std::size_t i = 0; i < ins.size(); ++i) {
      xs.push_back(b.input("x" + std::to_string(i), ins[i].dtype, ins[i].shape));
      inputs.push_back(seeded_tensor(seed++, ins[i]));
    }
    const Vs outputs = body(b, xs);
    cases.push_back({name, b.build(outputs), std::move(inputs), 1e-5f});
  }

  void add_op(const std::string& name, const std::vector<Input>& ins, const std::string& op,
              const graph::Attributes& a = {}) {
    add(name, ins, [&](Builder& b, Vs& xs) {
      return b.op(op, std::vector<std::optional<V>>(xs.begin(), xs.end()), a);
    });
  }
};

// ONNX's TensorProto code of a dtype (Cast's `to`).
std::int64_t onnx_code(DType dtype) {
  switch (dtype) {
    case DType::f32: return 1;
    case DType::i32: return 6;
    case DType::i64: return 7;
    case DType::boolean: return 9;
    default: return 0;
  }
}

constexpr DType f32 = DType::f32, i32 = DType::i32, i64 = DType::i64, boolean = DType::boolean;

void logic_cases(TypedCases& c) {
  c.add_op("Equal/i64_broadcast", {{i64, {3, 4}}, {i64, {4}}}, "Equal");
  c.add_op("Less/f32", {{f32, {2, 3, 5}}, {f32, {2, 3, 5}}}, "Less");
  c.add_op("GreaterOrEqual/i32_broadcast", {{i32, {4, 1}}, {i32, {1, 6}}}, "GreaterOrEqual");
  c.add_op("And/bool_broadcast", {{boolean, {2, 3, 4}}, {boolean, {3, 1}}}, "And");
  c.add_op("Xor/bool", {{boolean, {5, 7}}, {boolean, {5, 7}}}, "Xor");
  c.add_op("Not/bool", {{boolean, {3, 9}}}, "Not");
  c.add_op("Where/f32_broadcast", {{boolean, {2, 1, 4}}, {f32, {3, 4}}, {f32, {2, 3, 1}}}, "Where");
  c.add_op("Where/i64", {{boolean, {6}}, {i64, {6}}, {i64, {1}}}, "Where");
  // A comparison feeding Where: the compiled form fuses them.
  c.add("Where/of_greater", {{f32, {4, 8}}, {f32, {4, 8}}}, [](Builder& b, Vs& xs) {
    const V mask = b.op("Greater", {xs[0], xs[1]}, {})[0];
    return b.op("Where", {mask, xs[0], xs[1]}, {});
  });
}

void cast_cases(TypedCases& c) {
  const std::pair<DType, DType> pairs[] = {{f32, boolean}, {boolean, f32}, {i64, f32}, {f32, i64},
                                           {i32, i64},     {i64, i32},     {i64, boolean}, {boolean, i32}};
  for (const auto& [from, to] : pairs)
    c.add_op("Cast/" + std::string(dtype_name(from)) + "_to_" + std::string(dtype_name(to)), {{from, {3, 5}}}, "Cast",
             attrs({{"to", onnx_code(to)}}));
}

void arg_reduce_cases(TypedCases& c) {
  c.add_op("ArgMax/f32_axis1_keepdims", {{f32, {3, 7, 2}}}, "ArgMax", attrs({{"axis", std::int64_t{1}}}));
  c.add_op("ArgMin/i64_last_axis_last_index", {{i64, {4, 6}}}, "ArgMin",
           attrs({{"axis", std::int64_t{-1}}, {"keepdims", std::int64_t{0}}, {"select_last_index", std::int64_t{1}}}));
  c.add_op("ArgMax/i32_axis0", {{i32, {5, 3}}}, "ArgMax", attrs({{"axis", std::int64_t{0}}}));
}

void arithmetic_cases(TypedCases& c) {
  c.add_op("Add/i64_broadcast", {{i64, {2, 3}}, {i64, {3}}}, "Add");
  c.add_op("Mul/i64", {{i64, {4, 4}}, {i64, {4, 4}}}, "Mul");
  c.add_op("Max/i64_three_inputs", {{i64, {2, 5}}, {i64, {5}}, {i64, {2, 1}}}, "Max");
  c.add_op("Min/i32", {{i32, {6}}, {i32, {6}}}, "Min");
  // i32 arithmetic (TensorFlow's converters count loop steps in i32).
  c.add_op("Add/i32_broadcast", {{i32, {2, 3}}, {i32, {3}}}, "Add");
  c.add_op("Sub/i32", {{i32, {5}}, {i32, {5}}}, "Sub");
  c.add_op("Mul/i32", {{i32, {4, 4}}, {i32, {4, 4}}}, "Mul");
  c.add_op("Pow/f32_i64_exponent", {{f32, {2, 4}}, {i64, {4}}}, "Pow");
}

// A constant i64 tensor of `values`.
Tensor i64_tensor(const Ints& values) {
  Tensor t(DType::i64, {static_cast<std::int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t.values<std::int64_t>().begin());
  return t;
}

void special_value_cases(TypedCases& c) {
  // x / y over values with zeros in y: +-inf and 0/0 NaN, then classified.
  c.add("IsNaN/IsInf/of_division_by_zero", {{f32, {4, 6}}, {f32, {4, 6}}}, [](Builder& b, Vs& xs) {
    const V q = b.op("Div", {xs[0], xs[1]}, {})[0];
    return Vs{b.op("IsNaN", {q}, {})[0], b.op("IsInf", {q}, {})[0],
              b.op("IsInf", {q}, attrs({{"detect_negative", std::int64_t{0}}}))[0]};
  });
  c.add_op("Hardmax/ties_axis1", {{f32, {3, 5, 2}}}, "Hardmax", attrs({{"axis", std::int64_t{1}}}));
  // Divisors without zero: both signs and -1.
  for (const std::int64_t fmod : {0, 1})
    c.add("Mod/i64_fmod" + std::to_string(fmod), {{i64, {3, 5}}}, [fmod](Builder& b, Vs& xs) {
      const V divisors = b.constant("divisors", i64_tensor({3, -2, -1, 5, -4}));
      return b.op("Mod", {xs[0], divisors}, attrs({{"fmod", fmod}}));
    });
  c.add("Mod/f32_fmod", {{f32, {4, 4}}}, [](Builder& b, Vs& xs) {
    Tensor divisors(DType::f32, {4});
    const float values[] = {1.5f, -0.5f, 2.0f, -1.0f};
    std::copy(std::begin(values), std::end(values), divisors.values<float>().begin());
    return b.op("Mod", {xs[0], b.constant("divisors", divisors)}, attrs({{"fmod", std::int64_t{1}}}));
  });
}

// Exp, Tanh, Erf and Sigmoid at the ends of their ranges: infinities, NaN,
// overflow and underflow, the smallest arguments. Backends compute them their
// own way (the cpu backend's C without libm); the values must still agree.
void transcendental_edge_cases(TypedCases& c) {
  const std::vector<float> values = {-INFINITY, INFINITY, NAN,   -1000.0f, -105.0f, -87.0f,    -20.0f, -1.0f,
                                     -1e-3f,    -1e-30f,  0.0f,  1e-30f,   1e-3f,   0.54f,     0.56f,  1.0f,
                                     9.0f,      20.0f,    44.6f, 88.0f,    88.8f,   1000.0f,   -0.3f,  5e-5f};
  Tensor input(DType::f32, {4, 6});
  std::copy(values.begin(), values.end(), input.values<float>().begin());
  // exp of the values clipped to [-87, 88] (normal, finite results), in double then rounded.
  Tensor exp_of_clipped(DType::f32, {4, 6});
  std::transform(values.begin(), values.end(), exp_of_clipped.values<float>().begin(), [](float v) {
    const double clipped = std::isnan(v) ? 0.0 : std::clamp(static_cast<double>(v), -87.0, 88.0);
    return static_cast<float>(std::exp(clipped));
  });
  Builder b("transcendental_edges");
  const V x = b.input("x", DType::f32, {4, 6});
  const V nan = b.op("IsNaN", {x}, {})[0];
  const V zero = b.constant("zero", Tensor::scalar_f32(0.0f));
  const V one = b.constant("one", Tensor::scalar_f32(1.0f));
  const V finite = b.op("Where", {nan, zero, x}, {})[0];
  const V exp = b.op("Exp", {x}, {})[0];
  // Relative checks, as ratios near 1: exp against exp in double; tanh(z) / z, z never 0.
  const V clipped = b.clip(finite, -87.0f, 88.0f);
  const V exp_ratio =
      b.op("Div", {b.op("Exp", {clipped}, {})[0], b.constant("exp_of_clipped", exp_of_clipped)}, {})[0];
  const V nonzero = b.op("Where", {b.op("Equal", {finite, zero}, {})[0], one, finite}, {})[0];
  const V tanh_ratio = b.op("Div", {b.op("Tanh", {nonzero}, {})[0], nonzero}, {})[0];
  const V tanh = b.op("Tanh", {x}, {})[0];
  const V erf_ratio = b.op("Div", {b.op("Erf", {nonzero}, {})[0], nonzero}, {})[0];
  c.cases.push_back({"Exp/Tanh/Erf/Sigmoid/edges",
                     b.build({b.op("IsNaN", {exp}, {})[0], b.op("IsInf", {exp}, {})[0], exp_ratio,
                              b.op("IsNaN", {tanh}, {})[0], tanh_ratio, b.op("Sigmoid", {finite}, {})[0],
                              b.op("IsNaN", {b.op("Erf", {x}, {})[0]}, {})[0], erf_ratio}),
                     {input},
                     // Vulkan's exp may be off by 3 + 2|x| ulp (up to 1.1e-5 here); the cpu backend's is within 1 ulp.
                     2e-5f});
}

void loss_cases(TypedCases& c) {
  // Log-probabilities [N=2, C=3, d=4] against constant targets, one of them
  // the ignore_index (1 here), with class weights.
  for (const char* reduction : {"none", "sum", "mean"})
    c.add(std::string("NegativeLogLikelihoodLoss/") + reduction, {{f32, {2, 3, 4}}}, [reduction](Builder& b, Vs& xs) {
      Tensor targets(DType::i64, {2, 4});
      const Ints values = {0, 2, 1, 2, 2, 0, 0, 1};
      std::copy(values.begin(), values.end(), targets.values<std::int64_t>().begin());
      Tensor weights(DType::f32, {3});
      const float w[] = {0.5f, 2.0f, 1.5f};
      std::copy(std::begin(w), std::end(w), weights.values<float>().begin());
      return b.op("NegativeLogLikelihoodLoss",
                  {xs[0], b.constant("targets", targets), b.constant("weights", weights)},
                  attrs({{"reduction", std::string(reduction)}, {"ignore_index", std::int64_t{1}}}));
    });
}

void runtime_index_cases(TypedCases& c) {
  // Indices as inputs (input ids into an embedding table), negative ones
  // included; every seeded index is in range.
  c.add("Gather/runtime_i64_indices_axis0", {{f32, {8, 5}}, {i64, {2, 3}}}, [](Builder& b, Vs& xs) {
    return b.op("Gather", {xs[0], xs[1]}, attrs({{"axis", std::int64_t{0}}}));
  });
  c.add("Gather/runtime_i32_indices_axis1", {{f32, {2, 4, 3}}, {i32, {5}}}, [](Builder& b, Vs& xs) {
    return b.op("Gather", {xs[0], xs[1]}, attrs({{"axis", std::int64_t{1}}}));
  });
  c.add("GatherElements/axis1", {{f32, {3, 4}}, {i64, {3, 2}}}, [](Builder& b, Vs& xs) {
    return b.op("GatherElements", {xs[0], xs[1]}, attrs({{"axis", std::int64_t{1}}}));
  });
}

void data_cases(TypedCases& c) {
  // A zero-length slice (a decoder's empty past) concatenated with data: the
  // empty value needs no kernel and no host step.
  c.add("Concat/after_empty_slice", {{f32, {2, 3}}, {f32, {4, 3}}}, [](Builder& b, Vs& xs) {
    const V empty = b.op("Slice", {xs[0]}, attrs({{"starts", Ints{1}}, {"ends", Ints{1}}, {"axes", Ints{0}}}))[0];
    return b.op("Concat", {empty, xs[1]}, attrs({{"axis", std::int64_t{0}}}));
  });
  c.add_op("Transpose/i64", {{i64, {2, 3, 4}}}, "Transpose", attrs({{"perm", Ints{2, 0, 1}}}));
  c.add_op("Concat/bool", {{boolean, {2, 3}}, {boolean, {2, 2}}}, "Concat", attrs({{"axis", std::int64_t{1}}}));
  c.add_op("Slice/i32", {{i32, {4, 6}}}, "Slice", attrs({{"starts", Ints{1}}, {"ends", Ints{5}}, {"axes", Ints{1}}}));
  c.add_op("Trilu/i64_lower", {{i64, {2, 4, 5}}}, "Trilu", attrs({{"upper", std::int64_t{0}}, {"k", std::int64_t{1}}}));
  c.add_op("Pad/i64_constant", {{i64, {2, 3}}}, "Pad",
           attrs({{"pads", Ints{1, 0, 0, 2}}, {"value", 7.0}}));
  c.add_op("Expand/bool", {{boolean, {3, 1}}}, "Expand", attrs({{"shape", Ints{2, 3, 4}}}));
  // ReverseSequence: time-major f32 with a length of 0 and one of every step;
  // batch-major i32 (a backward recurrent layer's input as TensorFlow writes it).
  c.add("ReverseSequence/time_major", {{f32, {4, 3, 2}}}, [](Builder& b, Vs& xs) {
    return b.op("ReverseSequence", {xs[0], b.constant("lengths", i64_tensor({4, 0, 2}))},
                attrs({{"batch_axis", std::int64_t{1}}, {"time_axis", std::int64_t{0}}}));
  });
  c.add("ReverseSequence/batch_major_i32", {{i32, {2, 5}}}, [](Builder& b, Vs& xs) {
    return b.op("ReverseSequence", {xs[0], b.constant("lengths", i64_tensor({3, 5}))},
                attrs({{"batch_axis", std::int64_t{0}}, {"time_axis", std::int64_t{1}}}));
  });
  c.add_op("Gather/i64_constant_indices", {{i64, {5, 3}}}, "Gather",
           attrs({{"axis", std::int64_t{0}}, {"indices", Ints{4, 0, 2}}, {"indices_shape", Ints{3}}}));
}

}  // namespace

void add_typed_cases(std::vector<OpCase>& cases) {
  TypedCases c{cases};
  logic_cases(c);
  cast_cases(c);
  arg_reduce_cases(c);
  arithmetic_cases(c);
  special_value_cases(c);
  transcendental_edge_cases(c);
  loss_cases(c);
  runtime_index_cases(c);
  data_cases(c);
}

}  // namespace kiln::testing

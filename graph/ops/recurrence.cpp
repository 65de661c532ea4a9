// Recurrence: the time loop of ONNX's LSTM, GRU and RNN (graph/recurrence.h
// has the op's inputs, outputs and attributes). The reference follows
// ONNX's equations step by step in double precision; the order of clipping,
// peepholes and biases is ONNX Runtime's.
#include "graph/recurrence.h"

#include "graph/ops/ops.h"
#include "src/base/check.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>

namespace kiln::graph {

namespace {

struct ActivationInfo {
  RecurrentActivation kind;
  std::string_view name;
  bool alpha, beta;
  double default_alpha, default_beta;
};

// ONNX's names; defaults are ONNX Runtime's (rnn_helpers).
constexpr std::array<ActivationInfo, 11> kActivations = {{
    {RecurrentActivation::sigmoid, "Sigmoid", false, false, 0, 0},
    {RecurrentActivation::tanh, "Tanh", false, false, 0, 0},
    {RecurrentActivation::relu, "Relu", false, false, 0, 0},
    {RecurrentActivation::affine, "Affine", true, true, 1.0, 0.0},
    {RecurrentActivation::leaky_relu, "LeakyRelu", true, false, 0.01, 0},
    {RecurrentActivation::thresholded_relu, "ThresholdedRelu", true, false, 1.0, 0},
    {RecurrentActivation::scaled_tanh, "ScaledTanh", true, true, 1.0, 1.0},
    {RecurrentActivation::hard_sigmoid, "HardSigmoid", true, true, 0.2, 0.5},
    {RecurrentActivation::elu, "Elu", true, false, 1.0, 0},
    {RecurrentActivation::softsign, "Softsign", false, false, 0, 0},
    {RecurrentActivation::softplus, "Softplus", false, false, 0, 0},
}};

const ActivationInfo& info(RecurrentActivation kind) {
  return *std::find_if(kActivations.begin(), kActivations.end(), [&](const ActivationInfo& a) { return a.kind == kind; });
}

std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> names;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    names.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return names;
}

}  // namespace

std::optional<RecurrentActivation> recurrent_activation(std::string_view name) {
  for (const ActivationInfo& a : kActivations)
    if (std::equal(a.name.begin(), a.name.end(), name.begin(), name.end(),
                   [](char x, char y) { return std::tolower(static_cast<unsigned char>(x)) ==
                                               std::tolower(static_cast<unsigned char>(y)); }))
      return a.kind;
  return std::nullopt;
}

std::string_view recurrent_activation_name(RecurrentActivation kind) { return info(kind).name; }
bool takes_alpha(RecurrentActivation kind) { return info(kind).alpha; }
bool takes_beta(RecurrentActivation kind) { return info(kind).beta; }
double default_alpha(RecurrentActivation kind) { return info(kind).default_alpha; }
double default_beta(RecurrentActivation kind) { return info(kind).default_beta; }

double apply_recurrent(const RecurrentFunction& f, double x) {
  switch (f.kind) {
    case RecurrentActivation::sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case RecurrentActivation::tanh: return std::tanh(x);
    case RecurrentActivation::relu: return x > 0 ? x : 0.0;
    case RecurrentActivation::affine: return f.alpha * x + f.beta;
    case RecurrentActivation::leaky_relu: return x >= 0 ? x : f.alpha * x;
    case RecurrentActivation::thresholded_relu: return x > f.alpha ? x : 0.0;
    case RecurrentActivation::scaled_tanh: return f.alpha * std::tanh(f.beta * x);
    case RecurrentActivation::hard_sigmoid: return std::clamp(f.alpha * x + f.beta, 0.0, 1.0);
    case RecurrentActivation::elu: return x >= 0 ? x : f.alpha * (std::exp(x) - 1.0);
    case RecurrentActivation::softsign: return x / (1.0 + std::fabs(x));
    case RecurrentActivation::softplus: return x > 30 ? x : std::log1p(std::exp(x));
  }
  return x;
}

RecurrenceSpec recurrence_spec(const Node& node, std::span<const TensorType> in) {
  using ops::describe;
  using ops::has_input;
  ops::check_known_attributes(node, {"cell", "hidden_size", "direction", "activations", "activation_alpha",
                                     "activation_beta", "clip", "input_forget", "linear_before_reset"});
  RecurrenceSpec s;
  const std::string cell = node.attrs.get_string("cell", "LSTM");
  if (cell == "LSTM") s.cell = RecurrentCell::lstm, s.gates = 4, s.functions = 3;
  else if (cell == "GRU") s.cell = RecurrentCell::gru, s.gates = 3, s.functions = 2;
  else if (cell == "RNN") s.cell = RecurrentCell::rnn, s.gates = 1, s.functions = 1;
  else throw_error(ErrorKind::InvalidArgument, "cell '" + cell + "' is not LSTM, GRU or RNN");
  const std::string direction = node.attrs.get_string("direction", "forward");
  KILN_CHECK(direction == "forward" || direction == "reverse" || direction == "bidirectional",
             ErrorKind::InvalidArgument, "direction '" + direction + "' is not forward, reverse or bidirectional");
  s.directions = direction == "bidirectional" ? 2 : 1;
  s.reverse = direction == "reverse";
  s.hidden = node.attrs.get_int("hidden_size", 0);
  KILN_CHECK(s.hidden > 0, ErrorKind::InvalidArgument, "hidden_size must be positive");
  s.input_forget = ops::get_flag(node, "input_forget", false);
  s.linear_before_reset = ops::get_flag(node, "linear_before_reset", false);
  KILN_CHECK(!s.input_forget || s.cell == RecurrentCell::lstm, ErrorKind::InvalidArgument,
             "input_forget is an LSTM attribute");
  KILN_CHECK(!s.linear_before_reset || s.cell == RecurrentCell::gru, ErrorKind::InvalidArgument,
             "linear_before_reset is a GRU attribute");
  if (node.attrs.has("clip")) {
    const double clip = node.attrs.get_float("clip", 0.0);
    KILN_CHECK(clip > 0 && std::isfinite(clip), ErrorKind::InvalidArgument, "clip must be positive and finite");
    s.clip = clip;
  }

  // Activations: exactly `functions` per direction, each with its alpha and beta.
  const std::vector<std::string> names = split_names(node.attrs.get_string("activations", ""));
  const auto count = static_cast<std::size_t>(s.directions * s.functions);
  KILN_CHECK(names.size() == count, ErrorKind::InvalidArgument,
             cell + " with " + std::to_string(s.directions) + " direction(s) takes " + std::to_string(count) +
                 " activations, got '" + node.attrs.get_string("activations", "") + "'");
  const std::vector<double> alphas = node.attrs.has("activation_alpha")
                                         ? std::get<std::vector<double>>(node.attrs.all().at("activation_alpha"))
                                         : std::vector<double>(count, 0.0);
  const std::vector<double> betas = node.attrs.has("activation_beta")
                                        ? std::get<std::vector<double>>(node.attrs.all().at("activation_beta"))
                                        : std::vector<double>(count, 0.0);
  KILN_CHECK(alphas.size() == count && betas.size() == count, ErrorKind::InvalidArgument,
             "activation_alpha and activation_beta need one value per activation (" + std::to_string(count) + ")");
  for (std::size_t i = 0; i < count; ++i) {
    const auto kind = recurrent_activation(names[i]);
    KILN_CHECK(kind.has_value(), ErrorKind::Unsupported, "activation '" + names[i] + "' is not one of ONNX's");
    s.activations.push_back({*kind, alphas[i], betas[i]});
  }

  // Shapes.
  const auto G = s.gates;
  const std::int64_t H = s.hidden;
  const auto D = s.directions;
  const TensorType& xw = in[0];
  ops::require_f32("XW", xw);
  ops::require_rank("XW", xw, 3);
  s.steps = xw.shape[0];
  s.batch = xw.shape[1];
  KILN_CHECK(xw.shape[2] == D * G * H, ErrorKind::ShapeMismatch,
             describe("XW", xw) + " needs " + std::to_string(D * G * H) + " projections per step");
  const auto expect = [&](std::size_t slot, std::string_view what, DType dtype, const Shape& shape) {
    if (!has_input(node, slot)) return false;
    const TensorType& t = in[slot];
    KILN_CHECK(t.dtype == dtype && t.shape == shape, ErrorKind::ShapeMismatch,
               describe(what, t) + " must be " + type_str(TensorType{dtype, shape}));
    return true;
  };
  KILN_CHECK(has_input(node, 1), ErrorKind::InvalidArgument, "RT (the recurrence weights) is required");
  expect(1, "RT", DType::f32, {D, H, G * H});
  s.has_bias = expect(2, "RB", DType::f32, {D, G * H});
  s.has_lengths = expect(3, "sequence_lens", DType::i32, {s.batch});
  if (has_input(node, 4)) {
    const TensorType& state = in[4];
    s.initial_states = state.shape.empty() ? 0 : std::int64_t{state.shape[0]};
    KILN_CHECK(s.initial_states == 1 || (s.initial_states == 2 && s.cell == RecurrentCell::lstm),
               ErrorKind::ShapeMismatch,
               describe("initial_state", state) + " must hold H_0" + (s.cell == RecurrentCell::lstm ? " (and C_0)" : "") +
                   " along its first axis");
    expect(4, "initial_state", DType::f32, {s.initial_states, D, s.batch, H});
  }
  s.has_initial_h = s.initial_states >= 1;
  s.has_initial_c = s.initial_states == 2;
  s.has_peepholes = expect(5, "P", DType::f32, {D, 3 * H});
  KILN_CHECK(s.cell == RecurrentCell::lstm || !s.has_peepholes, ErrorKind::InvalidArgument, "P is an LSTM input");
  return s;
}

namespace ops {
namespace {

std::vector<TensorType> infer_recurrence(const Node& node, std::span<const TensorType> in) {
  const RecurrenceSpec s = recurrence_spec(node, in);
  const TensorType state{DType::f32, {s.directions, s.batch, s.hidden}};
  std::vector<TensorType> out = {{DType::f32, {s.steps, s.directions, s.batch, s.hidden}}, state};
  if (s.cell == RecurrentCell::lstm) out.push_back(state);
  return out;
}

std::vector<Tensor> reference_recurrence(const Node& node, std::span<const Tensor> in) {
  const std::vector<TensorType> types = types_of(in);
  const RecurrenceSpec s = recurrence_spec(node, types);
  const std::int64_t T = s.steps, B = s.batch, H = s.hidden, G = s.gates, D = s.directions;
  const auto xw = in[0].values<float>();
  const auto rt = in[1].values<float>();
  const std::vector<TensorType> out_types = infer_recurrence(node, types);
  Tensor y(DType::f32, out_types[0].shape), yh(DType::f32, out_types[1].shape), yc(DType::f32, out_types[1].shape);
  auto Y = y.values<float>();
  auto Yh = yh.values<float>();
  auto Yc = yc.values<float>();
  std::fill(Y.begin(), Y.end(), 0.0f);  // steps past a sequence's length stay zero
  auto clip = [&](double x) { return s.clip ? std::clamp(x, -*s.clip, *s.clip) : x; };
  std::vector<double> h(static_cast<std::size_t>(H)), c(static_cast<std::size_t>(H)), next(static_cast<std::size_t>(H));
  std::vector<double> pre(static_cast<std::size_t>(G * H)), reset_h(static_cast<std::size_t>(H));

  for (std::int64_t d = 0; d < D; ++d)
    for (std::int64_t b = 0; b < B; ++b) {
      const std::int64_t state_at = (d * B + b) * H;
      for (std::int64_t j = 0; j < H; ++j) {
        h[j] = s.has_initial_h ? in[4].values<float>()[state_at + j] : 0.0;
        c[j] = s.has_initial_c ? in[4].values<float>()[D * B * H + state_at + j] : 0.0;
      }
      const std::int64_t length = s.has_lengths ? std::clamp<std::int64_t>(in[3].values<std::int32_t>()[b], 0, T) : T;
      const auto& fn = [&](int k) -> const RecurrentFunction& { return s.function(static_cast<int>(d), k); };
      auto rb = [&](std::int64_t gate_row) {
        return s.has_bias ? double(in[2].values<float>()[d * G * H + gate_row]) : 0.0;
      };
      auto p = [&](int which, std::int64_t j) {
        return s.has_peepholes ? double(in[5].values<float>()[(d * 3 + which) * H + j]) : 0.0;
      };
      // sum_k v[k] R[d, gate_row, k]
      auto recur = [&](const std::vector<double>& v, std::int64_t gate_row) {
        double sum = 0;
        for (std::int64_t k = 0; k < H; ++k) sum += v[k] * rt[(d * H + k) * G * H + gate_row];
        return sum;
      };
      for (std::int64_t step = 0; step < length; ++step) {
        const std::int64_t t = s.backwards(static_cast<int>(d)) ? length - 1 - step : step;
        const std::int64_t x_at = (t * B + b) * D * G * H + d * G * H;
        for (std::int64_t g = 0; g < G; ++g)
          for (std::int64_t j = 0; j < H; ++j) {
            const std::int64_t row = g * H + j;
            const bool deferred = s.cell == RecurrentCell::gru && g == 2;  // GRU's h gate needs r first
            pre[row] = xw[x_at + row] + (deferred ? 0.0 : rb(row) + recur(h, row));
          }
        for (std::int64_t j = 0; j < H; ++j) {
          if (s.cell == RecurrentCell::lstm) {
            const double i = apply_recurrent(fn(0), clip(pre[j] + p(0, j) * c[j]));
            const double f = s.input_forget ? 1.0 - i : apply_recurrent(fn(0), clip(pre[2 * H + j] + p(2, j) * c[j]));
            const double g = apply_recurrent(fn(1), clip(pre[3 * H + j]));
            c[j] = f * c[j] + i * g;
            const double o = apply_recurrent(fn(0), clip(pre[H + j] + p(1, j) * c[j]));
            next[j] = o * apply_recurrent(fn(2), c[j]);
          } else if (s.cell == RecurrentCell::rnn) {
            next[j] = apply_recurrent(fn(0), clip(pre[j]));
          } else {
            reset_h[j] = apply_recurrent(fn(0), clip(pre[H + j])) * h[j];  // r * H_{t-1}
          }
        }
        if (s.cell == RecurrentCell::gru)
          for (std::int64_t j = 0; j < H; ++j) {
            const double z = apply_recurrent(fn(0), clip(pre[j]));
            const double r = apply_recurrent(fn(0), clip(pre[H + j]));
            const std::int64_t row = 2 * H + j;
            const double candidate_pre = s.linear_before_reset ? pre[row] + r * (recur(h, row) + rb(row))
                                                               : pre[row] + recur(reset_h, row) + rb(row);
            const double candidate = apply_recurrent(fn(1), clip(candidate_pre));
            next[j] = (1.0 - z) * candidate + z * h[j];
          }
        h = next;
        for (std::int64_t j = 0; j < H; ++j) Y[((t * D + d) * B + b) * H + j] = static_cast<float>(h[j]);
      }
      for (std::int64_t j = 0; j < H; ++j) {
        Yh[state_at + j] = static_cast<float>(h[j]);
        Yc[state_at + j] = static_cast<float>(c[j]);
      }
    }
  std::vector<Tensor> out = {std::move(y), std::move(yh)};
  if (s.cell == RecurrentCell::lstm) out.push_back(std::move(yc));
  return out;
}

}  // namespace

void register_recurrence_ops(OpTable& table) {
  OpSchema schema = make_schema("Recurrence", 2, 6, infer_recurrence, reference_recurrence,
                                "the time loop of an LSTM, GRU or RNN layer over precomputed input projections");
  schema.variadic_outputs = true;
  add_op(table, std::move(schema));
}

}  // namespace ops
}  // namespace kiln::graph

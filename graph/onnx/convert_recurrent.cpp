// ONNX's LSTM, GRU and RNN: each node becomes one projection of the whole
// input sequence (X W^T + Wb: a single MatMul over every step and both
// directions, which the GEMM template runs at full width) and kiln's
// Recurrence op, the time loop that is left (graph/recurrence.h). Weights
// are rearranged here once (folded when they are constants): W to [I, D*G*H]
// and R to its transpose, so that a step's recurrence reads consecutive
// gate columns. layout=1 (batch first) is transposed to and from ONNX's
// default layout around them.
#include "graph/onnx/convert_recurrent.h"

#include "graph/recurrence.h"
#include "src/base/check.h"

#include <algorithm>

namespace kiln::onnx_import {

using graph::Attributes;
using graph::ValueId;

namespace {

ValueId transpose(const OnnxNode& n, ImportContext& ctx, ValueId value, std::vector<std::int64_t> perm,
                  const std::string& suffix) {
  Attributes attrs;
  attrs.set("perm", std::move(perm));
  return ctx.emit_one(n, "Transpose", {value}, std::move(attrs), suffix);
}

ValueId reshape(const OnnxNode& n, ImportContext& ctx, ValueId value, std::vector<std::int64_t> shape,
                const std::string& suffix) {
  Attributes attrs;
  attrs.set("shape", std::move(shape));
  return ctx.emit_one(n, "Reshape", {value}, std::move(attrs), suffix);
}

// Columns [begin, end) of the last axis of a rank-2 value.
ValueId columns(const OnnxNode& n, ImportContext& ctx, ValueId value, std::int64_t begin, std::int64_t end,
                const std::string& suffix) {
  Attributes attrs;
  attrs.set("starts", std::vector<std::int64_t>{begin});
  attrs.set("ends", std::vector<std::int64_t>{end});
  attrs.set("axes", std::vector<std::int64_t>{1});
  return ctx.emit_one(n, "Slice", {value}, std::move(attrs), suffix);
}

// The `activations` attribute (a list of strings, which kiln's attribute
// map does not hold): read from the node itself.
std::vector<std::string> activation_names(const OnnxNode& n) {
  for (const onnx::AttributeProto& a : n.proto->attribute())
    if (a.name() == "activations") {
      KILN_CHECK(a.type() == onnx::AttributeProto_AttributeType_STRINGS, ErrorKind::Corrupt,
                 n.where + "attribute 'activations' must be a list of strings");
      return {a.strings().begin(), a.strings().end()};
    }
  return {};
}

std::vector<double> floats_attr(const OnnxNode& n, const std::string& name) {
  if (!n.attrs.has(name)) return {};
  const auto* values = std::get_if<std::vector<double>>(&n.attrs.all().at(name));
  KILN_CHECK(values != nullptr, ErrorKind::Corrupt, n.where + "attribute '" + name + "' must be a list of floats");
  return *values;
}

// The activations per direction with every alpha and beta resolved, as ONNX
// Runtime reads them: the defaults when the list is absent, one direction's
// list repeated for the other, and the alpha (beta) list consumed in order
// by the functions that take one, each falling back to its default.
void set_activations(const OnnxNode& n, int functions, int directions, Attributes& attrs) {
  static const std::vector<std::string> lstm = {"Sigmoid", "Tanh", "Tanh"}, gru = {"Sigmoid", "Tanh"}, rnn = {"Tanh"};
  std::vector<std::string> names = activation_names(n);
  if (names.empty()) names = functions == 3 ? lstm : functions == 2 ? gru : rnn;
  if (directions == 2 && static_cast<int>(names.size()) == functions) {
    const std::vector<std::string> one = names;
    names.insert(names.end(), one.begin(), one.end());
  }
  KILN_CHECK(static_cast<int>(names.size()) == functions * directions, ErrorKind::Corrupt,
             n.where + "takes " + std::to_string(functions * directions) + " activations, the node lists " +
                 std::to_string(names.size()));
  const std::vector<double> alphas = floats_attr(n, "activation_alpha"), betas = floats_attr(n, "activation_beta");
  std::size_t next_alpha = 0, next_beta = 0;
  std::string joined;
  std::vector<double> alpha, beta;
  for (const std::string& name : names) {
    const auto kind = graph::recurrent_activation(name);
    KILN_CHECK(kind.has_value(), ErrorKind::Unsupported,
               n.where + "activation '" + name + "' is not one of ONNX's recurrent activations");
    joined += (joined.empty() ? "" : ",") + std::string(graph::recurrent_activation_name(*kind));
    alpha.push_back(graph::takes_alpha(*kind) && next_alpha < alphas.size() ? alphas[next_alpha++]
                                                                           : graph::default_alpha(*kind));
    beta.push_back(graph::takes_beta(*kind) && next_beta < betas.size() ? betas[next_beta++]
                                                                       : graph::default_beta(*kind));
  }
  attrs.set("activations", joined);
  attrs.set("activation_alpha", alpha);
  attrs.set("activation_beta", beta);
}

std::vector<ValueId> convert_recurrent(const OnnxNode& n, ImportContext& ctx, const std::string& cell) {
  const int gates = cell == "LSTM" ? 4 : cell == "GRU" ? 3 : 1;
  const int functions = cell == "LSTM" ? 3 : cell == "GRU" ? 2 : 1;
  for (std::size_t slot : {0, 1, 2})
    KILN_CHECK(present(n, slot), ErrorKind::Corrupt, n.where + "X, W and R are required");
  const std::string direction = n.attrs.get_string("direction", "forward");
  const std::int64_t D = direction == "bidirectional" ? 2 : 1;
  const bool batch_first = n.attrs.get_int("layout", 0) == 1;
  KILN_CHECK(n.attrs.get_int("layout", 0) == 0 || batch_first, ErrorKind::Corrupt, n.where + "layout must be 0 or 1");

  const graph::TensorType x_type = ctx.type(n.inputs[0]);  // copies: emitting nodes moves the graph's values
  const graph::TensorType w_type = ctx.type(n.inputs[1]);
  const graph::TensorType r_type = ctx.type(n.inputs[2]);
  KILN_CHECK(x_type.shape.size() == 3 && w_type.shape.size() == 3 && r_type.shape.size() == 3, ErrorKind::ShapeMismatch,
             n.where + "X, W and R must have rank 3: X " + type_str(x_type) + ", W " + type_str(w_type) + ", R " +
                 type_str(r_type));
  const std::int64_t H = n.attrs.get_int("hidden_size", r_type.shape[2]);
  const std::int64_t GH = gates * H;
  const std::int64_t I = x_type.shape[2];
  KILN_CHECK(H > 0 && w_type.shape == (Shape{D, GH, I}) && r_type.shape == (Shape{D, GH, H}),
             ErrorKind::ShapeMismatch,
             n.where + "with hidden_size " + std::to_string(H) + ", " + std::to_string(D) + " direction(s) and input " +
                 "size " + std::to_string(I) + ", W must be " + shape_str({D, GH, I}) + " and R " +
                 shape_str({D, GH, H}) + "; got W " + shape_str(w_type.shape) + ", R " + shape_str(r_type.shape));

  Attributes attrs;
  attrs.set("cell", cell);
  attrs.set("hidden_size", H);
  attrs.set("direction", direction);
  set_activations(n, functions, static_cast<int>(D), attrs);
  if (n.attrs.has("clip")) attrs.set("clip", n.attrs.get_float("clip", 0.0));
  if (cell == "LSTM" && n.attrs.get_int("input_forget", 0) != 0) attrs.set("input_forget", std::int64_t{1});
  if (cell == "GRU" && n.attrs.get_int("linear_before_reset", 0) != 0)
    attrs.set("linear_before_reset", std::int64_t{1});

  // Every step's input projections at once: [T, B, I] x [I, D*G*H] (+ Wb).
  const ValueId x = batch_first ? transpose(n, ctx, n.inputs[0], {1, 0, 2}, "x_time_major") : n.inputs[0];
  const ValueId w_columns = transpose(n, ctx, n.inputs[1], {2, 0, 1}, "w_t");
  const ValueId w = reshape(n, ctx, w_columns, {I, D * GH}, "w_columns");
  ValueId xw = ctx.emit_one(n, "MatMul", {x, w}, {}, "input_projection");
  ValueId rb = -1;
  if (present(n, 3)) {
    const graph::TensorType b_type = ctx.type(n.inputs[3]);
    KILN_CHECK(b_type.shape == (Shape{D, 2 * GH}), ErrorKind::ShapeMismatch,
               n.where + "B must be " + shape_str({D, 2 * GH}) + ", got " + type_str(b_type));
    // Wb + Rb joins the projections, except GRU's Rb, which its candidate gate needs apart.
    ValueId bias = columns(n, ctx, n.inputs[3], 0, GH, "wb");
    rb = columns(n, ctx, n.inputs[3], GH, 2 * GH, "rb");
    if (cell != "GRU") {
      bias = ctx.emit_one(n, "Add", {bias, rb}, {}, "bias");
      rb = -1;
    }
    xw = ctx.emit_one(n, "Add", {xw, reshape(n, ctx, bias, {D * GH}, "bias_flat")}, {}, "input_bias");
  }
  const ValueId rt = transpose(n, ctx, n.inputs[2], {0, 2, 1}, "r_t");

  ValueId lengths = -1;
  if (present(n, 4)) {
    lengths = n.inputs[4];
    if (ctx.type(lengths).dtype != DType::i32) {
      Attributes cast;
      cast.set("to", std::int64_t{6});  // INT32
      lengths = ctx.emit_one(n, "Cast", {lengths}, std::move(cast), "sequence_lens_i32");
    }
  }
  // initial_h (and initial_c) as one [S, D, B, H] input; a missing initial_h
  // beside a given initial_c is zeros.
  const Shape state_shape = {D, x_type.shape[batch_first ? 0 : 1], H};
  auto state = [&](std::size_t slot, const std::string& name) -> ValueId {
    if (!present(n, slot)) return -1;
    const graph::TensorType t = ctx.type(n.inputs[slot]);
    const Shape expected = batch_first ? Shape{state_shape[1], D, H} : state_shape;
    KILN_CHECK(t.shape == expected, ErrorKind::ShapeMismatch,
               n.where + name + " must be " + shape_str(expected) + ", got " + type_str(t));
    const ValueId major = batch_first ? transpose(n, ctx, n.inputs[slot], {1, 0, 2}, name + "_direction_major") : n.inputs[slot];
    return reshape(n, ctx, major, {1, D, state_shape[1], H}, name + "_stacked");
  };
  ValueId initial_state = state(5, "initial_h");
  if (cell == "LSTM" && present(n, 6)) {
    if (initial_state < 0) initial_state = ctx.add_constant(n, Tensor(DType::f32, {1, D, state_shape[1], H}));
    Attributes concat;
    concat.set("axis", std::int64_t{0});
    initial_state =
        ctx.emit_one(n, "Concat", {initial_state, state(6, "initial_c")}, std::move(concat), "initial_state");
  }
  std::vector<ValueId> inputs = {xw, rt, rb, lengths, initial_state};
  if (cell == "LSTM") {
    inputs.push_back(present(n, 7) ? n.inputs[7] : -1);
  } else {
    for (std::size_t slot = 6; slot < n.inputs.size(); ++slot)
      KILN_CHECK(!present(n, slot), ErrorKind::Corrupt, n.where + "has more inputs than " + cell + " takes");
  }
  while (!inputs.empty() && inputs.back() < 0) inputs.pop_back();

  std::vector<ValueId> out = ctx.emit(n, "Recurrence", std::move(inputs), std::move(attrs));
  if (batch_first) {
    out[0] = transpose(n, ctx, out[0], {2, 0, 1, 3}, "y_batch_first");
    for (std::size_t i = 1; i < out.size(); ++i)
      out[i] = transpose(n, ctx, out[i], {1, 0, 2}, i == 1 ? "y_h_batch_first" : "y_c_batch_first");
  }
  return out;
}

}  // namespace

std::vector<ValueId> convert_lstm(const OnnxNode& n, ImportContext& ctx) { return convert_recurrent(n, ctx, "LSTM"); }
std::vector<ValueId> convert_gru(const OnnxNode& n, ImportContext& ctx) { return convert_recurrent(n, ctx, "GRU"); }
std::vector<ValueId> convert_rnn(const OnnxNode& n, ImportContext& ctx) { return convert_recurrent(n, ctx, "RNN"); }

}  // namespace kiln::onnx_import

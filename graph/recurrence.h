// The Recurrence op's reading of its node: the recurrent cell (ONNX's LSTM,
// GRU or RNN), its directions, activations and options, validated once and
// shared by the reference (graph/ops/recurrence.cpp) and the kernel
// (src/lower/lower_recurrence.cpp).
//
// Recurrence is kiln's op for the time loop of ONNX's recurrent layers. The
// importer splits each LSTM/GRU/RNN node into one projection of every time
// step's input (X W^T + Wb, a MatMul of the whole sequence) and this loop,
// which only has H_{t-1} R^T left to do per step:
//
//   inputs  0 XW [T, B, D*G*H]  the projections, direction-major, gates in ONNX order
//                               (LSTM i, o, f, c; GRU z, r, h; RNN one)
//           1 RT [D, H, G*H]    R transposed: RT[d, k, g*H + j] = R[d, g*H + j, k]
//           2 RB [D, G*H]       optional recurrence bias (Rb; the importer folds it into XW
//                               except for GRU, whose candidate needs Rb_h apart)
//           3 sequence_lens [B] optional i32
//           4 initial_state [S, D, B, H] optional: S = 1, H_0; S = 2 (LSTM), H_0 then C_0
//           5 P [D, 3*H]        optional LSTM peepholes (i, o, f)
//   (One state input and a folded bias keep the kernel within 8 buffers, the
//   Vulkan 1.1 minimum.)
//   outputs Y [T, D, B, H] (zero past a sequence's length), Y_h [D, B, H], and for LSTM Y_c [D, B, H]
//   attributes cell ("LSTM", "GRU", "RNN"), hidden_size, direction ("forward", "reverse",
//           "bidirectional"), activations (comma-separated, per direction: LSTM f,g,h; GRU f,g;
//           RNN f), activation_alpha and activation_beta (one per activation, resolved),
//           clip (> 0: pre-activations clamped to [-clip, clip]), input_forget (LSTM),
//           linear_before_reset (GRU)
#pragma once

#include "graph/ir.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::graph {

enum class RecurrentCell { lstm, gru, rnn };

// ONNX's activation functions for recurrent layers.
enum class RecurrentActivation {
  sigmoid, tanh, relu, affine, leaky_relu, thresholded_relu, scaled_tanh, hard_sigmoid, elu, softsign, softplus,
};

struct RecurrentFunction {
  RecurrentActivation kind = RecurrentActivation::sigmoid;
  double alpha = 0, beta = 0;
};

// The function ONNX names `name` (case-insensitive, as ONNX Runtime reads it), or nullopt.
std::optional<RecurrentActivation> recurrent_activation(std::string_view name);
std::string_view recurrent_activation_name(RecurrentActivation kind);
// Whether the function reads alpha / beta, and ONNX Runtime's defaults for them.
bool takes_alpha(RecurrentActivation kind);
bool takes_beta(RecurrentActivation kind);
double default_alpha(RecurrentActivation kind);
double default_beta(RecurrentActivation kind);
// The function at x (the reference's double precision).
double apply_recurrent(const RecurrentFunction& f, double x);

struct RecurrenceSpec {
  RecurrentCell cell = RecurrentCell::lstm;
  int gates = 4;                 // G: LSTM 4, GRU 3, RNN 1
  int functions = 3;             // activations per direction: LSTM 3, GRU 2, RNN 1
  std::int64_t hidden = 0;       // H
  std::int64_t steps = 0;        // T
  std::int64_t batch = 0;        // B
  int directions = 1;            // D
  bool reverse = false;          // one direction, run backwards
  std::vector<RecurrentFunction> activations;  // directions * functions
  std::optional<double> clip;
  bool input_forget = false;
  bool linear_before_reset = false;
  bool has_bias = false, has_lengths = false, has_initial_h = false, has_initial_c = false, has_peepholes = false;
  std::int64_t initial_states = 0;  // S of initial_state (0: none)

  // Whether direction d runs from the last valid step to the first.
  bool backwards(int d) const { return reverse || d == 1; }
  const RecurrentFunction& function(int d, int k) const {
    return activations[static_cast<std::size_t>(d * functions + k)];
  }
};

// Validates a Recurrence node against its input types (ShapeMismatch or
// InvalidArgument naming what is wrong).
RecurrenceSpec recurrence_spec(const Node& node, std::span<const TensorType> inputs);

}  // namespace kiln::graph

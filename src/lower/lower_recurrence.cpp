// Recurrence (graph/recurrence.h): the whole time loop of a recurrent layer
// in one dispatch. A workgroup owns one (direction, batch row) sequence and
// keeps its hidden state in shared memory; each invocation owns hidden units
// lane, lane + W, ... and per step computes their gates' recurrence dot
// products over the shared state, the gate math and the new state, fused.
// Barriers separate reading the old state from writing the new one. The
// input projections came from one GEMM over all steps before it, so a step
// only reads them. The cell state (LSTM) stays in the Y_c output, which
// only its own invocation touches.
#include "graph/recurrence.h"
#include "src/lower/index.h"
#include "src/lower/lowerings.h"

#include <algorithm>

namespace kiln::lower {

using graph::RecurrenceSpec;
using graph::RecurrentActivation;
using graph::RecurrentCell;
using graph::RecurrentFunction;
using kir::Access;
using kir::Expr;
using kir::ScalarType;
using kir::Stmt;

namespace {

Expr sigmoid(Expr x) { return kir::f32(1.0) / (kir::f32(1.0) + kir::exp(-x)); }

Expr activate(const RecurrentFunction& f, Expr x) {
  const Expr zero = kir::f32(0.0), one = kir::f32(1.0), alpha = kir::f32(f.alpha), beta = kir::f32(f.beta);
  switch (f.kind) {
    case RecurrentActivation::sigmoid: return sigmoid(x);
    case RecurrentActivation::tanh: return kir::tanh(x);
    case RecurrentActivation::relu: return kir::max(x, zero);
    case RecurrentActivation::affine: return alpha * x + beta;
    case RecurrentActivation::leaky_relu: return kir::select(x >= zero, x, alpha * x);
    case RecurrentActivation::thresholded_relu: return kir::select(x > alpha, x, zero);
    case RecurrentActivation::scaled_tanh: return alpha * kir::tanh(beta * x);
    case RecurrentActivation::hard_sigmoid: return kir::min(kir::max(alpha * x + beta, zero), one);
    case RecurrentActivation::elu: return kir::select(x >= zero, x, alpha * (kir::exp(x) - one));
    case RecurrentActivation::softsign: return x / (one + kir::abs(x));
    case RecurrentActivation::softplus: return kir::select(x > kir::f32(30.0), x, kir::log(one + kir::exp(x)));
  }
  return x;
}

// Invocations per workgroup: the hidden size rounded up to a power of two,
// at least 32 and at most 256 and the device's limit; larger layers give
// each invocation several units.
std::uint32_t workgroup_for(std::int64_t hidden, const LowerTarget& target) {
  std::uint32_t size = 32;
  const std::uint32_t limit = std::min<std::uint32_t>(256, target.max_workgroup_invocations);
  while (size < limit && static_cast<std::int64_t>(size) < hidden) size *= 2;
  return std::min(size, limit);
}

// GRU without linear_before_reset needs r * H_{t-1} of every unit before
// any candidate: a second shared array and a third barrier per step.
bool needs_reset_state(const RecurrenceSpec& s) { return s.cell == RecurrentCell::gru && !s.linear_before_reset; }

}  // namespace

std::optional<std::string> recurrence_unsupported(const OpContext& ctx) {
  std::vector<graph::TensorType> types;
  for (std::size_t slot = 0; slot < ctx.inputs.size(); ++slot)
    types.push_back(ctx.inputs[slot] ? *ctx.inputs[slot] : graph::TensorType{});
  const RecurrenceSpec s = graph::recurrence_spec(ctx.node, types);
  const std::uint64_t shared = (needs_reset_state(s) ? 2u : 1u) * static_cast<std::uint64_t>(s.hidden) * 4u;
  if (shared > ctx.target.max_shared_memory_bytes)
    return "hidden size " + std::to_string(s.hidden) + " needs " + std::to_string(shared) +
           " bytes of workgroup shared memory, more than the device's " +
           std::to_string(ctx.target.max_shared_memory_bytes);
  return std::nullopt;
}

kir::Kernel lower_recurrence(const OpContext& ctx) {
  std::vector<graph::TensorType> types;
  for (std::size_t slot = 0; slot < ctx.inputs.size(); ++slot)
    types.push_back(ctx.inputs[slot] ? *ctx.inputs[slot] : graph::TensorType{});
  const RecurrenceSpec s = graph::recurrence_spec(ctx.node, types);
  const std::int64_t T = s.steps, B = s.batch, H = s.hidden, G = s.gates, D = s.directions, GH = G * H;
  const std::uint32_t W = workgroup_for(H, ctx.target);
  const std::int64_t slots = (H + W - 1) / W;  // hidden units per invocation
  const bool lstm = s.cell == RecurrentCell::lstm, gru = s.cell == RecurrentCell::gru;

  kir::Kernel kernel = make_kernel("recurrence_" + std::string(lstm ? "lstm" : gru ? "gru" : "rnn"), D * B * W);
  kernel.workgroup_size = W;
  const kir::Buf xw = kernel.add_buffer("xw", ScalarType::f32, Access::read);
  const kir::Buf rt = kernel.add_buffer("rt", ScalarType::f32, Access::read);
  const kir::Buf rb = s.has_bias ? kernel.add_buffer("rb", ScalarType::f32, Access::read) : kir::Buf{};
  const kir::Buf lengths = s.has_lengths ? kernel.add_buffer("lengths", ScalarType::i32, Access::read) : kir::Buf{};
  const kir::Buf initial =
      s.initial_states ? kernel.add_buffer("initial_state", ScalarType::f32, Access::read) : kir::Buf{};
  const kir::Buf peep = s.has_peepholes ? kernel.add_buffer("peepholes", ScalarType::f32, Access::read) : kir::Buf{};
  const kir::Buf y = kernel.add_buffer("y", ScalarType::f32, Access::write);
  const kir::Buf yh = kernel.add_buffer("y_h", ScalarType::f32, Access::write);
  const kir::Buf yc = lstm ? kernel.add_buffer("y_c", ScalarType::f32, Access::read_write) : kir::Buf{};
  const kir::Shared state = kernel.add_shared("state", ScalarType::f32, H);
  const kir::Shared reset = needs_reset_state(s) ? kernel.add_shared("reset_state", ScalarType::f32, H) : kir::Shared{};
  std::vector<Stmt>& body = kernel.body;

  // The workgroup's sequence: direction d, batch row b.
  const Expr group = declare_index(body, "group", kir::workgroup_index());
  const Expr d = D == 1 ? kir::i32(0) : declare_index(body, "d", group / kir::i32(B));
  const Expr b = D == 1 ? group : declare_index(body, "b", group % kir::i32(B));
  const Expr lane = declare_index(body, "lane", kir::local_index());
  const Expr state_at = declare_index(body, "state_at", IndexSum().add(d, B * H).add(b, H).expr());
  const Expr length = declare_index(
      body, "length",
      s.has_lengths ? kir::min(kir::max(kir::load(lengths, b, ScalarType::i32), kir::i32(0)), kir::i32(T)) : kir::i32(T));
  auto unit = [&](std::int64_t k) { return i32_var("j" + std::to_string(k)); };
  auto owns = [&](std::int64_t k) { return unit(k) < kir::i32(H); };
  for (std::int64_t k = 0; k < slots; ++k)
    body.push_back(kir::declare("j" + std::to_string(k), ScalarType::i32, IndexSum().add(lane).add(k * W).expr()));

  // The initial state.
  for (std::int64_t k = 0; k < slots; ++k) {
    const Expr at = IndexSum().add(state_at).add(unit(k)).expr();
    const Expr h0 = s.has_initial_h ? kir::load(initial, at, ScalarType::f32) : kir::f32(0.0);
    std::vector<Stmt> init = {kir::store(state, unit(k), h0)};
    if (lstm) {
      const Expr c0 =
          s.has_initial_c ? kir::load(initial, IndexSum(D * B * H).add(at).expr(), ScalarType::f32) : kir::f32(0.0);
      init.push_back(kir::store(yc, at, c0));
    }
    body.push_back(kir::branch(owns(k), std::move(init)));
  }
  body.push_back(kir::barrier());

  // One step: `step` counts from 0; t is the time index it processes.
  const bool two_directions = D == 2;
  auto clip = [&](Expr x) { return s.clip ? kir::min(kir::max(x, kir::f32(-*s.clip)), kir::f32(*s.clip)) : x; };
  // The per-direction activations (a bidirectional layer's may differ): select by d.
  auto apply = [&](int which, Expr x) {
    const RecurrentFunction& forward = s.function(0, which);
    if (!two_directions) return activate(forward, x);
    const RecurrentFunction& backward = s.function(1, which);
    if (forward.kind == backward.kind && forward.alpha == backward.alpha && forward.beta == backward.beta)
      return activate(forward, x);
    return kir::select(kir::eq(d, kir::i32(0)), activate(forward, x), activate(backward, x));
  };

  std::vector<Stmt> step_body;
  const Expr step = i32_var("step");
  const Expr valid = kir::var("valid", ScalarType::boolean);
  step_body.push_back(kir::declare("valid", ScalarType::boolean, step < length));
  // Backwards: the valid steps run from length - 1 down to 0.
  Expr t_value = step;
  if (s.reverse) t_value = kir::select(valid, length - kir::i32(1) - step, step);
  else if (two_directions) t_value = kir::select(valid && kir::eq(d, kir::i32(1)), length - kir::i32(1) - step, step);
  const Expr t = declare_index(step_body, "t", t_value);
  const Expr x_row = declare_index(step_body, "x_row", IndexSum().add(t, B * D * GH).add(b, D * GH).add(d, GH).expr());
  const Expr y_row = declare_index(step_body, "y_row", IndexSum().add(t, D * B * H).add(state_at).expr());

  auto gate_name = [](std::int64_t g, std::int64_t k) { return "pre" + std::to_string(g) + "_" + std::to_string(k); };
  auto pre = [&](std::int64_t g, std::int64_t k) { return f32_var(gate_name(g, k)); };
  // One pass over the shared state for several gates of unit k: "pre<g>_<k>"
  // = XW + RB + sum_kk source[kk] RT[d, kk, g*H + j] for `gates`, and
  // "pre<g>_<k>_r" = the sum alone for `bare` (GRU's candidate).
  auto recurrence = [&](std::int64_t k, const std::vector<std::int64_t>& gates, const std::vector<std::int64_t>& bare,
                        kir::Shared source) {
    std::vector<Stmt> stmts;
    std::vector<std::pair<std::string, std::int64_t>> sums;
    for (std::int64_t g : gates) {
      const Expr column = IndexSum().add(g * H).add(unit(k)).expr();
      Expr init = kir::load(xw, IndexSum().add(x_row).add(column).expr(), ScalarType::f32);
      if (s.has_bias) init = init + kir::load(rb, IndexSum().add(d, GH).add(column).expr(), ScalarType::f32);
      stmts.push_back(kir::declare(gate_name(g, k), ScalarType::f32, init));
      sums.emplace_back(gate_name(g, k), g);
    }
    for (std::int64_t g : bare) {
      stmts.push_back(kir::declare(gate_name(g, k) + "_r", ScalarType::f32, kir::f32(0.0)));
      sums.emplace_back(gate_name(g, k) + "_r", g);
    }
    const std::string kk = "kk" + std::to_string(k);
    std::vector<Stmt> dot = {kir::declare("h_kk", ScalarType::f32, kir::load(source, i32_var(kk), ScalarType::f32))};
    for (const auto& [acc, g] : sums) {
      const Expr weight =
          kir::load(rt, IndexSum().add(d, H * GH).add(i32_var(kk), GH).add(g * H).add(unit(k)).expr(), ScalarType::f32);
      dot.push_back(kir::assign(acc, f32_var(acc) + f32_var("h_kk") * weight));
    }
    stmts.push_back(kir::loop(kk, kir::i32(0), kir::i32(H), std::move(dot)));
    return stmts;
  };
  auto candidate_input = [&](std::int64_t k) {  // XW_h (Wb_h folded in)
    return kir::load(xw, IndexSum().add(x_row).add(2 * H).add(unit(k)).expr(), ScalarType::f32);
  };
  auto candidate_bias = [&](std::int64_t k) {  // Rb_h
    return s.has_bias ? kir::load(rb, IndexSum().add(d, GH).add(2 * H).add(unit(k)).expr(), ScalarType::f32)
                      : kir::f32(0.0);
  };

  // Phase 1 (every cell): the gates, the new state into next_k.
  for (std::int64_t k = 0; k < slots; ++k) {
    step_body.push_back(kir::declare("next" + std::to_string(k), ScalarType::f32, kir::f32(0.0)));
    if (gru) step_body.push_back(kir::declare("z" + std::to_string(k), ScalarType::f32, kir::f32(0.0)));
  }
  for (std::int64_t k = 0; k < slots; ++k) {
    const std::string next = "next" + std::to_string(k);
    const Expr previous = kir::load(state, unit(k), ScalarType::f32);
    const Expr y_at = IndexSum().add(y_row).add(unit(k)).expr();
    std::vector<Stmt> compute;
    if (lstm) {
      for (Stmt& st : recurrence(k, {0, 1, 2, 3}, {}, state)) compute.push_back(std::move(st));
      const Expr c_at = IndexSum().add(state_at).add(unit(k)).expr();
      compute.push_back(kir::declare("c_prev", ScalarType::f32, kir::load(yc, c_at, ScalarType::f32)));
      auto peephole = [&](std::int64_t which) {
        return kir::load(peep, IndexSum().add(d, 3 * H).add(which * H).add(unit(k)).expr(), ScalarType::f32);
      };
      Expr i_pre = pre(0, k);
      if (s.has_peepholes) i_pre = i_pre + peephole(0) * f32_var("c_prev");
      compute.push_back(kir::declare("gate_i", ScalarType::f32, apply(0, clip(i_pre))));
      if (s.input_forget) {
        compute.push_back(kir::declare("gate_f", ScalarType::f32, kir::f32(1.0) - f32_var("gate_i")));
      } else {
        Expr f_pre = pre(2, k);
        if (s.has_peepholes) f_pre = f_pre + peephole(2) * f32_var("c_prev");
        compute.push_back(kir::declare("gate_f", ScalarType::f32, apply(0, clip(f_pre))));
      }
      compute.push_back(kir::declare("gate_g", ScalarType::f32, apply(1, clip(pre(3, k)))));
      compute.push_back(kir::declare("cell", ScalarType::f32,
                                     f32_var("gate_f") * f32_var("c_prev") + f32_var("gate_i") * f32_var("gate_g")));
      Expr o_pre = pre(1, k);
      if (s.has_peepholes) o_pre = o_pre + peephole(1) * f32_var("cell");
      compute.push_back(kir::declare("gate_o", ScalarType::f32, apply(0, clip(o_pre))));
      compute.push_back(kir::store(yc, c_at, f32_var("cell")));
      compute.push_back(kir::assign(next, f32_var("gate_o") * apply(2, f32_var("cell"))));
      compute.push_back(kir::store(y, y_at, kir::var(next, ScalarType::f32)));
    } else if (s.cell == RecurrentCell::rnn) {
      for (Stmt& st : recurrence(k, {0}, {}, state)) compute.push_back(std::move(st));
      compute.push_back(kir::assign(next, apply(0, clip(pre(0, k)))));
      compute.push_back(kir::store(y, y_at, kir::var(next, ScalarType::f32)));
    } else {
      // GRU: z and r now; the candidate needs r * H_{t-1} (all units, after a
      // barrier) unless linear_before_reset, where it needs H_{t-1} R_h only.
      const bool linear = s.linear_before_reset;
      for (Stmt& st : recurrence(k, {0, 1}, linear ? std::vector<std::int64_t>{2} : std::vector<std::int64_t>{}, state))
        compute.push_back(std::move(st));
      compute.push_back(kir::assign("z" + std::to_string(k), apply(0, clip(pre(0, k)))));
      compute.push_back(kir::declare("gate_r", ScalarType::f32, apply(0, clip(pre(1, k)))));
      if (linear) {
        const Expr recurrent = f32_var(gate_name(2, k) + "_r") + candidate_bias(k);
        const Expr candidate = apply(1, clip(candidate_input(k) + f32_var("gate_r") * recurrent));
        const Expr z = f32_var("z" + std::to_string(k));
        compute.push_back(kir::assign(next, (kir::f32(1.0) - z) * candidate + z * previous));
        compute.push_back(kir::store(y, y_at, kir::var(next, ScalarType::f32)));
      } else {
        compute.push_back(kir::store(reset, unit(k), f32_var("gate_r") * previous));
      }
    }
    // Past the sequence's length: Y is zero and the state stays.
    std::vector<Stmt> idle = {kir::assign(next, previous), kir::store(y, y_at, kir::f32(0.0))};
    if (needs_reset_state(s)) idle.push_back(kir::store(reset, unit(k), kir::f32(0.0)));
    step_body.push_back(kir::branch(owns(k), {kir::branch(valid, std::move(compute), std::move(idle))}));
  }
  if (needs_reset_state(s)) {
    // Phase 2 (GRU): the candidate from r * H_{t-1}, shared by every unit.
    step_body.push_back(kir::barrier());
    for (std::int64_t k = 0; k < slots; ++k) {
      const std::string next = "next" + std::to_string(k);
      std::vector<Stmt> compute = recurrence(k, {}, {2}, reset);
      const Expr candidate_pre = candidate_input(k) + f32_var(gate_name(2, k) + "_r") + candidate_bias(k);
      const Expr z = f32_var("z" + std::to_string(k));
      compute.push_back(kir::declare("candidate", ScalarType::f32, apply(1, clip(candidate_pre))));
      compute.push_back(kir::assign(next, (kir::f32(1.0) - z) * f32_var("candidate") +
                                              z * kir::load(state, unit(k), ScalarType::f32)));
      compute.push_back(kir::store(y, IndexSum().add(y_row).add(unit(k)).expr(), kir::var(next, ScalarType::f32)));
      step_body.push_back(kir::branch(owns(k) && valid, std::move(compute)));
    }
  }
  // Every unit has read the old state: replace it.
  step_body.push_back(kir::barrier());
  for (std::int64_t k = 0; k < slots; ++k)
    step_body.push_back(kir::branch(owns(k), {kir::store(state, unit(k), f32_var("next" + std::to_string(k)))}));
  step_body.push_back(kir::barrier());
  body.push_back(kir::loop("step", kir::i32(0), kir::i32(T), std::move(step_body)));

  for (std::int64_t k = 0; k < slots; ++k)
    body.push_back(kir::branch(owns(k), {kir::store(yh, IndexSum().add(state_at).add(unit(k)).expr(),
                                                    kir::load(state, unit(k), ScalarType::f32))}));
  return kernel;
}

}  // namespace kiln::lower

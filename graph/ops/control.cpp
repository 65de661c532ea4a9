// Control flow: If with a condition known only at run time, Loop and Scan. The node holds
// its two branches as subgraphs (Node::subgraphs: then, else); its inputs are
// the condition, then the values of the enclosing graph the then-branch
// reads (attribute `then_inputs` counts them), then those the else-branch
// reads, each in its branch's input order. The condition is read on the host
// and the chosen branch runs, so an If is always a graph break. Loop: a body
// run until its trip count or condition stops it; Scan: a body run once per
// slice. Each op runs its subgraphs through a runner (OpSchema::
// run_with_subgraphs): the reference's, or the executor's, which compiles them.
#include "graph/op_registry.h"
#include "graph/ops/ops.h"
#include "src/base/check.h"

#include <algorithm>
#include <string>

namespace kiln::graph::ops {

namespace {

struct Branches {
  const Graph& then_branch;
  const Graph& else_branch;
  std::size_t then_inputs;
};

Branches branches_of(const Node& node, std::size_t inputs) {
  KILN_CHECK(node.subgraphs.size() == 2 && node.subgraphs[0] && node.subgraphs[1], ErrorKind::InvalidArgument,
             "needs two branches (then, else), has " + std::to_string(node.subgraphs.size()));
  const Graph& then_branch = *node.subgraphs[0];
  const Graph& else_branch = *node.subgraphs[1];
  const std::int64_t then_inputs = node.attrs.get_int("then_inputs", -1);
  KILN_CHECK(then_inputs >= 0 && static_cast<std::size_t>(then_inputs) == then_branch.inputs().size() &&
                 inputs == 1 + then_branch.inputs().size() + else_branch.inputs().size(),
             ErrorKind::InvalidArgument,
             "has " + std::to_string(inputs) + " inputs and then_inputs = " + std::to_string(then_inputs) +
                 "; its branches take " + std::to_string(then_branch.inputs().size()) + " and " +
                 std::to_string(else_branch.inputs().size()) + " values after the condition");
  KILN_CHECK(then_branch.outputs().size() == else_branch.outputs().size(), ErrorKind::InvalidArgument,
             "the branches have " + std::to_string(then_branch.outputs().size()) + " and " +
                 std::to_string(else_branch.outputs().size()) + " outputs");
  return {then_branch, else_branch, static_cast<std::size_t>(then_inputs)};
}

// Checks that the node passes `got` for the subgraph's input `i`: a probe
// (concrete) or the very type the subgraph was built for. `what` names the
// subgraph ("then-branch", "body").
void check_subgraph_input(const Graph& subgraph, std::size_t i, const TensorType& got, const std::string& what) {
  const TensorType& want = subgraph.value(subgraph.inputs()[i]).type;
  KILN_CHECK(got == want || (!got.dynamic && type_accepts(want, got)), ErrorKind::ShapeMismatch,
             "the " + what + "'s input '" + subgraph.value(subgraph.inputs()[i]).name + "' is " + type_str(want) +
                 ", the node passes " + type_str(got));
}

// `slices`, each of one shape, one after another along a new axis 0 (an
// empty list gives [0] + `each`, which must then be static).
Tensor stacked(const TensorType& each, const std::vector<Tensor>& slices, const std::string& what) {
  KILN_CHECK(!slices.empty() || !each.dynamic, ErrorKind::ShapeMismatch,
             what + " has no slice and its shape depends on data");
  Shape shape = slices.empty() ? Shape(each.shape) : slices.front().shape();
  shape.insert(shape.begin(), static_cast<std::int64_t>(slices.size()));
  Tensor out(each.dtype, shape);
  std::size_t offset = 0;
  for (const Tensor& t : slices) {
    std::copy(t.bytes().begin(), t.bytes().end(), out.bytes().begin() + static_cast<std::ptrdiff_t>(offset));
    offset += t.bytes().size();
  }
  return out;
}

// An output typed to hold what either branch makes.
TensorType joined(const TensorType& a, const TensorType& b, std::size_t index) {
  KILN_CHECK(a.dtype == b.dtype, ErrorKind::ShapeMismatch,
             "output " + std::to_string(index) + " is " + type_str(a) + " in the then-branch, " + type_str(b) +
                 " in the else-branch");
  if (a == b) return a;
  const bool rank_known = (!a.dynamic || !a.shape.empty()) && (!b.dynamic || !b.shape.empty());
  if (!rank_known || a.shape.size() != b.shape.size()) return dynamic_type(a.dtype, {});
  Shape shape = a.shape;
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != b.shape[d]) shape[d] = kDynamicDim;
  return dynamic_type(a.dtype, std::move(shape));
}

std::vector<TensorType> infer_if(const Node& node, std::span<const TensorType> in) {
  // then_error / else_error: that branch could not be imported at these
  // shapes (the importer put the other in its place); taking it is this error.
  check_known_attributes(node, {"then_inputs", "then_error", "else_error"});
  const Branches b = branches_of(node, in.size());
  KILN_CHECK(in[0].dtype == DType::boolean && !in[0].dynamic && num_elements(in[0].shape) == 1,
             ErrorKind::ShapeMismatch, "the condition must be one bool, got " + describe("condition", in[0]));
  auto check_inputs = [&](const Graph& branch, std::size_t first, const char* which) {
    for (std::size_t i = 0; i < branch.inputs().size(); ++i)
      check_subgraph_input(branch, i, in[first + i], std::string(which) + "-branch");
  };
  check_inputs(b.then_branch, 1, "then");
  check_inputs(b.else_branch, 1 + b.then_inputs, "else");
  std::vector<TensorType> out;
  for (std::size_t i = 0; i < b.then_branch.outputs().size(); ++i)
    out.push_back(joined(b.then_branch.value(b.then_branch.outputs()[i]).type,
                         b.else_branch.value(b.else_branch.outputs()[i]).type, i));
  return out;
}

using Runner = OpSchema::SubgraphRunner;

std::vector<Tensor> run_if(const Node& node, std::span<const Tensor> in, const Runner& run) {
  const Branches b = branches_of(node, in.size());
  const bool taken = in[0].bytes()[0] != std::byte{0};
  const std::string error = node.attrs.get_string(taken ? "then_error" : "else_error", "");
  KILN_CHECK(error.empty(), ErrorKind::ShapeMismatch,
             std::string("the condition chose the ") + (taken ? "then" : "else") +
                 "-branch, which could not be imported at these shapes: " + error);
  if (taken) return run(b.then_branch, in.subspan(1, b.then_inputs));
  return run(b.else_branch, in.subspan(1 + b.then_inputs));
}

// ---- Loop ----------------------------------------------------------------
// Inputs: the trip count (i64), the condition (bool), `carried` initial
// values, then the enclosing graph's values the body reads. The body takes
// (iteration number, condition, carried values, captured values) and gives
// (condition, carried values, scan outputs); the node gives the final
// carried values, then each scan output stacked over the iterations.

struct LoopBody {
  const Graph& body;
  std::size_t carried;
  std::size_t scans;
};

LoopBody loop_body_of(const Node& node, std::size_t inputs) {
  KILN_CHECK(node.subgraphs.size() == 1 && node.subgraphs[0], ErrorKind::InvalidArgument,
             "needs one body, has " + std::to_string(node.subgraphs.size()) + " subgraphs");
  const Graph& body = *node.subgraphs[0];
  const std::int64_t carried = node.attrs.get_int("carried", -1);
  KILN_CHECK(carried >= 0 && inputs >= 2 + static_cast<std::size_t>(carried) && body.inputs().size() == inputs &&
                 body.outputs().size() >= 1 + static_cast<std::size_t>(carried),
             ErrorKind::InvalidArgument,
             "has " + std::to_string(inputs) + " inputs and carried = " + std::to_string(carried) + "; its body takes " +
                 std::to_string(body.inputs().size()) + " and gives " + std::to_string(body.outputs().size()));
  const auto n = static_cast<std::size_t>(carried);
  return {body, n, body.outputs().size() - 1 - n};
}

bool is_scalar_of(const TensorType& t, DType dtype) {
  return t.dtype == dtype && !t.dynamic && num_elements(t.shape) == 1;
}

std::vector<TensorType> infer_loop(const Node& node, std::span<const TensorType> in) {
  check_known_attributes(node, {"carried"});
  const LoopBody b = loop_body_of(node, in.size());
  KILN_CHECK(is_scalar_of(in[0], DType::i64), ErrorKind::ShapeMismatch,
             "the trip count must be one i64, got " + describe("trip count", in[0]));
  KILN_CHECK(is_scalar_of(in[1], DType::boolean), ErrorKind::ShapeMismatch,
             "the condition must be one bool, got " + describe("condition", in[1]));
  for (std::size_t i = 2; i < in.size(); ++i) check_subgraph_input(b.body, i, in[i], "body");
  std::vector<TensorType> out;
  for (std::size_t k = 0; k < b.carried; ++k)
    out.push_back(joined(in[2 + k], b.body.value(b.body.outputs()[1 + k]).type, k));
  for (std::size_t k = 0; k < b.scans; ++k) {
    const TensorType& each = b.body.value(b.body.outputs()[1 + b.carried + k]).type;
    const bool rank_known = !each.dynamic || !each.shape.empty();
    Shape shape;
    if (rank_known) {
      shape.push_back(kDynamicDim);  // the iterations
      shape.insert(shape.end(), each.shape.begin(), each.shape.end());
    }
    out.push_back(dynamic_type(each.dtype, std::move(shape)));
  }
  return out;
}

std::vector<Tensor> run_loop(const Node& node, std::span<const Tensor> in, const Runner& run) {
  const LoopBody b = loop_body_of(node, in.size());
  const std::int64_t trips = in[0].values<std::int64_t>()[0];
  std::vector<Tensor> args(in.begin(), in.end());
  args[0] = Tensor(DType::i64, {});
  args[1] = Tensor(DType::boolean, {});
  args[1].bytes()[0] = in[1].bytes()[0] != std::byte{0} ? std::byte{1} : std::byte{0};
  std::vector<std::vector<Tensor>> scans(b.scans);
  for (std::int64_t i = 0; i < trips && args[1].bytes()[0] != std::byte{0}; ++i) {
    args[0] = Tensor(DType::i64, {});
    args[0].values<std::int64_t>()[0] = i;
    std::vector<Tensor> outs = run(b.body, args);
    args[1] = outs[0];
    for (std::size_t k = 0; k < b.carried; ++k) args[2 + k] = outs[1 + k];
    for (std::size_t k = 0; k < b.scans; ++k) {
      KILN_CHECK(scans[k].empty() || outs[1 + b.carried + k].shape() == scans[k].front().shape(),
                 ErrorKind::ShapeMismatch,
                 "scan output " + std::to_string(k) + " is " + shape_str(outs[1 + b.carried + k].shape()) +
                     " in iteration " + std::to_string(i) + ", " + shape_str(scans[k].front().shape()) + " before");
      scans[k].push_back(std::move(outs[1 + b.carried + k]));
    }
  }
  std::vector<Tensor> result(args.begin() + 2, args.begin() + 2 + static_cast<std::ptrdiff_t>(b.carried));
  for (std::size_t k = 0; k < b.scans; ++k)
    result.push_back(stacked(b.body.value(b.body.outputs()[1 + b.carried + k]).type, scans[k],
                             "scan output " + std::to_string(k)));
  return result;
}

// ---- Scan ----------------------------------------------------------------
// Inputs: `states` initial states, `scan_inputs` tensors scanned along axis 0,
// then the enclosing graph's values the body reads. The body takes (states,
// one slice of each scan input, captured values) and gives (states, one
// slice of each scan output); the node gives the final states, then the
// scan outputs stacked along axis 0. A direction of 1 scans in reverse.

struct ScanBody {
  const Graph& body;
  std::size_t states;
  std::size_t scan_inputs;
  std::size_t scan_outputs;
  std::vector<std::int64_t> input_directions, output_directions;
};

ScanBody scan_body_of(const Node& node, std::size_t inputs) {
  KILN_CHECK(node.subgraphs.size() == 1 && node.subgraphs[0], ErrorKind::InvalidArgument,
             "needs one body, has " + std::to_string(node.subgraphs.size()) + " subgraphs");
  const Graph& body = *node.subgraphs[0];
  const std::int64_t states = node.attrs.get_int("states", -1);
  const std::int64_t scans = node.attrs.get_int("scan_inputs", -1);
  KILN_CHECK(states >= 0 && scans >= 1 && inputs >= static_cast<std::size_t>(states + scans) &&
                 body.inputs().size() == inputs && body.outputs().size() >= static_cast<std::size_t>(states),
             ErrorKind::InvalidArgument,
             "has " + std::to_string(inputs) + " inputs, states = " + std::to_string(states) + " and scan_inputs = " +
                 std::to_string(scans) + "; its body takes " + std::to_string(body.inputs().size()) + " and gives " +
                 std::to_string(body.outputs().size()));
  ScanBody b{body, static_cast<std::size_t>(states), static_cast<std::size_t>(scans),
             body.outputs().size() - static_cast<std::size_t>(states), node.attrs.get_ints("input_directions", {}),
             node.attrs.get_ints("output_directions", {})};
  KILN_CHECK(b.input_directions.size() == b.scan_inputs && b.output_directions.size() == b.scan_outputs,
             ErrorKind::InvalidArgument, "needs one direction per scan input and per scan output");
  return b;
}

std::vector<TensorType> infer_scan(const Node& node, std::span<const TensorType> in) {
  check_known_attributes(node, {"states", "scan_inputs", "input_directions", "output_directions"});
  const ScanBody b = scan_body_of(node, in.size());
  std::int64_t length = -1;
  for (std::size_t i = 0; i < in.size(); ++i) {
    TensorType got = in[i];
    if (i >= b.states && i < b.states + b.scan_inputs) {
      KILN_CHECK(!got.dynamic && !got.shape.empty() && (length < 0 || got.shape[0] == length), ErrorKind::ShapeMismatch,
                 "scan inputs must have known shapes of one length along axis 0, got " + describe("scan input", got));
      length = got.shape[0];
      got.shape.erase(got.shape.begin());
    }
    check_subgraph_input(b.body, i, got, "body");
  }
  std::vector<TensorType> out;
  for (std::size_t k = 0; k < b.states; ++k) out.push_back(joined(in[k], b.body.value(b.body.outputs()[k]).type, k));
  for (std::size_t k = 0; k < b.scan_outputs; ++k) {
    TensorType each = b.body.value(b.body.outputs()[b.states + k]).type;
    if (each.dynamic && each.shape.empty()) {
      out.push_back(each);
      continue;
    }
    each.shape.insert(each.shape.begin(), length);
    out.push_back(each);
  }
  return out;
}

// Slice `index` of `t` along axis 0.
Tensor slice_of(const Tensor& t, std::int64_t index) {
  Shape shape(t.shape().begin() + 1, t.shape().end());
  Tensor slice(t.dtype(), shape);
  const std::size_t bytes = slice.nbytes();
  std::copy_n(t.bytes().begin() + static_cast<std::ptrdiff_t>(bytes * static_cast<std::size_t>(index)), bytes,
              slice.bytes().begin());
  return slice;
}

std::vector<Tensor> run_scan(const Node& node, std::span<const Tensor> in, const Runner& run) {
  const ScanBody b = scan_body_of(node, in.size());
  const std::int64_t length = in[b.states].shape().at(0);
  std::vector<Tensor> args(in.begin(), in.end());
  std::vector<std::vector<Tensor>> scans(b.scan_outputs);
  for (std::int64_t step = 0; step < length; ++step) {
    for (std::size_t j = 0; j < b.scan_inputs; ++j)
      args[b.states + j] = slice_of(in[b.states + j], b.input_directions[j] == 1 ? length - 1 - step : step);
    std::vector<Tensor> outs = run(b.body, args);
    for (std::size_t k = 0; k < b.states; ++k) args[k] = outs[k];
    for (std::size_t k = 0; k < b.scan_outputs; ++k) {
      KILN_CHECK(scans[k].empty() || outs[b.states + k].shape() == scans[k].front().shape(), ErrorKind::ShapeMismatch,
                 "scan output " + std::to_string(k) + " changes shape at step " + std::to_string(step));
      scans[k].push_back(std::move(outs[b.states + k]));
    }
  }
  std::vector<Tensor> result(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(b.states));
  for (std::size_t k = 0; k < b.scan_outputs; ++k) {
    if (b.output_directions[k] == 1) std::reverse(scans[k].begin(), scans[k].end());
    result.push_back(stacked(b.body.value(b.body.outputs()[b.states + k]).type, scans[k],
                             "scan output " + std::to_string(k)));
  }
  return result;
}

// A control-flow op: any number of inputs and outputs; its reference runs
// the subgraphs on the reference too.
OpSchema control_schema(const std::string& name, int min_inputs, decltype(OpSchema::infer) infer,
                        decltype(OpSchema::run_with_subgraphs) run, const std::string& summary) {
  auto reference = [run](const Node& node, std::span<const Tensor> in) {
    return run(node, in, [](const Graph& subgraph, std::span<const Tensor> inputs) {
      return run_reference(subgraph, inputs);
    });
  };
  OpSchema s = make_schema(name, min_inputs, 1 << 16, std::move(infer), std::move(reference), summary);
  s.variadic_outputs = true;
  s.run_with_subgraphs = std::move(run);
  return s;
}

}  // namespace

void register_control_ops(OpTable& table) {
  add_op(table, control_schema("If", 1, infer_if, run_if,
                               "runs the then- or else-branch (subgraphs) as the bool condition, read at run time, says"));
  add_op(table, control_schema("Loop", 2, infer_loop, run_loop,
                               "runs its body (a subgraph) while the iteration count is below the trip count and the "
                               "condition holds"));
  add_op(table, control_schema("Scan", 1, infer_scan, run_scan,
                               "runs its body (a subgraph) once per slice of the scan inputs, carrying state, stacking "
                               "scan outputs"));
}

}  // namespace kiln::graph::ops

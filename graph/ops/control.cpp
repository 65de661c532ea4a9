// Control flow: If with a condition known only at run time. The node holds
// its two branches as subgraphs (Node::subgraphs: then, else); its inputs are
// the condition, then the values of the enclosing graph the then-branch
// reads (attribute `then_inputs` counts them), then those the else-branch
// reads, each in its branch's input order. The condition is read on the host
// and the chosen branch runs, so an If is always a graph break.
#include "graph/op_registry.h"
#include "graph/ops/ops.h"

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
  check_known_attributes(node, {"then_inputs"});
  const Branches b = branches_of(node, in.size());
  KILN_CHECK(in[0].dtype == DType::boolean && !in[0].dynamic && num_elements(in[0].shape) == 1,
             ErrorKind::ShapeMismatch, "the condition must be one bool, got " + describe("condition", in[0]));
  auto check_inputs = [&](const Graph& branch, std::size_t first, const char* which) {
    for (std::size_t i = 0; i < branch.inputs().size(); ++i) {
      const TensorType& want = branch.value(branch.inputs()[i]).type;
      const TensorType& got = in[first + i];
      // A probe (concrete) or the very type the branch was built for.
      KILN_CHECK(got == want || (!got.dynamic && type_accepts(want, got)), ErrorKind::ShapeMismatch,
                 std::string("the ") + which + "-branch's input '" + branch.value(branch.inputs()[i]).name + "' is " +
                     type_str(want) + ", the node passes " + type_str(got));
    }
  };
  check_inputs(b.then_branch, 1, "then");
  check_inputs(b.else_branch, 1 + b.then_inputs, "else");
  std::vector<TensorType> out;
  for (std::size_t i = 0; i < b.then_branch.outputs().size(); ++i)
    out.push_back(joined(b.then_branch.value(b.then_branch.outputs()[i]).type,
                         b.else_branch.value(b.else_branch.outputs()[i]).type, i));
  return out;
}

std::vector<Tensor> reference_if(const Node& node, std::span<const Tensor> in) {
  const Branches b = branches_of(node, in.size());
  const bool taken = in[0].bytes()[0] != std::byte{0};
  if (taken) return run_reference(b.then_branch, in.subspan(1, b.then_inputs));
  return run_reference(b.else_branch, in.subspan(1 + b.then_inputs));
}

}  // namespace

void register_control_ops(OpTable& table) {
  OpSchema s;
  s.name = "If";
  s.min_inputs = 1;
  s.max_inputs = 1 << 16;
  s.variadic_outputs = true;
  s.infer = infer_if;
  s.reference = reference_if;
  s.summary = "runs the then- or else-branch (subgraphs) as the bool condition, read at run time, says";
  add_op(table, std::move(s));
}

}  // namespace kiln::graph::ops

// Lowering: one graph node -> one kernel (or a view, when the op moves no
// data). Eager mode runs exactly these kernels, one per node; compiled mode
// runs them on the graph its passes produced.
//
// Buffer convention: a lowered kernel's buffers are the node's present inputs
// (omitted optional inputs skipped), in order, then its outputs, in order.
#pragma once

#include "graph/ir.h"
#include "src/kernel/ir.h"
#include "shaders/target.h"

#include <optional>
#include <span>
#include <string>

namespace kiln::lower {

struct LoweredNode {
  enum class Kind { kernel, alias, empty };
  Kind kind = Kind::kernel;
  // Set when kind == kernel. For alias (Reshape, Flatten, Identity) output 0
  // is input 0's memory viewed with another shape. For empty, every output
  // has zero elements: there is nothing to compute.
  std::optional<kir::Kernel> kernel;
};

// nullopt if the node can be lowered, else why not ("dtype i64 is not
// supported by kernels yet", "op 'Foo' has no lowering"). `target` is the
// device the kernel is for (kernel templates pick their knobs from it).
std::optional<std::string> unsupported_reason(const graph::Node& node,
                                              std::span<const graph::TensorType> inputs,
                                              std::span<const graph::TensorType> outputs,
                                              const LowerTarget& target = {});

// Throws Error(Unsupported) naming the node, op and reason.
LoweredNode lower_node(const graph::Node& node,
                       std::span<const graph::TensorType> inputs,
                       std::span<const graph::TensorType> outputs,
                       const LowerTarget& target = {});

}  // namespace kiln::lower

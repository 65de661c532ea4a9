// Lowering: one graph node -> one kernel (or a view, when the op moves no
// data). Eager mode runs exactly these kernels, one per node; compiled mode
// runs them on the graph its passes produced.
//
// Buffer convention: a lowered kernel's buffers are the node's present inputs
// (omitted optional inputs skipped), in order, then its outputs, in order;
// an in-place kernel (lower_in_place) leaves out input 0, whose storage its
// output 0 is.
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

// Ops that can update input 0 where it lies (TensorScatter: a cache written
// a few rows at a time): the kernel that writes only what changes into
// output 0, which the caller must give input 0's storage, and which it may
// only do where nothing else reads input 0 (the fuser's plan_kernels
// decides). nullopt for other ops. For a node lower_node lowers to a kernel.
std::optional<kir::Kernel> lower_in_place(const graph::Node& node, std::span<const graph::TensorType> inputs,
                                          std::span<const graph::TensorType> outputs, const LowerTarget& target = {});

}  // namespace kiln::lower

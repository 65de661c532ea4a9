// The kernel plan of a graph: which nodes run as which kernels, in which
// order, and which run on the host. Needs no device, so `kiln dump` and the
// executor build the same kernels.
//
// Every node is lowered on its own first (lower::lower_node). In compiled
// mode the scheduler then fuses pointwise consumers into the kernel that
// produces their input (epilogue.h), so chains of pointwise ops collapse into
// their producer: into a convolution, GEMM or reduction where there is one,
// else into the first pointwise op of the chain. A consumer that is not
// pointwise (softmax, layer norm, a GEMM) takes pointwise producers as
// prologues instead (prologue.h), inlined at its loads. Both fuse through
// views (Reshape, Flatten) read only by the next node. A value is fused away only
// if it is read by exactly one node, is not a graph output, and both nodes
// run as kernels; the fused kernel must fit the target's buffer limit, be
// one the target supports, and hold at most PlanOptions::max_fused_nodes
// nodes. Eager mode plans one kernel per node.
#pragma once

#include "backends/backend.h"
#include "graph/ir.h"
#include "src/fuse/epilogue.h"
#include "shaders/target.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kiln::fuse {

// Most nodes fused into one kernel. Fusion grows a kernel by a copy of each
// consumer, so without a bound a chain of n pointwise ops would become one
// kernel of n copies: quadratic to build, and a shader no driver compiles
// quickly. Bounded, a long chain becomes many identical kernels that share
// one pipeline. Real models stay far below it (the zoo's largest group has 9).
inline constexpr std::size_t kMaxFusedNodes = 64;

struct PlanOptions {
  bool fuse = false;                    // compiled mode: fuse pointwise epilogues and prologues
  std::size_t max_fused_nodes = kMaxFusedNodes;  // nodes one fused kernel may hold
  lower::LowerTarget target;            // what lowering knows of the device
  std::uint32_t max_kernel_buffers = 0;  // TargetDesc::max_kernel_buffers (0: no limit)
  // Why the target cannot run a kernel, or nullopt (e.g. Backend::supports).
  // Empty: every kernel is accepted.
  std::function<std::optional<std::string>(const kir::Kernel&)> kernel_unsupported;
  // Fused kernels are checked (kir::verify). A caller that replaces most of
  // them with kernels checked before (a new extent of a dynamic shape set
  // takes its set's) checks the rest itself.
  bool verify_fused = true;
  // Each finished kernel that stores f16 results computes them in f16
  // (kir::use_f16_arithmetic; the f16_arithmetic setting, where the target
  // computes f16 natively: compiler::f16_arithmetic_unavailable).
  bool f16_arithmetic = false;
};

// One step of the plan, in execution order.
struct PlanStep {
  bool host = false;                 // a graph break run on the host reference implementation
  std::vector<graph::NodeId> nodes;  // in graph order; a host step has one
  std::string host_reason;           // why the node runs on the host
  std::optional<BoundKernel> kernel;  // a device step's (possibly fused) kernel and its bindings
};

struct KernelPlan {
  std::vector<PlanStep> steps;
  std::vector<graph::ValueId> root;  // by value id: the value whose memory it views (itself unless a view)
  std::vector<bool> fused_away;      // by value id: lives only in registers inside a fused kernel
  // By node id: its kernel writes output 0 into input 0's storage
  // (lower::lower_in_place), which output 0 views; only where nothing else
  // reads input 0's storage, which is neither a constant nor made on the host.
  std::vector<bool> in_place;
  int kernel_nodes = 0;              // nodes lowered to kernels (before fusion)
};

// Throws what lowering throws for a malformed node (reasons a node cannot
// run as a kernel become host steps instead).
KernelPlan plan_kernels(const graph::Graph& graph, const PlanOptions& options);

// Why a node must run on the host because it touches a data-dependent value,
// or nullopt. The text before any " (" is the same for every node ("input
// shape depends on data").
std::optional<std::string> dynamic_reason(const graph::Graph& graph, const graph::Node& node);

}  // namespace kiln::fuse

#include "src/fuse/schedule.h"

#include "src/base/check.h"
#include "src/fuse/prologue.h"
#include "src/kernel/f16_arithmetic.h"
#include "src/lower/lower.h"

#include <kiln/error.h>

#include <algorithm>
#include <set>

namespace kiln::fuse {
namespace {

constexpr const char* kDynamicInput = "input shape depends on data";
constexpr const char* kDynamicOutput = "output shape depends on data";
// A prologue is recomputed at every load of its value: only short ones are inlined.
constexpr std::size_t kMaxPrologueStatements = 24;
// Output rows of the GEMM template's largest register tile.
constexpr std::int64_t kGemmTileRows = 8;

// Consumers that read every element of an input many times (a convolution
// window, a resize's interpolation taps, a GEMM's operand once per tile of
// the other side) would run a prologue once per read, which measured slower
// than writing the value once (docs/benchmarks/pass-thresholds.md).
bool rereads_each_input_element(const graph::Graph& g, const graph::Node& consumer,
                                const std::vector<graph::NodeId>& producer_nodes) {
  if (consumer.op == "Resize") return true;
  bool gemm = consumer.op == "MatMul" || consumer.op == "Gemm";
  if (consumer.op == "Conv" && consumer.inputs.size() >= 2) {
    // [Co, Ci/g, kH, kW], or packed OIhw4o [Co/4, Ci/g, kH, kW, 4]: the window is dims 2 and 3.
    const Shape& w = g.value(consumer.inputs[1]).type.shape;
    if (w.size() >= 4 && w[2] * w[3] > 1) return true;
    // A 1x1 window is a GEMM over the output channels of each group; with
    // more of them than one register tile holds, each element is read again
    // per tile.
    const Shape& y = g.value(consumer.outputs[0]).type.shape;
    const std::int64_t groups = std::max<std::int64_t>(1, consumer.attrs.get_int("group", 1));
    gemm = y.size() > 1 && y[1] / groups > kGemmTileRows;
  }
  if (!gemm) return false;
  // A Transpose only remaps the index a load uses: free at every read.
  return !std::all_of(producer_nodes.begin(), producer_nodes.end(),
                      [&](graph::NodeId id) { return g.node(id).op == "Transpose"; });
}

// The lowered form of every node, before any fusion.
struct LoweredNodes {
  std::vector<std::optional<BoundKernel>> kernels;  // by node id: set for kernel nodes
  std::vector<std::optional<std::string>> host;     // by node id: set for graph breaks
};

// Readers of each value: node inputs, and the caller for a graph output.
std::vector<int> reader_counts(const graph::Graph& g) {
  std::vector<int> readers(g.values().size(), 0);
  for (const graph::Node& node : g.nodes())
    for (graph::ValueId v : node.inputs)
      if (v >= 0) ++readers[static_cast<std::size_t>(v)];
  for (graph::ValueId v : g.outputs()) ++readers[static_cast<std::size_t>(v)];
  return readers;
}

// Whether `node` may write its output 0 into its input 0's storage: that
// storage (the root of input 0's chain of views) is read by nothing else,
// each view in the chain by the next alone, and it is a graph input or a
// kernel's output (a constant is shared; a host step's output is also kept
// on the host, where it would go stale).
bool may_write_in_place(const graph::Graph& g, const graph::Node& node, const std::vector<int>& readers,
                        const LoweredNodes& lowered, const KernelPlan& plan) {
  if (node.inputs.empty() || node.inputs[0] < 0) return false;
  graph::ValueId v = node.inputs[0];
  while (true) {
    const graph::Value& value = g.value(v);
    if (readers[static_cast<std::size_t>(v)] != 1 || value.constant || value.type.dynamic) return false;
    if (plan.root[static_cast<std::size_t>(v)] == v) break;
    v = g.node(value.producer).inputs[0];  // a view: up to what it views
  }
  const graph::NodeId producer = g.value(v).producer;
  return producer == graph::kNoNode || lowered.kernels[static_cast<std::size_t>(producer)].has_value();
}

LoweredNodes lower_all(const graph::Graph& g, const PlanOptions& options, KernelPlan& plan) {
  LoweredNodes out;
  out.kernels.resize(g.nodes().size());
  out.host.resize(g.nodes().size());
  const std::vector<int> readers = reader_counts(g);
  for (const graph::Node& node : g.nodes()) {
    std::vector<graph::TensorType> in_types, out_types;
    for (graph::ValueId v : node.inputs)
      if (v >= 0) in_types.push_back(g.value(v).type);
    for (graph::ValueId v : node.outputs) out_types.push_back(g.value(v).type);

    std::optional<std::string> reason = dynamic_reason(g, node);
    if (!reason) reason = lower::unsupported_reason(node, in_types, out_types, options.target);
    std::optional<lower::LoweredNode> lowered;
    if (!reason) {
      lowered = lower::lower_node(node, in_types, out_types, options.target);
      if (lowered->kind == lower::LoweredNode::Kind::kernel && options.kernel_unsupported)
        reason = options.kernel_unsupported(*lowered->kernel);
    }
    if (reason) {
      out.host[static_cast<std::size_t>(node.id)] = std::move(reason);
      continue;
    }
    // Zero-sized outputs: no kernel, no host step (their storage is never
    // written; reading one back gives an empty tensor).
    if (lowered->kind == lower::LoweredNode::Kind::empty) continue;
    if (lowered->kind == lower::LoweredNode::Kind::alias) {
      plan.root[static_cast<std::size_t>(node.outputs[0])] = plan.root[static_cast<std::size_t>(node.inputs[0])];
      continue;
    }
    std::optional<kir::Kernel> in_place;
    if (may_write_in_place(g, node, readers, out, plan))
      in_place = lower::lower_in_place(node, in_types, out_types, options.target);
    if (in_place) {
      lowered->kernel = std::move(*in_place);
      plan.in_place[static_cast<std::size_t>(node.id)] = true;
      plan.root[static_cast<std::size_t>(node.outputs[0])] = plan.root[static_cast<std::size_t>(node.inputs[0])];
    }
    BoundKernel bound{std::move(*lowered->kernel), {}};
    for (std::size_t i = in_place ? 1 : 0; i < node.inputs.size(); ++i)
      if (node.inputs[i] >= 0) bound.values.push_back(node.inputs[i]);
    for (graph::ValueId v : node.outputs) bound.values.push_back(v);
    KILN_CHECK(bound.values.size() == bound.kernel.buffers.size(), ErrorKind::Internal,
               "node '" + node.name + "' (" + node.op + "): its kernel '" + bound.kernel.name + "' has " +
                   std::to_string(bound.kernel.buffers.size()) + " buffers for " +
                   std::to_string(bound.values.size()) + " inputs and outputs");
    out.kernels[static_cast<std::size_t>(node.id)] = std::move(bound);
    ++plan.kernel_nodes;
  }
  return out;
}

// Fuses pointwise consumers into their producers' steps, in graph order.
class Fuser {
 public:
  Fuser(const graph::Graph& g, const PlanOptions& options, KernelPlan& plan)
      : g_(g), options_(options), plan_(plan), consumers_(g.values().size()), is_output_(g.values().size(), false) {
    for (const graph::Node& node : g.nodes())
      for (graph::ValueId v : node.inputs)
        if (v >= 0) consumers_[static_cast<std::size_t>(v)].insert(node.id);
    for (graph::ValueId v : g.outputs()) is_output_[static_cast<std::size_t>(v)] = true;
  }

  void run() {
    index_steps();
    for (std::size_t i = 0; i < plan_.steps.size(); ++i) {
      if (plan_.steps[i].host || plan_.steps[i].nodes.size() != 1) continue;
      fuse_into_producers(i);
    }
    // A producer merged into a later step left an empty one behind.
    std::erase_if(plan_.steps, [](const PlanStep& step) { return merged_away(step); });
    // Each fused kernel is checked once, complete: checking after every
    // merge costs the whole kernel each time.
    if (options_.verify_fused)
      for (const PlanStep& step : plan_.steps)
        if (!step.host && step.nodes.size() > 1) kir::verify(step.kernel->kernel);
  }

 private:
  static bool merged_away(const PlanStep& step) { return !step.host && !step.kernel; }

  void index_steps() {
    step_of_node_.assign(g_.nodes().size(), -1);
    for (std::size_t s = 0; s < plan_.steps.size(); ++s)
      for (graph::NodeId n : plan_.steps[s].nodes) step_of_node_[static_cast<std::size_t>(n)] = static_cast<int>(s);
  }

  graph::ValueId root(graph::ValueId v) const { return plan_.root[static_cast<std::size_t>(v)]; }

  // Values (by root) that a step reads.
  std::set<graph::ValueId> reads(const PlanStep& step) const {
    std::set<graph::ValueId> out;
    if (step.host) {
      for (graph::ValueId v : g_.node(step.nodes[0]).inputs)
        if (v >= 0) out.insert(root(v));
      return out;
    }
    for (std::size_t b = 0; b < step.kernel->values.size(); ++b)
      if (step.kernel->kernel.buffers[b].access != kir::Access::write) out.insert(root(step.kernel->values[b]));
    return out;
  }

  // Whether the producer step `from` may move to `to` (where its consumer
  // is): no step in between may read what the producer writes.
  bool can_move(std::size_t from, std::size_t to) const {
    const BoundKernel& producer = *plan_.steps[from].kernel;
    std::set<graph::ValueId> written;
    for (std::size_t b = 0; b < producer.values.size(); ++b)
      if (producer.kernel.buffers[b].access != kir::Access::read) written.insert(root(producer.values[b]));
    for (std::size_t s = from + 1; s < to; ++s) {
      if (merged_away(plan_.steps[s])) continue;
      for (graph::ValueId v : reads(plan_.steps[s]))
        if (written.count(v)) return false;
    }
    return true;
  }

  // A value the consumer reads, the value the producer writes (the same, or
  // the root of a chain of views), and every value of that chain.
  struct Link {
    std::size_t producer_step = 0;
    graph::ValueId consumed = -1;
    graph::ValueId produced = -1;
    std::vector<graph::ValueId> chain;  // consumed ... produced
  };

  // Whether `v` may live only in registers: read only by `reader`, not a graph output, static.
  bool private_to(graph::ValueId v, graph::NodeId reader) const {
    const auto i = static_cast<std::size_t>(v);
    return !plan_.fused_away[i] && !is_output_[i] && !g_.value(v).type.dynamic &&
           consumers_[i] == std::set<graph::NodeId>{reader};
  }

  // The kernel steps before `at` whose output `node` reads (directly or
  // through views only it reads), latest first.
  std::vector<Link> links(const graph::Node& node, std::size_t at) const {
    std::vector<Link> out;
    // An in-place kernel does not read its input 0: it writes into it.
    const bool in_place = plan_.in_place[static_cast<std::size_t>(node.id)];
    for (std::size_t slot = in_place ? 1 : 0; slot < node.inputs.size(); ++slot) {
      const graph::ValueId v = node.inputs[slot];
      if (v < 0 || !private_to(v, node.id)) continue;
      if (std::any_of(out.begin(), out.end(), [&](const Link& l) { return l.consumed == v; })) continue;
      Link link;
      link.consumed = v;
      link.chain = {v};
      graph::ValueId cur = v;
      bool ok = true;
      while (ok && cur != root(cur)) {  // up through views, each read only by the next
        const graph::Node& view = g_.node(g_.value(cur).producer);
        // An in-place kernel's output shares its input's storage but is no
        // view: it writes only some of it, so nothing fuses into it.
        if (plan_.in_place[static_cast<std::size_t>(view.id)]) {
          ok = false;
          break;
        }
        ok = !view.inputs.empty() && view.inputs[0] >= 0 && private_to(view.inputs[0], view.id);
        if (ok) link.chain.push_back(cur = view.inputs[0]);
      }
      if (!ok || g_.value(cur).producer == graph::kNoNode) continue;
      const int step = step_of_node_[static_cast<std::size_t>(g_.value(cur).producer)];
      if (step < 0 || static_cast<std::size_t>(step) >= at || plan_.steps[static_cast<std::size_t>(step)].host) continue;
      link.producer_step = static_cast<std::size_t>(step);
      link.produced = cur;
      out.push_back(std::move(link));
    }
    std::sort(out.begin(), out.end(), [](const Link& a, const Link& b) { return a.producer_step > b.producer_step; });
    return out;
  }

  bool within_size_bound(std::size_t producer_step, std::size_t at) const {
    return plan_.steps[producer_step].nodes.size() + plan_.steps[at].nodes.size() <= options_.max_fused_nodes;
  }

  bool fits(const BoundKernel& fused) const {
    if (options_.max_kernel_buffers != 0 && fused.kernel.buffers.size() > options_.max_kernel_buffers) return false;
    return !(options_.kernel_unsupported && options_.kernel_unsupported(fused.kernel));
  }

  // Replaces the consumer's step with the fused one, producer's nodes first,
  // and empties the producer's (run() drops it at the end: erasing here
  // would make a long chain quadratic).
  void merge(const Link& link, std::size_t at, BoundKernel fused) {
    PlanStep& producer = plan_.steps[link.producer_step];
    PlanStep merged;
    merged.nodes = std::move(producer.nodes);
    const std::vector<graph::NodeId>& consumer_nodes = plan_.steps[at].nodes;
    merged.nodes.insert(merged.nodes.end(), consumer_nodes.begin(), consumer_nodes.end());
    merged.kernel = std::move(fused);
    producer = PlanStep{};
    for (graph::NodeId n : merged.nodes) step_of_node_[static_cast<std::size_t>(n)] = static_cast<int>(at);
    plan_.steps[at] = std::move(merged);
    for (graph::ValueId v : link.chain) plan_.fused_away[static_cast<std::size_t>(v)] = true;
  }

  // Epilogue first (the consumer is pointwise: inlined at the producer's
  // stores), else prologues (a pointwise producer inlined at the consumer's
  // loads; a consumer may take one per input, e.g. both operands of a MatMul).
  void fuse_into_producers(std::size_t at) {
    const graph::Node& node = g_.node(plan_.steps[at].nodes[0]);
    if (fuse_once(node, at, true)) return;
    bool merged = true;
    while (merged) merged = fuse_once(node, at, false);
  }

  bool fuse_once(const graph::Node& node, std::size_t at, bool epilogue) {
    // An in-place kernel stores only some elements: no epilogue position for all.
    if (epilogue && plan_.in_place[static_cast<std::size_t>(node.id)]) return false;
    for (const Link& link : links(node, at)) {
      const BoundKernel& producer = *plan_.steps[link.producer_step].kernel;
      const BoundKernel& consumer = *plan_.steps[at].kernel;
      const std::int64_t elements = num_elements(g_.value(link.produced).type.shape);
      if (!within_size_bound(link.producer_step, at)) continue;
      if (epilogue) {
        if (node.outputs.size() != 1) continue;
        const graph::TensorType& result = g_.value(node.outputs[0]).type;
        const graph::TensorType& read = g_.value(link.consumed).type;
        if (read.shape != result.shape || read.dtype != result.dtype) continue;
        if (epilogue_unfusable_reason(producer, consumer, link.produced, link.consumed, elements)) continue;
      } else if (producer.kernel.body.size() > kMaxPrologueStatements || rereads_each_input_element(g_, node, plan_.steps[link.producer_step].nodes) ||
                 prologue_unfusable_reason(producer, consumer, link.produced, link.consumed, elements)) {
        continue;
      }
      if (!can_move(link.producer_step, at)) continue;
      BoundKernel fused = epilogue ? fuse_epilogue(producer, consumer, link.produced, link.consumed, elements)
                                   : fuse_prologue(producer, consumer, link.produced, link.consumed, elements);
      if (!fits(fused)) continue;
      merge(link, at, std::move(fused));
      return true;
    }
    return false;
  }

  const graph::Graph& g_;
  const PlanOptions& options_;
  KernelPlan& plan_;
  std::vector<std::set<graph::NodeId>> consumers_;  // by value id
  std::vector<bool> is_output_;                      // by value id
  std::vector<int> step_of_node_;                    // by node id; -1 for views
};

}  // namespace

std::optional<std::string> dynamic_reason(const graph::Graph& g, const graph::Node& node) {
  // (The subgraphs themselves run as models of their own: src/runtime/subgraph_models.h.)
  if (node.op == "Loop")
    return std::string("control flow: the host counts the iterations and checks the condition, the body runs each time");
  if (node.op == "Scan") return std::string("control flow: the host slices the scan inputs, the body runs per slice");
  if (!node.subgraphs.empty())
    return std::string("control flow: the host reads the condition, the branch it chooses runs");
  for (graph::ValueId v : node.inputs)
    if (v >= 0 && g.value(v).type.dynamic) return std::string(kDynamicInput) + " (input '" + g.value(v).name + "')";
  for (graph::ValueId v : node.outputs)
    if (g.value(v).type.dynamic) return std::string(kDynamicOutput);
  return std::nullopt;
}

KernelPlan plan_kernels(const graph::Graph& g, const PlanOptions& options) {
  KernelPlan plan;
  plan.root.resize(g.values().size());
  for (std::size_t i = 0; i < plan.root.size(); ++i) plan.root[i] = static_cast<graph::ValueId>(i);
  plan.fused_away.assign(g.values().size(), false);
  plan.in_place.assign(g.nodes().size(), false);

  LoweredNodes lowered = lower_all(g, options, plan);
  for (const graph::Node& node : g.nodes()) {
    const auto id = static_cast<std::size_t>(node.id);
    if (lowered.host[id]) {
      PlanStep& step = plan.steps.emplace_back();
      step.host = true;
      step.nodes = {node.id};
      step.host_reason = *lowered.host[id];
    } else if (lowered.kernels[id]) {
      PlanStep& step = plan.steps.emplace_back();
      step.nodes = {node.id};
      step.kernel = std::move(lowered.kernels[id]);
    }
  }
  if (options.fuse) Fuser(g, options, plan).run();
  if (options.f16_arithmetic)
    for (PlanStep& step : plan.steps)
      if (!step.host) kir::use_f16_arithmetic(step.kernel->kernel);
  return plan;
}

}  // namespace kiln::fuse

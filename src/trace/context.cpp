// The per-thread trace context and eager execution (src/trace/context.h).
#include "src/trace/context.h"

#include "graph/op_registry.h"

#include <algorithm>

namespace kiln::trace {

namespace {
thread_local Context* g_current = nullptr;
}  // namespace

TensorKey key_of(const Tensor& t) { return {t.bytes().data(), t.dtype(), t.shape()}; }

Context* current_context() { return g_current; }

ContextScope::ContextScope(Context* context) : previous_(g_current) { g_current = context; }
ContextScope::~ContextScope() { g_current = previous_; }

std::vector<Tensor> run_eager(const std::string& op, const std::vector<Tensor>& inputs,
                              const graph::Attributes& attrs) {
  graph::Node node;
  node.op = op;
  node.name = op;
  for (std::size_t i = 0; i < inputs.size(); ++i) node.inputs.push_back(static_cast<graph::ValueId>(i));
  node.attrs = attrs;
  // The checked reference validates the inputs by shape inference first.
  return graph::get_op(op).reference(node, inputs);
}

bool same_contents(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  auto x = a.bytes(), y = b.bytes();
  return std::equal(x.begin(), x.end(), y.begin(), y.end());
}

}  // namespace kiln::trace

// Internal to src/trace: the per-thread trace context that the Tensor
// functions of include/kiln/trace.h report to, and what recording and replay
// share (tensor identity, recorded ops, the retrace signal).
#pragma once

#include <kiln/trace.h>

#include "graph/ir.h"

#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace kiln::trace {

// What a traced tensor is: a function input, an output of a recorded op, or
// a constant captured from outside (a weight).
struct ValueRef {
  enum class Kind { input, op_output, constant };
  Kind kind = Kind::input;
  int index = 0;   // input index, op index or constant index
  int output = 0;  // op output index
  bool operator==(const ValueRef&) const = default;
};

struct RecordedOp {
  std::string op;
  graph::Attributes attrs;
  std::vector<ValueRef> inputs;
  int num_outputs = 0;
};

// Identifies a tensor by its storage (copies share it) and type, so that
// kiln::Tensor needs no trace handle.
using TensorKey = std::tuple<const std::byte*, DType, Shape>;
TensorKey key_of(const Tensor& t);

// Where fn must be traced again, and why (caught by TracedFunction).
struct RetraceNeeded {
  std::string reason;
};

class Context {
 public:
  virtual ~Context() = default;
  // Computes (or replays) one op and returns its outputs.
  virtual std::vector<Tensor> run_op(const std::string& op, const std::vector<Tensor>& inputs,
                                     const graph::Attributes& attrs) = 0;
  // Told before the values of x are read on the host.
  virtual void host_read(const Tensor& x, const SourceLocation& where, std::string_view what) = 0;
};

// The context of this thread, or nullptr when code runs plainly eagerly.
Context* current_context();

// Installs a context for its lifetime (nesting restores the previous one).
class ContextScope {
 public:
  explicit ContextScope(Context* context);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  Context* previous_;
};

// Runs one op on the reference implementation (eager execution).
std::vector<Tensor> run_eager(const std::string& op, const std::vector<Tensor>& inputs,
                              const graph::Attributes& attrs);

// True if both tensors hold the same dtype, shape and bytes.
bool same_contents(const Tensor& a, const Tensor& b);

}  // namespace kiln::trace

// Functions on kiln::Tensor that run eagerly (on the host reference
// implementation) and, inside kiln::compile(fn, ...), are traced into a graph.
//
//   auto fn = [](const std::vector<kiln::Tensor>& in) {
//     kiln::Tensor h = kiln::relu(kiln::matmul(in[0], in[1]));
//     if (kiln::item(kiln::op("ReduceMax", {h}, {})[0]) > 1.0)  // graph break
//       h = h * h;
//     return std::vector<kiln::Tensor>{h};
//   };
//   kiln::TracedFunction f = kiln::compile(fn, {a, b});
//   auto out = f({a, b});
//
// Reading a tensor's values on the host (item(), to_host()) inside traced
// code is a graph break, recorded with its source location. With
// fullgraph = true compile() fails listing every break; otherwise the traced
// prefix up to the first break is compiled and, on each call, fn runs again
// with the prefix's results replayed from the compiled graph and the rest run
// eagerly. Replay is guarded: if fn calls other ops (or uses a prefix value
// the compiled graph did not keep), it is re-traced and the reason logged.
//
// Tracing follows tensors by their storage: use these functions (not
// Tensor::reshaped() or writes through values()) on traced tensors, and keep
// fn free of side effects, since it runs again on every call.
#pragma once

#include <kiln/attributes.h>
#include <kiln/builder.h>
#include <kiln/export.h>
#include <kiln/kiln.h>
#include <kiln/tensor.h>

#include <functional>
#include <memory>
#include <optional>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

// Private implementation details (see TracedFunction).
namespace graph { class Graph; }
namespace internal { struct Access; }

// ---- ops (eager on the host; recorded while tracing) ---------------------------
KILN_API Tensor relu(const Tensor& x);
KILN_API Tensor sigmoid(const Tensor& x);
KILN_API Tensor tanh(const Tensor& x);
KILN_API Tensor gelu(const Tensor& x, bool tanh_approximation = false);
KILN_API Tensor add(const Tensor& a, const Tensor& b);  // numpy broadcasting
KILN_API Tensor sub(const Tensor& a, const Tensor& b);
KILN_API Tensor mul(const Tensor& a, const Tensor& b);
KILN_API Tensor div(const Tensor& a, const Tensor& b);
KILN_API Tensor operator+(const Tensor& a, const Tensor& b);
KILN_API Tensor operator-(const Tensor& a, const Tensor& b);
KILN_API Tensor operator*(const Tensor& a, const Tensor& b);
KILN_API Tensor operator/(const Tensor& a, const Tensor& b);
KILN_API Tensor matmul(const Tensor& a, const Tensor& b);
KILN_API Tensor conv2d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
              const Conv2dOptions& options = {});
KILN_API Tensor softmax(const Tensor& x, std::int64_t axis = -1);
KILN_API Tensor layer_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, std::int64_t axis = -1,
                  float epsilon = 1e-5f);
KILN_API Tensor reshape(const Tensor& x, std::vector<std::int64_t> shape);  // 0 copies a dim, one -1 is inferred
KILN_API Tensor transpose(const Tensor& x, std::vector<std::int64_t> perm);
KILN_API Tensor concat(const std::vector<Tensor>& xs, std::int64_t axis);
// Any registered op with ONNX-style attributes; returns all its outputs.
KILN_API std::vector<Tensor> op(const std::string& name, const std::vector<Tensor>& inputs, const Attributes& attrs);

// ---- host reads (graph breaks while tracing) -----------------------------------
// Where a host read is written: std::source_location's fields, captured with
// __builtin_FILE/LINE/FUNCTION because those name the caller on every
// supported compiler, while clang 15 gives std::source_location::current() in
// a default argument the declaration's own place.
class KILN_API SourceLocation {
 public:
  static constexpr SourceLocation current(const char* file = __builtin_FILE(), std::uint_least32_t line = __builtin_LINE(),
                                          const char* function = __builtin_FUNCTION()) noexcept {
    SourceLocation where;
    where.file_ = file;
    where.line_ = line;
    where.function_ = function;
    return where;
  }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr std::uint_least32_t line() const noexcept { return line_; }
  constexpr const char* function_name() const noexcept { return function_; }

 private:
  const char* file_ = "";
  std::uint_least32_t line_ = 0;
  const char* function_ = "";
};

// The value of a one-element f32, i32, i64, u8 or bool tensor.
KILN_API double item(const Tensor& x, SourceLocation where = SourceLocation::current());
// A host copy of the tensor, whose values the caller may read.
KILN_API Tensor to_host(const Tensor& x, SourceLocation where = SourceLocation::current());

// ---- compiling a function -------------------------------------------------------
using TensorFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// A host read found while tracing.
struct KILN_API TraceBreak {
  std::string file;
  std::uint32_t line = 0;
  std::string function;
  std::string what;  // "item()" or "to_host()"
};
// "graph break: item() at tests/test_tracing.cpp:42 (in f): reads a tensor's value on the host"
KILN_API std::string trace_break_str(const TraceBreak& b);

class KILN_API TracedFunction {
 public:
  // Runs fn: the compiled graph, or the compiled prefix and the rest replayed
  // eagerly; re-traces (logged) when the inputs' types or fn's ops change.
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);
  // The breaks of the current trace, in the order fn met them.
  const std::vector<TraceBreak>& graph_breaks() const;
  // How often fn was traced (1 after compile()).
  int traces() const;
  // The compiled graph's explanation (see CompiledModel::explain), plus the breaks.
  std::string explain() const;

 private:
  struct State;  // src/trace/traced_function.cpp
  friend struct internal::Access;
  // The traced graph that is compiled (the prefix up to the first break), for
  // kiln's tests (src/runtime/internal_access.h).
  const graph::Graph& traced_graph() const;
  friend TracedFunction compile(TensorFunction, const std::vector<Tensor>&, const CompileOptions&);
  std::shared_ptr<State> state_;
};

// Traces fn with the example inputs and compiles the result. Throws
// Unsupported listing every graph break (with its file:line) when
// options.fullgraph is set and fn reads tensor values on the host.
KILN_API TracedFunction compile(TensorFunction fn, const std::vector<Tensor>& example_inputs,
                       const CompileOptions& options = {});

}  // namespace kiln

// kiln::compile(fn, ...) and TracedFunction (include/kiln/trace.h).
#include <kiln/trace.h>

#include "graph/model_access.h"
#include "src/base/check.h"
#include "src/base/log.h"
#include "src/trace/recorder.h"
#include "src/trace/replayer.h"

namespace kiln {

struct TracedFunction::State {
  TensorFunction fn;
  CompileOptions options;
  trace::Trace trace;
  std::optional<CompiledModel> compiled;  // the whole graph, or the prefix up to the first break
  std::set<trace::OpOutput> keep;         // prefix values some path used after the break
  int traces = 0;

  // Traces fn on `inputs` and compiles what it recorded.
  void retrace(const std::vector<Tensor>& inputs) {
    trace::Recorder recorder(inputs, keep);
    std::vector<Tensor> outputs;
    {
      trace::ContextScope scope(&recorder);
      outputs = fn(inputs);
    }
    trace = recorder.finish(outputs);
    ++traces;
    keep.insert(trace.exported.begin(), trace.exported.end());
    if (!trace.breaks.empty() && options.fullgraph) {
      std::string list;
      for (const TraceBreak& b : trace.breaks) list += "\n  " + trace_break_str(b);
      throw_error(ErrorKind::Unsupported, "fullgraph: the traced function has " + std::to_string(trace.breaks.size()) +
                                              " graph break(s):" + list);
    }
    compiled.reset();
    if (trace.complete() || !trace.exported.empty())
      compiled = compile(internal::make_model(trace.graph, "traced_function"), options);
  }

  bool inputs_match(const std::vector<Tensor>& inputs, std::string& why) const {
    if (inputs.size() != trace.input_types.size()) {
      why = "it takes " + std::to_string(inputs.size()) + " inputs now, " +
            std::to_string(trace.input_types.size()) + " when traced";
      return false;
    }
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const graph::TensorType type{inputs[i].dtype(), inputs[i].shape()};
      if (type != trace.input_types[i]) {
        why = "input " + std::to_string(i) + " is " + graph::type_str(type) + ", traced as " +
              graph::type_str(trace.input_types[i]);
        return false;
      }
    }
    return true;
  }
};

std::vector<Tensor> TracedFunction::operator()(const std::vector<Tensor>& inputs) {
  State& s = *state_;
  if (std::string why; !s.inputs_match(inputs, why)) {
    base::log(base::LogLevel::warning, "kiln::compile(fn): re-tracing: " + why);
    s.retrace(inputs);
  }
  // A second attempt follows a fresh trace of these very inputs; it only
  // fails if fn is not deterministic.
  for (int attempt = 0;; ++attempt) {
    if (s.trace.complete()) return (*s.compiled)(inputs);
    std::vector<Tensor> prefix = s.compiled ? (*s.compiled)(inputs) : std::vector<Tensor>{};
    trace::Replayer replayer(s.trace, inputs, std::move(prefix));
    try {
      std::vector<Tensor> outputs;
      {
        trace::ContextScope scope(&replayer);
        outputs = s.fn(inputs);
      }
      replayer.finish(outputs);
      return outputs;
    } catch (const trace::RetraceNeeded& retrace) {
      KILN_CHECK(attempt == 0, ErrorKind::Internal,
                 "kiln::compile(fn): the function departs from a trace of the same inputs (" + retrace.reason +
                     "); is it deterministic and free of side effects?");
      if (replayer.missing()) s.keep.insert(*replayer.missing());
      base::log(base::LogLevel::warning, "kiln::compile(fn): re-tracing: " + retrace.reason);
      s.retrace(inputs);
    }
  }
}

const std::vector<TraceBreak>& TracedFunction::graph_breaks() const { return state_->trace.breaks; }
const graph::Graph& TracedFunction::traced_graph() const { return *state_->trace.graph; }
int TracedFunction::traces() const { return state_->traces; }

std::string TracedFunction::explain() const {
  const State& s = *state_;
  std::string text = "traced function: " + std::to_string(s.trace.ops.size()) + " op(s) compiled, " +
                     std::to_string(s.trace.breaks.size()) + " graph break(s)\n";
  for (const TraceBreak& b : s.trace.breaks) text += "  " + trace_break_str(b) + "\n";
  if (s.compiled) text += s.compiled->explain();
  return text;
}

TracedFunction compile(TensorFunction fn, const std::vector<Tensor>& example_inputs, const CompileOptions& options) {
  KILN_CHECK(fn != nullptr, ErrorKind::InvalidArgument, "kiln::compile(fn): fn is empty");
  TracedFunction f;
  f.state_ = std::make_shared<TracedFunction::State>();
  f.state_->fn = std::move(fn);
  f.state_->options = options;
  f.state_->retrace(example_inputs);
  return f;
}

}  // namespace kiln

// Internal to src/trace: runs fn again with the compiled prefix's results in
// place of the recorded ops (checking that fn calls the same ops on the same
// values), then eagerly after the first host read.
#pragma once

#include "src/trace/recorder.h"

namespace kiln::trace {

class Replayer : public Context {
 public:
  // `prefix_outputs` are the compiled graph's outputs, in trace.exported order.
  Replayer(const Trace& trace, const std::vector<Tensor>& inputs, std::vector<Tensor> prefix_outputs);

  // Throws RetraceNeeded when fn departs from the trace.
  std::vector<Tensor> run_op(const std::string& op, const std::vector<Tensor>& inputs,
                             const graph::Attributes& attrs) override;
  void host_read(const Tensor& x, const SourceLocation& where, std::string_view what) override;
  // Checks fn's outputs once it has returned.
  void finish(const std::vector<Tensor>& outputs);

  // The prefix value whose absence made the last RetraceNeeded, if any.
  const std::optional<OpOutput>& missing() const { return missing_; }

 private:
  std::optional<ValueRef> ref_of(const Tensor& t) const;
  // Throws RetraceNeeded if t stands for a prefix value the graph did not return.
  void check_available(const Tensor& t);

  const Trace& trace_;
  std::vector<Tensor> prefix_outputs_;
  std::map<TensorKey, ValueRef> known_;
  std::map<TensorKey, OpOutput> placeholders_;
  std::vector<Tensor> alive_;
  std::optional<OpOutput> missing_;
  int next_op_ = 0;
  bool broken_ = false;
};

}  // namespace kiln::trace

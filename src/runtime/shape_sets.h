// The input shapes a model with symbolic dims has been compiled for, as
// torch.compile guards a compiled frame: the first call's shapes get the
// first executor (the shapes the model was imported at, unless the first call
// brings others); a call with other shapes makes the model for them (an ONNX
// import re-run with those shapes), compiles it once and keeps it beside the
// others, logging why ("input 'x' dim 2 was 160, now 320; 2 compiled shape
// sets of 8"). Past the limit a call is an error naming the limit, or, if the
// caller chose so, runs eagerly with a warning (each such shape set once).
// Models without symbolic dims never get one of these: their executor checks
// the shapes itself.
#pragma once

#include <kiln/kiln.h>

#include "src/runtime/executor.h"

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace kiln::runtime {

class ShapeSets {
 public:
  // `first` runs the shapes `model` was made for; new executors take `options`.
  ShapeSets(std::shared_ptr<Executor> first, Executor::Options options, int limit, bool eager_past_limit);

  // The executor for calls with these input shapes (the first one's shapes
  // take the fast path). Thread-safe. Throws ShapeMismatch for shapes the
  // model cannot take, or past the limit without the eager fallback.
  std::shared_ptr<Executor> select(const std::vector<Shape>& shapes);

  // The executor of the most recent call (the first before any call).
  std::shared_ptr<Executor> latest() const;
  // "symbolic dims: ..., compiled shape sets: N of LIMIT" lines for explain().
  std::string describe() const;
  int compiled_sets() const;

 private:
  std::string why_new(const std::vector<Shape>& shapes) const;

  mutable std::mutex mutex_;
  Executor::Options options_;
  int limit_;
  bool eager_past_limit_;
  Model source_model_;
  struct Set {
    std::vector<Shape> shapes;
    std::shared_ptr<Executor> executor;
    std::string why;  // what differs from the first set ("" for the first)
  };
  std::vector<Set> compiled_;  // first: the model's own shapes
  std::vector<Set> eager_;     // past the limit
  std::shared_ptr<Executor> latest_;
};

// The input shapes of a call.
std::vector<Shape> shapes_of(const std::vector<Tensor>& inputs);
std::vector<Shape> shapes_of(const std::vector<CallInput>& inputs);

}  // namespace kiln::runtime

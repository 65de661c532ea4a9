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
//
// Dynamic dims (CompileOptions::dynamic_dims, or a dim whose extent changed
// once, with automatic_dynamic): a set compiled with some dims dynamic is
// planned beside a probe, the model at other extents of those dims, so its
// kernels take what depends on them as parameters (PlanRequest::probe_graph).
// A call that differs from such a set only in its dynamic dims is served by
// it: the model is imported (sharing the set's weights) and planned again for
// the call's extents on the host with the set's knobs, and its kernels are
// the set's, with their sources already compiled, so nothing compiles and
// no shape set is added. The most recent few such plans are kept (each holds
// device memory for its activations); older ones are planned again if needed.
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
  // The shape sets a compiled-model file holds: each executor runs its own
  // model's input shapes, and nothing else is compiled: a call with other
  // shapes is a ShapeMismatch naming `file` and the shapes it holds.
  ShapeSets(std::vector<std::shared_ptr<Executor>> held, std::string file);

  // Per input, per dim: whether the dim is dynamic.
  using Dims = std::vector<std::vector<bool>>;
  // The dims `options` marks dynamic in `model`, closed over symbolic names
  // (empty when none). Throws InvalidArgument for a dim that is not a
  // symbolic dim of an input of the model.
  static Dims marked_dims(const Model& model, const CompileOptions& options);
  // Executor options for `model` (its shapes) with `dims` dynamic: `options`
  // with the probe model and the dims' description; `options` itself when
  // no dim is dynamic, the mode is eager, or the probe cannot be made.
  static Executor::Options with_dynamic_dims(const Model& model, const Dims& dims, Executor::Options options);

  // The executor for calls with these input shapes (the first one's shapes
  // take the fast path). Thread-safe. Throws ShapeMismatch for shapes the
  // model cannot take, or past the limit without the eager fallback.
  std::shared_ptr<Executor> select(const std::vector<Shape>& shapes);

  // The executor of the most recent call (the first before any call).
  std::shared_ptr<Executor> latest() const;
  // "symbolic dims: ..., compiled shape sets: N of LIMIT" lines for explain().
  std::string describe() const;
  int compiled_sets() const;
  // Every compiled set's executors (members included), the first set's first.
  std::vector<std::shared_ptr<Executor>> executors() const;

 private:
  std::string why_new(const std::vector<Shape>& shapes) const;

  mutable std::mutex mutex_;
  Executor::Options options_;
  int limit_;
  bool eager_past_limit_;
  Model source_model_;
  std::string file_;  // the compiled-model file whose sets these are ("" for a model compiled here)
  struct Member {
    std::vector<Shape> shapes;
    std::shared_ptr<Executor> executor;
  };
  struct Set {
    std::vector<Shape> shapes;
    std::shared_ptr<Executor> executor;
    std::string why;  // what differs from the first set ("" for the first)
    Dims dynamic;     // empty: every dim as compiled
    std::vector<Member> members;  // other shapes it served, most recent first (at most kKeptMembers)
    int served = 1;               // distinct input shapes it served
  };
  static constexpr std::size_t kKeptMembers = 4;
  // Whether `set` (dynamic) serves `shapes`: they differ only in its dynamic
  // dims. Throws ShapeMismatch for an extent outside a marked dim's bounds.
  bool serves(const Set& set, const std::vector<Shape>& shapes) const;
  // `set_plan`: the plan of the set whose new extents `model` has, whose
  // knobs and graph choices it keeps; `extends` names that set ("shape set
  // 2"), else "". `set_plans`: the set's plans so far (PlanRequest::set_plans).
  std::shared_ptr<Executor> make(Model model, const Dims& dims, const compiler::Plan* set_plan = nullptr,
                                 std::string extends = "",
                                 std::vector<std::shared_ptr<const compiler::Plan>> set_plans = {}) const;
  Dims dims_for_new_set(const std::vector<Shape>& shapes) const;
  std::vector<Set> compiled_;  // first: the model's own shapes
  std::vector<Set> eager_;     // past the limit
  std::shared_ptr<Executor> latest_;
};

// The input shapes of a call.
std::vector<Shape> shapes_of(const std::vector<Tensor>& inputs);
std::vector<Shape> shapes_of(const std::vector<CallInput>& inputs);

}  // namespace kiln::runtime

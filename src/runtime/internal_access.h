// kiln's own way into the public callables (include/kiln/kiln.h, trace.h),
// whose public API names no internal type: the engine behind an EagerModel or
// CompiledModel, and a TracedFunction's compiled graph. For kiln's tools and
// tests that inspect plans; never installed. Not locked: use an engine once
// the model is prepared, from one thread. Model's graph: graph/model_access.h
// (included here, so this header is the one way in).
#pragma once

#include <kiln/kiln.h>
#include <kiln/trace.h>

#include "graph/model_access.h"
#include "src/runtime/executor.h"

namespace kiln::internal {

// The public callables' friend: the only code that reads their private members.
struct Access {
  static const Executor& engine(const EagerModel& model) { return *model.impl_; }
  static const Executor& engine(const CompiledModel& model) { return *model.impl_; }
  static Executor& mutable_engine(EagerModel& model) { return *model.impl_; }
  static Executor& mutable_engine(CompiledModel& model) { return *model.impl_; }
  static const graph::Graph& graph(const TracedFunction& fn) { return fn.traced_graph(); }
};

inline const Executor& engine(const EagerModel& model) { return Access::engine(model); }
inline const Executor& engine(const CompiledModel& model) { return Access::engine(model); }
// For tools that run the engine's own calls (`kiln check`: Executor::trace).
inline Executor& mutable_engine(EagerModel& model) { return Access::mutable_engine(model); }
inline Executor& mutable_engine(CompiledModel& model) { return Access::mutable_engine(model); }
// The traced graph that is compiled (the prefix up to the first break).
inline const graph::Graph& graph(const TracedFunction& fn) { return Access::graph(fn); }

}  // namespace kiln::internal

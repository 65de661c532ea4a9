// The resize_pad op family (issue: Models); filled in by its author.
#include "graph/ops/ops.h"

namespace kiln::graph::ops {

void register_resize_pad_ops(OpTable&) {}

}  // namespace kiln::graph::ops

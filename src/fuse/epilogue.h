// Epilogue fusion in the kernel IR: a pointwise consumer kernel is inlined
// into its producer at every store of the value they share, so the value is
// never written to or read back from memory.
//
// It works on lowered kernels, not on ops: whatever the consumer computes
// (activations, broadcast Add/Mul, BatchNormalization, Where, ...) is taken
// from its own kernel, with its global index replaced by the producer's store
// index and its load of the shared value replaced by the stored value.
#pragma once

#include "graph/ir.h"
#include "src/fuse/inlining.h"
#include "src/kernel/ir.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::fuse {

// Why `consumer` cannot be fused into `producer` through `value` (which has
// `elements` elements), or nullopt when it can. Fusable means: the producer
// writes `value` through one write-only buffer it never reads; the consumer
// runs one invocation per element of `value`, reads it only at its own global
// index, and writes one output only at its global index; and the consumer
// reads nothing the producer writes (other invocations would race with it).
std::optional<std::string> epilogue_unfusable_reason(const BoundKernel& producer, const BoundKernel& consumer,
                                                     graph::ValueId value, std::int64_t elements);

// The producer with `consumer` inlined at each store of `value`: the buffer
// of `value` becomes the consumer's output, and the consumer's other inputs
// are appended (or share the producer's buffer when it already reads them).
// Throws Error(Internal) if epilogue_unfusable_reason is not nullopt.
BoundKernel fuse_epilogue(const BoundKernel& producer, const BoundKernel& consumer, graph::ValueId value,
                          std::int64_t elements);

// The same through views: the producer writes `produced`, the consumer reads
// `consumed`, a view of it (Reshape, Flatten: the same elements in the same
// order), so the linear index is the same in both.
std::optional<std::string> epilogue_unfusable_reason(const BoundKernel& producer, const BoundKernel& consumer,
                                                     graph::ValueId produced, graph::ValueId consumed,
                                                     std::int64_t elements);
BoundKernel fuse_epilogue(const BoundKernel& producer, const BoundKernel& consumer, graph::ValueId produced,
                          graph::ValueId consumed, std::int64_t elements);

}  // namespace kiln::fuse
